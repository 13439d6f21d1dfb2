// An S3 multipart-upload client for one object (s3://BUCKET/KEY): the
// requests a writer of that object needs, each a blocking call.
//
//   create()            CreateMultipartUpload (checksum algorithm CRC32)
//   upload_part()       UploadPart with x-amz-checksum-crc32 of the body
//   upload_part_copy()  UploadPartCopy of a byte range of an existing object
//                       (x-amz-copy-source-range; x-amz-copy-source-if-match
//                       when the source's ETag is given)
//   complete()          CompleteMultipartUpload, optionally conditional:
//                       If-None-Match: * (the key must not exist) or
//                       If-Match: <ETag> (the key must still be that version)
//   abort()             AbortMultipartUpload
//   list_uploads()      ListMultipartUploads of this key (all pages)
//
// Parts are numbered 1..10000; S3 requires 5 MiB..5 GiB for every part but
// the last (checked by the server, not here). Requests are signed as reads
// are (remote/endpoint.hpp); bodies are sent UNSIGNED-PAYLOAD and checked by
// their CRC-32 instead.
//
// Retries: each request is tried up to kS3Attempts times, pausing 250 ms,
// doubling (longer where the answer says Retry-After, up to 10 s), on refused or reset connections,
// truncated answers, HTTP 5xx (but 501), 429 and S3's SlowDown / RequestTimeout / InternalError
// answers (a 200 carrying an <Error> body included). Time-outs are those of
// reads (connect, low speed, the request deadline: set_deadline() for the
// part's body, scaled by the parts in flight, the bytes a copy copies, or the
// object's size for the completion),
// reported at once, not retried. UploadPartCopy and
// CompleteMultipartUpload have no 1 KiB/s limit: the server copies or
// assembles before it answers, sending nothing (or, as AWS does, a space
// now and then) meanwhile; their deadline (by the bytes copied, or the
// object's size) bounds them, and TCP keep-alive probes notice a peer that
// is gone. Either also fails when not one byte of its answer arrives for
// the low-speed time per 8 MiB it copies or assembles (at least once: 30 s
// by default, 240 s for a 64 MiB copy or object), a stalled server.
//
// Cancellation: UploadPart and UploadPartCopy stop within about a second of
// modelzip::request_cancel() (libcurl's progress callback) and throw
// Error(cancelled); the other requests (an abort included) are not
// interrupted.
//
// Errors: Error(io) (not_found for NoSuchBucket / NoSuchKey / NoSuchUpload,
// invalid_argument for other 4xx) whose message names the operation, the
// request's URL, the HTTP status and S3's error code and message, e.g.
// "S3 UploadPart failed: HTTP 403 InvalidAccessKeyId: ... (PUT http://...)";
// the error's archive is the s3:// URL. An answer over 1 MiB (S3's are a few
// KiB) fails the request at once, saying so. A failed condition on complete()
// (412 PreconditionFailed, 409 ConditionalRequestConflict) throws
// Error(io, kChangedByAnotherWriter); a failed complete() one of whose attempts
// was sent and got no answer says that the upload may have completed.
//
// Thread safety: every method may be called from several threads at once
// (each request has its own libcurl handle; the object is immutable).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/error.hpp"
#include "modelzip/remote.hpp"
#include "remote/endpoint.hpp"
#include "remote/settings.hpp"

namespace modelzip::remote {

inline constexpr int kS3Attempts = 5;
inline constexpr std::uint64_t kS3MinPart = std::uint64_t{5} << 20;
inline constexpr std::uint64_t kS3MaxPart = std::uint64_t{5} << 30;
inline constexpr int kS3MaxParts = 10'000;
inline constexpr const char* kChangedByAnotherWriter =
    "archive changed on the server by another writer";
// Said by a failed request one of whose attempts was sent and got no answer.
inline constexpr const char* kMayHaveTakenEffect = "so it may have taken effect";

// Whether `e` says that another writer's commit came first and nothing of
// this one took effect (kChangedByAnotherWriter, or kChangedWhileReading
// from a read of the object this one was planned on), so that planning it
// again against the object as it is now is safe; false for a request whose
// answer was lost (kMayHaveTakenEffect) and for every other error (and in
// builds without libcurl, which define it too).
bool refused_for_another_writer(const Error& e);
// Times a commit so refused is planned again before its refusal is
// reported (Writer's and CollectiveWriter's S3 commits).
inline constexpr int kS3Replans = 3;
// kS3Replans, or the whole number (0 to 100) MODELZIP_BENCHMARK_S3_REPLANS
// says: benchmarks/s3_contention_bench.py compares bounds (nothing else
// sets it).
int s3_replans();
// The one-line notice (WriterOptions::on_notice) of a commit refused with
// `e` that is planned again for the `replans`-th time (1 to s3_replans()).
std::string planned_again_notice(const Error& e, int replans);
// Before new plan `replans` (1 to s3_replans()) of a commit whose refused
// attempt took `attempt`: sleeps a random time, so that writers that
// refused one another do not meet again at their next completions. Returns
// early once modelzip::request_cancel() was called (the caller checks).
// MODELZIP_BENCHMARK_S3_BACKOFF sets the policy for
// benchmarks/s3_contention_bench.py (nothing else sets it).
void pause_before_new_plan(int replans, std::chrono::steady_clock::duration attempt);

// `e`, a read of the server stopped by an interrupt (Error(cancelled), "read
// cancelled (SIGINT): ..."), reworded to say what became of the save it
// served: "save cancelled while <doing> (<e's message>): the save did not
// happen (<outcome>)", with e's context.
Error save_cancelled(const Error& e, std::string_view doing, std::string_view outcome);
// save_cancelled's `doing` for dedup's reads of the old object's blobs.
inline constexpr std::string_view kComparingOldBlobs =
    "comparing the new tensors with the archive's blobs for deduplication";

struct S3Part {
  int number = 0;
  std::string etag;            // as the server returned it (quotes included)
  std::string checksum_crc32;  // base64, empty if the server gave none
};

struct S3PendingUpload {
  std::string key;
  std::string upload_id;
  std::string initiated;  // ISO 8601, as the server wrote it
};

// The condition complete() puts on the key.
struct S3Condition {
  bool if_none_match = false;  // If-None-Match: * (a new key)
  std::string if_match;        // If-Match: <ETag> (non-empty: that version)
};

class S3Multipart {
 public:
  // Throws Error(invalid_argument) unless `url` is an s3:// URL.
  S3Multipart(const std::string& url, const RemoteOptions& options);

  const std::string& url() const noexcept { return endpoint_.url; }
  const Endpoint& endpoint() const noexcept { return endpoint_; }

  // Returns the upload id.
  std::string create() const;
  // `in_flight`: the parts its writer uploads at once (set_deadline).
  S3Part upload_part(const std::string& upload_id, int number, std::span<const std::byte> body,
                     int in_flight = 1) const;
  // Copies bytes [first, first + length) of s3://BUCKET/`source_key` (same
  // bucket); `source_etag` non-empty: only from that version.
  S3Part upload_part_copy(const std::string& upload_id, int number, const std::string& source_key,
                          std::uint64_t first, std::uint64_t length,
                          const std::string& source_etag = {}) const;
  // `parts` in ascending number order; `size`: the object's, in bytes
  // (what the deadline and stall limit are given for). Returns the new
  // object's ETag.
  std::string complete(const std::string& upload_id, std::span<const S3Part> parts,
                       const S3Condition& condition = {}, std::uint64_t size = 0) const;
  void abort(const std::string& upload_id) const;
  // Incomplete uploads whose key is exactly this object's key. Throws
  // Error(io) when the server names the same page twice (markers that do not
  // advance).
  std::vector<S3PendingUpload> list_uploads() const;

  // Requests sent so far, attempts included (tests).
  std::uint64_t requests() const noexcept;

 private:
  struct Request;
  struct Response;
  Response perform(const Request& request) const;

  Endpoint endpoint_;
  Settings settings_;
  mutable std::atomic<std::uint64_t> requests_{0};
};

// Base64 of the big-endian CRC-32 of `data` (x-amz-checksum-crc32).
std::string s3_crc32_base64(std::span<const std::byte> data);

// The text of the first <tag>...</tag> in `xml` at or after `from`, the
// predefined XML entities, character references ("&#13;", "&#x1F600;") and
// CDATA sections decoded (other entities kept as written); nullopt if absent
// or unterminated. Only that exact tag matches (no attributes, no namespace
// prefix). `end` (optional) gets the offset just
// past the closing tag.
std::optional<std::string> xml_element(std::string_view xml, std::string_view tag,
                                       std::size_t from = 0, std::size_t* end = nullptr);

}  // namespace modelzip::remote
