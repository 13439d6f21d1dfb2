#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"
#include "remote/remote_source.hpp"
#include "remote/s3_multipart.hpp"
#include "remote/upload_config.hpp"

namespace modelzip::remote {

constexpr bool kCanUpload = MODELZIP_CAN_UPLOAD;

bool is_url(std::string_view path) noexcept {
  return path.starts_with("http://") || path.starts_with("https://") || path.starts_with("s3://");
}

bool is_s3_url(std::string_view path) noexcept {
  return path.starts_with("s3://");
}

bool can_upload(std::string_view path) noexcept {
  return kCanUpload && is_s3_url(path);
}

void refuse_write(std::string_view path) {
  if (!kCanUpload && is_s3_url(path))
    throw Error(ErrorCode::unsupported,
                "this modelzip was built without remote archive support (libcurl), so it cannot "
                "write s3:// archives: " +
                    std::string(path));
  if (is_url(path))
    throw Error(ErrorCode::unsupported, "remote archives are read-only: " + std::string(path));
}

// Here, not in s3_multipart.cpp: writers ask it in builds without libcurl
// too (where it is never true).
bool refused_for_another_writer(const Error& e) {
  const std::string& m = e.message();
  return e.code() == ErrorCode::io && m.find(kMayHaveTakenEffect) == std::string::npos &&
         (m.find(kChangedByAnotherWriter) != std::string::npos ||
          m.find(kChangedWhileReading) != std::string::npos);
}

namespace {

// The most a refused attempt's duration counts as the base of the pause
// before a new plan (ms).
constexpr long kMaxReplanPauseBase = 2000;

// A benchmark's whole number in `name` within [0, most], else `otherwise`.
long benchmark_setting(const char* name, long most, long otherwise) {
  const char* text = std::getenv(name);
  if (!text || !*text) return otherwise;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return *end == '\0' && value >= 0 && value <= most ? value : otherwise;
}

}  // namespace

int s3_replans() {
  static const int replans =
      static_cast<int>(benchmark_setting("MODELZIP_BENCHMARK_S3_REPLANS", 100, kS3Replans));
  return replans;
}

std::string planned_again_notice(const Error& e, int replans) {
  return "another writer's commit came first (" + e.message() +
         "): the commit is planned again against the archive as it is now (new plan " +
         std::to_string(replans) + " of " + std::to_string(s3_replans()) + ")";
}

void pause_before_new_plan(int replans, std::chrono::steady_clock::duration attempt) {
  using namespace std::chrono;
  // MODELZIP_BENCHMARK_S3_BACKOFF: -1 (unset) the refused attempt's own
  // duration as the base, 0 no pause, else a base of that many ms.
  static const long fixed_ms = benchmark_setting("MODELZIP_BENCHMARK_S3_BACKOFF", 60'000, -1);
  const milliseconds base = fixed_ms >= 0 ? milliseconds(fixed_ms)
                                          : std::min(duration_cast<milliseconds>(attempt),
                                                     milliseconds(kMaxReplanPauseBase));
  if (base.count() <= 0) return;
  thread_local std::mt19937_64 random{std::random_device{}()};
  const long long most = base.count() << std::min(replans - 1, 4);
  const milliseconds pause(std::uniform_int_distribution<long long>(0, most)(random));
  const auto until = steady_clock::now() + pause;
  while (!cancel_requested()) {
    const auto now = steady_clock::now();
    if (now >= until) return;
    std::this_thread::sleep_for(std::min<steady_clock::duration>(until - now, milliseconds(20)));
  }
}

Error save_cancelled(const Error& e, std::string_view doing, std::string_view outcome) {
  return e.reworded("save cancelled while " + std::string(doing) + " (" + e.message() +
                        "): the save did not happen (" + std::string(outcome) + ")",
                    e.context());
}

void refuse_url_of_file(std::string_view path, std::string_view kind) {
  if (is_url(path))
    throw Error(ErrorCode::unsupported,
                "a URL: " + std::string(kind) +
                    " files are read from local paths (download it first; modelzip archives are "
                    "read over http, https and s3, docs/remote.md)",
                ErrorContext{.archive = std::string(path)});
}

}  // namespace modelzip::remote
