// Remote archives: the ByteSource that fetches an object's byte ranges over
// HTTP(S) or S3 with libcurl into a local cache file (remote/cache_file.hpp),
// which the readers map like a local archive. Its settings, endpoint (URL
// and signing) and the libcurl options it shares with the S3 writer are in
// remote/settings.hpp, remote/endpoint.hpp and remote/curl_request.hpp.
//
// Protocol: a HEAD pins the object (size, ETag, Last-Modified); every later
// request is an explicit range (never a suffix range) sent with If-Match
// (strong ETag) or If-Unmodified-Since, and its answer must be a 206 whose
// Content-Range, size and ETag agree with the pin; a 412 or any disagreement
// throws Error(io, "archive changed on the server while reading"). Requests
// of one ensure() are coalesced (gaps up to kMaxGap fetched along), cut into
// pieces of at most kMaxRequest bytes and run kParallel at a time
// (kParallelSmall for batches of small requests; curl multi, connections kept
// alive between calls). Transient failures (5xx,
// 429, resets, refused connections, truncated bodies) are retried
// kMaxAttempts times in all with doubling pauses from 250 ms (longer where
// an answer says Retry-After, up to 10 s: retry_pause()); time-outs
// (connect, low speed, the request deadline: curl_request.hpp's
// set_deadline(), for the range or, until a server has answered a range
// with 206, for the whole object where it may answer with that) and other
// statuses are reported at once, naming the URL and status. Bytes written
// never exceed the range asked for, whatever the headers say. A server that
// ignores Range (200) is accepted only for objects up to
// RemoteOptions::max_unranged_bytes.
//
// Thread safety: ensure() may be called from several threads; calls are
// serialized.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "io/byte_source.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/remote.hpp"

namespace modelzip::remote {

inline constexpr std::uint64_t kMaxGap = std::uint64_t{16} << 10;
inline constexpr std::uint64_t kMaxRequest = std::uint64_t{8} << 20;
inline constexpr int kParallel = 4;
// Batches of requests of at most kSmallRequest bytes run kParallelSmall at once.
inline constexpr std::uint64_t kSmallRequest = std::uint64_t{64} << 10;
inline constexpr int kParallelSmall = 16;
// libcurl's receive buffer for requests larger than kSmallRequest (its
// default, 16 KiB, costs a callback and a cache write per 16 KiB).
inline constexpr long kReceiveBuffer = 512L << 10;
inline constexpr int kMaxAttempts = 4;
// The message of Error(io) for an object that changed while it was read.
inline constexpr const char* kChangedWhileReading = "archive changed on the server while reading";

// Whether `path` is a URL open() handles (http://, https://, s3://).
bool is_url(std::string_view path) noexcept;

// Whether `path` is an s3:// URL.
bool is_s3_url(std::string_view path) noexcept;

// Whether Writer can write `path` by uploading it: an s3:// URL, in a
// modelzip built with libcurl.
bool can_upload(std::string_view path) noexcept;

// Writers that cannot upload call this first: throws Error(unsupported) when
// `path` is a URL: "remote archives are read-only: <url>" for http(s), and
// for s3:// in a build without libcurl that it was built without remote
// archive support.
void refuse_write(std::string_view path);

// Readers of files that are not archives (tensor files, embedding files) call
// this first: throws Error(unsupported), naming `path`, when it is a URL: "a
// URL: <kind> files are read from local paths (download it first; ...)", where
// "cannot open: No such file or directory" would not say why.
void refuse_url_of_file(std::string_view path, std::string_view kind);

struct Opened {
  Bytes file;  // the whole object's extent, filled on demand by `source`
  std::shared_ptr<const io::ByteSource> source;
  std::string etag;  // the version pinned (quotes included; empty if the server sent none)
};

// What open() does when an s3:// object's HEAD is refused (403, 404).
enum class MissingObject {
  explain,  // one GET fetches S3's error document ("no such key 'k' ...")
  expected  // a 404 is an answer, not a failure to explain (a writer probing
            // whether the archive exists): Error(not_found) at once; a 403
            // is still explained
};

// Pins the object at `url` and prepares its cache. Throws Error(not_found)
// (HTTP 404), Error(io) (network, other HTTP status), Error(unsupported)
// (built without libcurl, no range support).
Opened open(const std::string& url, const RemoteOptions& options,
            MissingObject missing = MissingObject::explain);

}  // namespace modelzip::remote
