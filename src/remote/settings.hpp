// RemoteOptions resolved against the environment and the defaults
// (modelzip/remote.hpp lists which variable fills which field): what every
// request to a remote object, read or write, is configured with.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "modelzip/progress.hpp"
#include "modelzip/remote.hpp"

namespace modelzip::remote {

// The time-outs of a RemoteOptions field left unset whose environment
// variable is unset too, in seconds (documented in modelzip/remote.hpp and
// docs/remote.md, "Time-outs").
inline constexpr long kDefaultConnectTimeoutS = 10;
inline constexpr long kDefaultLowSpeedTimeS = 30;
inline constexpr long kDefaultRequestTimeoutS = 600;

struct Settings {
  std::filesystem::path cache_dir;  // empty: memory only
  std::uint64_t cache_limit = std::uint64_t{10} << 30;
  std::string ca_file;
  long connect_timeout_ms = kDefaultConnectTimeoutS * 1000;
  long low_speed_time_s = kDefaultLowSpeedTimeS;
  // per kDeadlineUnit moved (curl_request.hpp)
  long request_timeout_ms = kDefaultRequestTimeoutS * 1000;
  std::uint64_t max_unranged = 0;
  ProgressCallback progress;
};

// The environment variable `name`, or "" when unset.
std::string env(const char* name);

// "10G", "512M", "4096": bytes; nullopt if malformed or too large.
std::optional<std::uint64_t> parse_size(const std::string& text);

// The size in the environment variable `name` (parse_size); nullopt when
// unset or empty. Throws Error(invalid_argument) naming the variable and
// `url` when it is set to something else than a size.
std::optional<std::uint64_t> env_size(const char* name, const std::string& url);

// Throws Error(invalid_argument) naming the variable and `url` when a
// variable it reads is set to a malformed value (never ignored silently).
Settings settings_from(const RemoteOptions& options, const std::string& url);

}  // namespace modelzip::remote
