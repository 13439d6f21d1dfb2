#include "remote/settings.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/fail.hpp"

namespace modelzip::remote {
namespace {

double env_seconds(const char* name, double fallback, const std::string& url) {
  std::string v = env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(d > 0) || d > 1e6)
    detail::fail_invalid(std::string(name) + "='" + v + "' is not a number of seconds above 0",
                         ErrorContext{.archive = url});
  return d;
}

// The RemoteOptions field `field` if set, else the environment variable
// `name`, else `fallback`; either is refused unless above 0 and at most 1e6.
double seconds(const std::optional<double>& option, const char* field, const char* name,
               double fallback, const std::string& url) {
  if (!option) return env_seconds(name, fallback, url);
  if (!(*option > 0 && *option <= 1e6)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", *option);
    detail::fail_invalid(std::string("RemoteOptions::") + field + " " + value +
                             " is not a number of seconds above 0 (at most 1e6)",
                         ErrorContext{.archive = url});
  }
  return *option;
}

// Unset, empty or "0": false; "1": true; anything else is refused.
bool env_flag(const char* name, const std::string& url) {
  const std::string v = env(name);
  if (v.empty() || v == "0") return false;
  if (v == "1") return true;
  detail::fail_invalid(std::string(name) + "='" + v + "' is not 1 (on) or 0 (off)",
                       ErrorContext{.archive = url});
}

}  // namespace

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::optional<std::uint64_t> parse_size(const std::string& text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view unit(end, text.data() + text.size() - end);
  int shift = unit.empty()                   ? 0
              : unit == "K" || unit == "KiB" ? 10
              : unit == "M" || unit == "MiB" ? 20
              : unit == "G" || unit == "GiB" ? 30
              : unit == "T" || unit == "TiB" ? 40
                                             : -1;
  if (shift < 0 || (shift > 0 && value > (UINT64_MAX >> shift))) return std::nullopt;
  return value << shift;
}

std::optional<std::uint64_t> env_size(const char* name, const std::string& url) {
  const std::string v = env(name);
  if (v.empty()) return std::nullopt;
  auto size = parse_size(v);
  if (!size)
    detail::fail_invalid(std::string(name) + "='" + v +
                             "' is not a size (bytes, or with a suffix K, M, G, T: e.g. 10G)",
                         ErrorContext{.archive = url});
  return size;
}

Settings settings_from(const RemoteOptions& o, const std::string& url) {
  namespace fs = std::filesystem;
  Settings s;
  bool no_cache = o.no_cache ? *o.no_cache : env_flag("MODELZIP_NO_CACHE", url);
  if (!no_cache) {
    if (o.cache_dir)
      s.cache_dir = *o.cache_dir;
    else if (!env("MODELZIP_CACHE_DIR").empty())
      s.cache_dir = env("MODELZIP_CACHE_DIR");
    else if (!env("XDG_CACHE_HOME").empty())
      s.cache_dir = fs::path(env("XDG_CACHE_HOME")) / "modelzip";
    else if (!env("HOME").empty())
      s.cache_dir = fs::path(env("HOME")) / ".cache" / "modelzip";
  }
  if (o.cache_limit)
    s.cache_limit = *o.cache_limit;
  else if (auto v = env_size("MODELZIP_CACHE_LIMIT", url))
    s.cache_limit = *v;
  s.ca_file = o.ca_file ? *o.ca_file : env("MODELZIP_CA_FILE");
  s.connect_timeout_ms =
      static_cast<long>(1000 * seconds(o.connect_timeout, "connect_timeout",
                                       "MODELZIP_CONNECT_TIMEOUT", kDefaultConnectTimeoutS, url));
  s.low_speed_time_s = std::max(
      1L, static_cast<long>(seconds(o.low_speed_time, "low_speed_time", "MODELZIP_LOW_SPEED_TIME",
                                    kDefaultLowSpeedTimeS, url)));
  s.request_timeout_ms = std::max(
      1L,
      static_cast<long>(1000 * seconds(o.request_timeout, "request_timeout",
                                       "MODELZIP_REQUEST_TIMEOUT", kDefaultRequestTimeoutS, url)));
  s.max_unranged = o.max_unranged_bytes;
  s.progress = o.progress;
  return s;
}

}  // namespace modelzip::remote
