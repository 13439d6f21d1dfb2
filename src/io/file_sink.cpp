#include "io/file_sink.hpp"

#include <algorithm>

#include "io/posix_file.hpp"
#include "io/syscalls.hpp"

namespace modelzip::io {
namespace {

// A SharedFileWriter writes directly (asynchronously, reading the source
// until it finishes) only ranges that cover one of its stretches whole, at
// least 2 MiB: shorter writes are synchronous copies and need no holding.
constexpr std::uint64_t kMayGoDirect = 2u << 20;

}  // namespace

FileSink::FileSink(int fd, ErrorContext context, bool durable, Bytes existing)
    : fd_(fd), context_(std::move(context)), durable_(durable), existing_(std::move(existing)) {}

FileSink::~FileSink() = default;

void FileSink::route_through(std::unique_ptr<SharedFileWriter> writer, bool all) {
  if (!writer) return;
  std::lock_guard lock(mutex_);
  shared_ = std::move(writer);
  route_all_ = all;
}

bool FileSink::routed(std::uint64_t offset, std::uint64_t size) const noexcept {
  if (!shared_) return false;
  if (route_all_) return true;
  auto it = expected_.upper_bound(offset);
  if (it == expected_.begin()) return false;
  --it;
  const std::uint64_t into = offset - it->first;
  return into <= it->second && size <= it->second - into;
}

void FileSink::write_shared(const std::byte* data, std::uint64_t size, std::uint64_t offset,
                            const Bytes* keep) {
  if (keep && size >= kMayGoDirect) held_.push_back(*keep);
  shared_->write(data, size, offset);
}

void FileSink::write(std::uint64_t offset, const Bytes& data) {
  if (shared_) {
    std::lock_guard lock(mutex_);
    if (routed(offset, data.size())) return write_shared(data.data(), data.size(), offset, &data);
  }
  pwrite_full(fd_, data.data(), data.size(), offset, context_);
}

void FileSink::write_copy(std::uint64_t offset, std::span<const std::byte> data) {
  if (shared_) {
    std::lock_guard lock(mutex_);
    if (routed(offset, data.size())) {
      if (data.size() < kMayGoDirect) return write_shared(data.data(), data.size(), offset, nullptr);
      const Bytes copy = Bytes::copy_of(data);
      return write_shared(copy.data(), copy.size(), offset, &copy);
    }
  }
  pwrite_full(fd_, data.data(), data.size(), offset, context_);
}

void FileSink::keep(std::uint64_t offset, ByteRange source) {
  if (source.offset == offset) return;  // in place: the bytes are there
  if (source.offset > existing_.size() || source.length > existing_.size() - source.offset) {
    ErrorContext c = context_;
    c.offset = source.offset;
    throw Error(ErrorCode::invalid_argument,
                "cannot keep " + std::to_string(source.length) + " bytes from offset " +
                    std::to_string(source.offset) + " at offset " + std::to_string(offset) +
                    ": not in the existing archive this file sink was given",
                c);
  }
  write(offset, existing_.slice(source.offset, source.length));
}

void FileSink::expect(ByteRange range) {
  preallocate(fd_, range.offset, range.length);  // best effort: else the writes allocate
  if (!shared_ || route_all_) return;
  std::lock_guard lock(mutex_);
  expected_[range.offset] = std::max(expected_[range.offset], range.length);
}

void FileSink::sync() {
  if (sys::fsync(fd_) != 0) throw errno_error("cannot fsync", context_);
}

void FileSink::barrier() {
  if (shared_) shared_->finish();
  if (durable_) sync();
}

void FileSink::set_end(std::uint64_t size) {
  if (sys::ftruncate(fd_, static_cast<off_t>(size)) != 0)
    throw errno_error("cannot set the file size", context_);
}

void FileSink::finish() {
  if (shared_) shared_->finish();
  held_.clear();
  expected_.clear();
}

void FileSink::commit() {
  if (durable_) sync();
}

}  // namespace modelzip::io
