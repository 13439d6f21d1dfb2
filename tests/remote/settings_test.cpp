// The settings every remote request is configured with (RemoteOptions, the
// environment, the defaults) and the pieces of a request that need no
// server: its deadline, the wording of a time-out, a capped body capture.
// (Requests against servers are tested in tests/remote/*.py.)
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "modelzip/error.hpp"
#include "remote/curl_request.hpp"
#include "remote/settings.hpp"

using modelzip::Error;
using modelzip::ErrorCode;
using modelzip::RemoteOptions;
using namespace modelzip::remote;

namespace {

const std::string kUrl = "http://127.0.0.1:1/a.zip";

// Sets an environment variable for the scope (unset: nullopt), restoring it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct Easy {
  Easy() : handle(curl_easy_init()) { REQUIRE(handle); }
  ~Easy() { curl_easy_cleanup(handle); }
  Easy(const Easy&) = delete;
  Easy& operator=(const Easy&) = delete;
  CURL* handle;
};

}  // namespace

TEST_CASE("the time-outs default to 10, 30 and 600 s, in settings_from and in Settings") {
  ScopedEnv connect("MODELZIP_CONNECT_TIMEOUT", std::nullopt);
  ScopedEnv low_speed("MODELZIP_LOW_SPEED_TIME", std::nullopt);
  ScopedEnv request("MODELZIP_REQUEST_TIMEOUT", std::nullopt);
  const Settings resolved = settings_from({}, kUrl), built;
  CHECK(resolved.connect_timeout_ms == 10'000);
  CHECK(resolved.low_speed_time_s == 30);
  CHECK(resolved.request_timeout_ms == 600'000);
  CHECK(built.connect_timeout_ms == resolved.connect_timeout_ms);
  CHECK(built.low_speed_time_s == resolved.low_speed_time_s);
  CHECK(built.request_timeout_ms == resolved.request_timeout_ms);
}

TEST_CASE("request_timeout: the option, else MODELZIP_REQUEST_TIMEOUT, else 600 s") {
  ScopedEnv unset("MODELZIP_REQUEST_TIMEOUT", std::nullopt);
  CHECK(settings_from({}, kUrl).request_timeout_ms == 600'000);
  {
    ScopedEnv env("MODELZIP_REQUEST_TIMEOUT", "2.5");
    CHECK(settings_from({}, kUrl).request_timeout_ms == 2'500);
    RemoteOptions options;
    options.request_timeout = 7;
    CHECK(settings_from(options, kUrl).request_timeout_ms == 7'000);
  }
  for (const char* bad : {"0", "-1", "ten", "2s", "1e7"}) {
    CAPTURE(bad);
    ScopedEnv env("MODELZIP_REQUEST_TIMEOUT", bad);
    try {
      settings_from({}, kUrl);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_argument);
      CHECK(e.context().archive == kUrl);
      CHECK(e.message().find("MODELZIP_REQUEST_TIMEOUT='" + std::string(bad) + "'") !=
            std::string::npos);
    }
  }
}

TEST_CASE("a time-out set in RemoteOptions is refused unless it is seconds above 0") {
  for (double bad : {0.0, -3.0, 2e6}) {
    for (auto field : {&RemoteOptions::connect_timeout, &RemoteOptions::low_speed_time,
                       &RemoteOptions::request_timeout}) {
      CAPTURE(bad);
      RemoteOptions options;
      options.*field = bad;
      try {
        settings_from(options, kUrl);
        FAIL("accepted");
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::invalid_argument);
        CHECK(e.context().archive == kUrl);
        CHECK(e.message().find("is not a number of seconds above 0") != std::string::npos);
      }
    }
  }
  RemoteOptions options;
  options.request_timeout = -1;
  try {
    settings_from(options, kUrl);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.message() ==
          "RemoteOptions::request_timeout -1 is not a number of seconds above 0 (at most 1e6)");
  }
}

TEST_CASE("a request is given request_timeout per 8 MiB it moves, at least once") {
  Settings settings;
  settings.request_timeout_ms = 3'000;
  Easy easy;
  CHECK(set_deadline(easy.handle, settings, 0) == 3'000);
  CHECK(set_deadline(easy.handle, settings, kDeadlineUnit) == 3'000);
  CHECK(set_deadline(easy.handle, settings, kDeadlineUnit + kDeadlineUnit / 2) == 4'500);
  CHECK(set_deadline(easy.handle, settings, 64 * kDeadlineUnit) == 192'000);
  // 5 GiB (S3's largest part) at the largest setting still fits.
  settings.request_timeout_ms = 1'000'000'000;
  CHECK(set_deadline(easy.handle, settings, std::uint64_t{5} << 30) == 640'000'000'000L);
}

TEST_CASE("an upload part gets more time with more than 4 parts in flight") {
  // The setting is sized for 4 requests sharing the link; 32 parts in flight
  // each move at an eighth of the speed of 4.
  Settings settings;
  settings.request_timeout_ms = 3'000;
  Easy easy;
  CHECK(set_deadline(easy.handle, settings, kDeadlineUnit, 1) == 3'000);
  CHECK(set_deadline(easy.handle, settings, kDeadlineUnit, kDeadlineShare) == 3'000);
  CHECK(set_deadline(easy.handle, settings, kDeadlineUnit, 6) == 4'500);
  CHECK(set_deadline(easy.handle, settings, 2 * kDeadlineUnit, 32) == 48'000);
  // 5 GiB parts, 64 in flight, the largest setting: it still fits.
  settings.request_timeout_ms = 1'000'000'000;
  CHECK(set_deadline(easy.handle, settings, std::uint64_t{5} << 30, 64) == 10'240'000'000'000L);
}

TEST_CASE("a time-out names the request deadline only when it passed") {
  Settings settings;
  settings.request_timeout_ms = 2'000;
  const std::string past =
      timed_out(settings, 4'000, 4'001, "bytes 0-99", "10 of 100 bytes received", "curl says");
  CHECK(past ==
        "timed out: bytes 0-99 not done within 4 s: 10 of 100 bytes received "
        "(MODELZIP_REQUEST_TIMEOUT or RemoteOptions::request_timeout, now 2 s per 8 MiB a "
        "request moves: raise it for a slower link)");
  CHECK(timed_out(settings, 40'000, 40'000, "HEAD", "no complete answer", "", "raise X") ==
        "timed out: HEAD not done within 40 s: no complete answer (raise X)");
  const std::string early =
      timed_out(settings, 4'000, 3'800, "bytes 0-99", "10 of 100 bytes received", "curl says");
  CHECK(early == "timed out (no connection within 10 s, or under 1 KiB/s for 30 s): curl says");
  CHECK(seconds_text(0) == "0");
  CHECK(seconds_text(2'500) == "2.5");
  CHECK(seconds_text(1'050) == "1.05");
  CHECK(seconds_text(600'000) == "600");
}

TEST_CASE("CappedBody keeps an answer up to its cap and ends a longer one") {
  global_init();
  const auto path =
      std::filesystem::temp_directory_path() / ("modelzip-capped-body-" + std::to_string(getpid()));
  for (std::size_t size :
       {std::size_t{0}, std::size_t{100}, std::size_t{101}, std::size_t{70'000}}) {
    CAPTURE(size);
    std::ofstream(path, std::ios::binary) << std::string(size, 'b');
    Easy easy;
    const std::string url = "file://" + path.string();
    curl_easy_setopt(easy.handle, CURLOPT_URL, url.c_str());
    CappedBody body(100);
    body.capture(easy.handle);
    const CURLcode code = curl_easy_perform(easy.handle);
    if (size <= 100) {
      CHECK(code == CURLE_OK);
      CHECK_FALSE(body.overflow);
      CHECK(body.text == std::string(size, 'b'));
    } else {
      CHECK(code == CURLE_WRITE_ERROR);
      CHECK(body.overflow);
      CHECK(body.text.size() <= 100);
    }
  }
  std::filesystem::remove(path);
}
