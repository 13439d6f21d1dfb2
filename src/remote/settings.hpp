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

struct Settings {
  std::filesystem::path cache_dir;  // empty: memory only
  std::uint64_t cache_limit = std::uint64_t{10} << 30;
  std::string ca_file;
  long connect_timeout_ms = 10'000;
  long low_speed_time_s = 30;
  std::uint64_t max_unranged = 0;
  ProgressCallback progress;
};

// The environment variable `name`, or "" when unset.
std::string env(const char* name);

// "10G", "512M", "4096": bytes; nullopt if malformed or too large.
std::optional<std::uint64_t> parse_size(const std::string& text);

Settings settings_from(const RemoteOptions& options);

}  // namespace modelzip::remote
