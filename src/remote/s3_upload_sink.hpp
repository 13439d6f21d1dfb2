// io::ByteSink onto one S3 object by multipart upload (remote/s3_multipart.hpp):
// the result becomes visible only at commit() (CompleteMultipartUpload).
//
// Parts: the result is cut, in offset order, into parts of `part_size`
// bytes (default 8 MiB, at least 5 MiB; the last part may be smaller). A
// part is uploaded, from a pool of `parallel` threads, as soon as every byte
// of it has been given; write() waits while `parallel` parts are queued or
// in flight, so part buffers stay within (parallel + 1) parts plus the
// parts held for reserved ranges (one per reserve() not yet written: a
// writer fills them as soon as it can, holds_reserved(), so that it holds
// one at a time) and bytes given far ahead of the first hole.
//
// keep(): a kept range of the old object (`old_key` at `old_etag`, the key
// itself for an append) becomes UploadPartCopy parts, copied server-side
// from that version only (x-amz-copy-source-if-match): equal parts of at
// most 64 MiB where that makes at most 2 x `parallel` of them (so that the
// copies run at once), else that many parts, or parts of 5 GiB if larger.
// Where the part being filled before it is shorter than 5 MiB, the first
// bytes of the kept range are fetched (from `old`, the reader's ByteSource)
// and uploaded to bring it to 5 MiB; a kept remainder shorter than 5 MiB is
// fetched and uploaded too. Copy parts count against `parallel` like others.
// Kept ranges given one after the other whose sources are contiguous too
// (entries that moved together) are copied as one range: a kept range is
// held until bytes after it are given, or finish().
//
// Shared uploads (a collective commit, dist/s3_commit.hpp): several sinks,
// one per process, may upload the parts of one object. The sink that
// creates the upload is given skip() for the ranges the others upload and
// add_parts() for their parts before commit(); a sink made with
// `join_upload` uploads into that upload the ranges it is given (skip()
// for the rest) and hands its parts() to the creator. A part that ends at
// a skipped range, or at set_end() of a joined sink (called before the
// writes), is stretched to it
// instead of being cut at `part_size` where the remainder would be under
// 5 MiB; so a range of L bytes between skips is uploaded as
// shared_part_count(L, part_size) parts, numbered on from the `next_number`
// of the skip before it.
//
// Failures: the first error of any part is thrown by the next call (and by
// finish()); the sink is then unusable. A sink destroyed without a
// successful commit() aborts the upload (AbortMultipartUpload, errors of the
// abort ignored: an incomplete upload left behind is listed and aborted by
// the next writer of the key, and removed by a bucket lifecycle rule).
//
// Thread safety: as io::ByteSink.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/byte_sink.hpp"
#include "modelzip/bytes.hpp"
#include "remote/s3_multipart.hpp"

namespace modelzip::remote {

// An upload started ahead of its sink: on a thread of its own,
// CreateMultipartUpload beside the listing of the key's stale uploads
// (remote/stale_uploads.hpp; those are aborted once the new upload's id is
// known, never the new upload itself), so that a writer reads the old object
// meanwhile. An S3UploadSink given it (S3UploadOptions::started) takes the
// upload over; destroyed before that, it waits for the thread and aborts the
// upload (best effort, as the sink does). Errors: take() throws
// CreateMultipartUpload's. Thread safety: one thread uses it.
class S3UploadStart {
 public:
  // `abort_stale_after` set: incomplete uploads older than it are aborted.
  S3UploadStart(std::shared_ptr<const S3Multipart> client,
                std::optional<std::chrono::seconds> abort_stale_after);
  ~S3UploadStart();
  S3UploadStart(const S3UploadStart&) = delete;
  S3UploadStart& operator=(const S3UploadStart&) = delete;

  // Waits for the upload and hands it over (once): its id.
  std::string take();

 private:
  std::shared_ptr<const S3Multipart> s3_;
  std::future<std::string> id_;
};

inline constexpr std::uint64_t kDefaultPartSize = std::uint64_t{8} << 20;
inline constexpr int kDefaultParallelParts = 4;

struct S3UploadOptions {
  std::uint64_t part_size = kDefaultPartSize;  // >= kS3MinPart, <= kS3MaxPart
  int parallel = kDefaultParallelParts;        // parts in flight, >= 1
  S3Condition condition;                       // put on CompleteMultipartUpload
  // The existing object keep() ranges come from (empty key: none).
  std::string old_key, old_etag;
  Bytes old_file;  // its extent as the reader maps it, filled by `old_source`
  std::shared_ptr<const io::ByteSource> old_source;
  // Set: incomplete uploads of the key older than this are aborted
  // (remote/stale_uploads.hpp) while the upload is created.
  std::optional<std::chrono::seconds> abort_stale_after;
  // Set: the upload started ahead (then abort_stale_after is its business).
  std::shared_ptr<S3UploadStart> started;
  // Set: asked before the copies of each kept range start and about every
  // 100 ms while a call waits for parts in flight (from the calling
  // thread); false makes that call throw Error(cancelled) (e.g. a progress
  // callback that saw an interrupt).
  std::function<bool()> keep_going;
  // Non-empty: upload parts into this upload, created (and completed or
  // aborted) by another sink: no CreateMultipartUpload, no clean-up of
  // stale uploads, no abort on destruction; commit() is refused.
  std::string join_upload;
};

// The parts a sink uploads for a range of `length` bytes between skipped
// ranges (see above).
std::uint64_t shared_part_count(std::uint64_t length, std::uint64_t part_size) noexcept;

class S3UploadSink final : public io::ByteSink {
 public:
  // Starts the upload (CreateMultipartUpload, beside the clean-up of stale
  // uploads where `abort_stale_after` is set), or takes over
  // `options.started`. Throws Error as S3Multipart, Error(invalid_argument)
  // for a part size or parallelism out of range.
  S3UploadSink(std::shared_ptr<const S3Multipart> client, S3UploadOptions options);
  ~S3UploadSink() override;
  S3UploadSink(const S3UploadSink&) = delete;
  S3UploadSink& operator=(const S3UploadSink&) = delete;

  void write(std::uint64_t offset, const Bytes& data) override;
  void keep(std::uint64_t offset, io::ByteRange source) override;
  using io::ByteSink::keep;
  void reserve(io::ByteRange range) override;
  bool holds_reserved() const noexcept override { return true; }
  void barrier() override {}
  void set_end(std::uint64_t size) override;
  void finish() override;
  void commit() override;

  // Shared uploads (see above). skip(): bytes [range) are uploaded by
  // another sink; the part after them is numbered `next_number`. Call it
  // before any byte of the part that ends at it is given (in practice
  // before the bytes within part_size + 5 MiB of range.offset: a part
  // already cut at part_size is not stretched).
  void skip(io::ByteRange range, int next_number);
  // Before commit(): parts uploaded by joined sinks, included in the
  // completion.
  void add_parts(const std::vector<S3Part>& parts);
  // After finish(): the parts this sink uploaded.
  std::vector<S3Part> parts() const;

  // After commit(): the new object's ETag.
  const std::string& etag() const noexcept;
  // Bytes sent in UploadPart bodies, and bytes copied server-side, so far.
  std::uint64_t uploaded_bytes() const noexcept;
  std::uint64_t copied_bytes() const noexcept;
  const std::string& upload_id() const noexcept;
  // The most bytes held at once in part buffers (the part filling, parts
  // held for reserved ranges, parts queued or being uploaded).
  std::uint64_t peak_buffered_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace modelzip::remote
