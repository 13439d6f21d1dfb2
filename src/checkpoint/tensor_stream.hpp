// Reading one tensor parameter as a stream of its element bytes, for
// commands that copy a tensor out (cat, export) whatever its size: memory
// stays bounded (zip::stream_entry) and the blob's CRC-32 is checked.
//
// Streamable are dense, non-string tensors whose blob is little-endian (what
// every modelzip writer produces): their values are one contiguous segment
// in output order. Sparse COO tensors, string tensors and big-endian blobs
// are not (their output needs the indices, offsets or a byte swap across
// element boundaries): callers read those whole (Archive::tensor).
//
// Thread safety: like Archive (const use from several threads). Lifetime:
// keeps a reference to the Archive, which must outlive it. Errors: as
// Archive::tensor (not_found, invalid_argument for an embedding, corrupt
// naming the blob entry, or io when that blob's bytes do not match and the
// file changed since the Archive opened it: Archive::Impl::read_error).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "format/tensor_blob.hpp"
#include "modelzip/archive.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip {

class TensorStream {
 public:
  // Finds parameter `name` of `tag` (empty: the newest) and reads its header.
  TensorStream(const Archive& archive, std::string_view name, std::string_view tag);

  // Finds the updater state `state` of `variable` in `tag` (empty: the
  // newest), as Archive::updater_state does, and reads its header.
  static TensorStream updater_state(const Archive& archive, std::string_view variable,
                                    std::string_view state, std::string_view tag);

  DType dtype() const noexcept { return header_.dtype; }
  const Shape& shape() const noexcept { return header_.shape; }
  Layout layout() const noexcept { return header_.layout; }
  std::uint64_t value_bytes() const noexcept { return header_.values.length; }
  bool streamable() const noexcept;

  // Calls `sink` with the element bytes in order (little-endian,
  // row-major), in pieces of at most zip::kStreamChunk bytes; the blob's
  // size and CRC-32 are checked after the last piece (Error(corrupt) naming
  // the blob entry). Only when streamable(); otherwise Error(unsupported).
  void write_values(const std::function<void(std::span<const std::byte>)>& sink) const;

  // Checks the blob's size and CRC-32 (any layout) by reading it through
  // once in bounded memory: before using a zero-copy view, which is not
  // checked. Error(corrupt) naming the blob entry.
  void check() const;

 private:
  TensorStream(const Archive& archive, const zip::EntryInfo& entry, std::string tag);
  void read_header();

  const Archive& archive_;
  const zip::EntryInfo* entry_ = nullptr;
  std::string tag_;
  format::BlobHeader header_;
};

}  // namespace modelzip
