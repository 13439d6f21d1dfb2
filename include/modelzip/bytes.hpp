// Bytes: an immutable run of bytes that either owns its memory or keeps alive
// whatever it borrows from (a memory mapping, a parent buffer).
//
// Ownership is in the type: copying a Bytes shares the same memory (it is a
// reference-counted view, cheap to copy); the memory lives as long as any
// Bytes that views it. Bytes::borrow with a null keeper is the one exception:
// the caller promises the memory outlives every use (used for caller-owned
// tensors during a save, documented at each use).
//
// Thread safety: a Bytes is immutable; distinct threads may read and copy the
// same Bytes concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "modelzip/export.hpp"

namespace modelzip {

class MODELZIP_API Bytes {
 public:
  Bytes() = default;

  // Copies `data` into newly owned memory.
  static Bytes copy_of(std::span<const std::byte> data);
  static Bytes copy_of(std::string_view text);
  // Takes ownership of `data` without copying.
  static Bytes take(std::vector<std::byte>&& data);
  // Views `data` and keeps `keeper` alive as long as any copy of the view
  // lives. A null keeper means the caller guarantees the lifetime.
  static Bytes borrow(std::span<const std::byte> data, std::shared_ptr<const void> keeper);

  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::span<const std::byte> span() const noexcept { return {data_, size_}; }
  std::string_view as_string_view() const noexcept {
    return {reinterpret_cast<const char*>(data_), size_};
  }

  // A sub-view sharing this buffer's lifetime. Throws Error(invalid_argument)
  // if [offset, offset + length) is not inside this view.
  Bytes slice(std::uint64_t offset, std::uint64_t length) const;

  // An owned deep copy (detaches from any mapping).
  Bytes to_owned() const { return copy_of(span()); }

  // True when the bytes live in a memory mapping of a file (zero-copy view).
  bool is_mapped() const noexcept { return mapped_; }

  // Sets is_mapped() (opaque: defined and used only inside modelzip, where
  // files are mapped).
  class MappedAccess;

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<const void> keeper_;
  bool mapped_ = false;
};

}  // namespace modelzip
