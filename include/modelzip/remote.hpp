// Options for archives read from http://, https:// and s3:// URLs (see
// Archive::open). Remote reading needs modelzip built with libcurl (meson
// feature `remote`); without it, opening a URL throws Error(unsupported).
//
// Every field left unset takes its value from the environment, then from the
// default named here, so command-line users configure the same things:
//   cache_dir        MODELZIP_CACHE_DIR, else $XDG_CACHE_HOME/modelzip,
//                    else ~/.cache/modelzip
//   cache_limit      MODELZIP_CACHE_LIMIT (bytes, suffixes K M G), default 10G
//   no_cache         MODELZIP_NO_CACHE=1
//   ca_file          MODELZIP_CA_FILE (PEM bundle of trusted CAs for https)
//   connect_timeout  MODELZIP_CONNECT_TIMEOUT (seconds), default 10
//   low_speed_time   MODELZIP_LOW_SPEED_TIME (seconds below 1 KiB/s), default 30
//   request_timeout  MODELZIP_REQUEST_TIMEOUT (seconds one request may take,
//                    per 8 MiB it moves), default 600
// A time-out, set here or in the environment, is seconds above 0 (at most
// 1e6); another value makes opening or writing the URL throw
// Error(invalid_argument).
// S3 takes AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_REGION (default us-east-1) and AWS_ENDPOINT_URL (S3-compatible stores,
// addressed path-style) from the environment.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "modelzip/export.hpp"
#include "modelzip/progress.hpp"

namespace modelzip {

struct MODELZIP_API RemoteOptions {
  // Folder of the byte cache: the fetched ranges of each remote object (one
  // sparse file per URL and version), reused by later opens of the same
  // version until the machine reboots (the file is not synced); least
  // recently used objects are removed beyond cache_limit.
  std::optional<std::filesystem::path> cache_dir{};
  std::optional<std::uint64_t> cache_limit{};
  // Keep fetched bytes in memory only (nothing is written to disk).
  std::optional<bool> no_cache{};
  std::optional<std::string> ca_file{};
  std::optional<double> connect_timeout{};  // seconds
  // A transfer below 1 KiB/s for this long fails. Not applied to an S3
  // CompleteMultipartUpload or UploadPartCopy, which may send nothing while
  // the server works: their deadline bounds them, and TCP keep-alive probes
  // (idle for this long, then every 10 s) notice a peer that is gone. An
  // UploadPartCopy that receives no byte at all for this long per 8 MiB it
  // copies (at least once) fails as a stalled server.
  std::optional<double> low_speed_time{};  // seconds
  // The deadline of one request, from its start to its last byte (reads are
  // cut into requests of at most 8 MiB; a request that moves more, an
  // upload part or a server-side copy, gets this per 8 MiB; an upload part
  // sent while more than 4 are in flight gets it times in-flight / 4, since
  // they share the link). A request past it fails at once, naming the bytes
  // moved (Error(io)); no retry.
  std::optional<double> request_timeout{};  // seconds
  // A server that ignores Range (answers 200 with the whole object) is only
  // accepted for objects up to this size.
  std::uint64_t max_unranged_bytes = std::uint64_t{64} << 20;
  // Hears of long fetches (more than 8 MiB at once); called from the thread
  // that reads. Returning false cancels (Error(cancelled)).
  ProgressCallback progress{};
};

}  // namespace modelzip
