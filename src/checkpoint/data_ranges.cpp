#include "checkpoint/data_ranges.hpp"

#include "core/crc32.hpp"
#include "format/tensor_blob.hpp"

namespace modelzip {

std::uint64_t file_data_offset(const Archive::Impl& archive, const zip::EntryInfo& e) {
  const zip::SnapshotFile& file = archive.snapshot_file;
  if (!e.stored() || !file.fd || e.compressed_size == 0) return 0;
  const std::uint64_t offset = archive.reader.data_offset(e);
  std::uint64_t end = 0;
  if (__builtin_add_overflow(offset, e.compressed_size, &end) || end > file.stable_prefix) return 0;
  return offset;
}

std::optional<DataRange> tensor_data_range(const Archive::Impl& archive, const zip::EntryInfo& e) {
  const std::uint64_t offset = file_data_offset(archive, e);
  if (offset == 0) return std::nullopt;
  // A view of the archive's mapping: decoding touches the header's pages only.
  const Bytes entry = archive.reader.read(e, false);
  const Tensor tensor = format::decode_tensor_blob(entry, archive.limits);
  if (tensor.layout() != Layout::dense) return std::nullopt;
  const Bytes& values = tensor.values();
  const std::byte* base = entry.data();
  if (values.empty() || values.data() < base || values.data() + values.size() > base + entry.size())
    return std::nullopt;
  const std::uint64_t start = static_cast<std::uint64_t>(values.data() - base);
  const std::uint64_t after = entry.size() - start - values.size();
  DataRange r;
  r.offset = offset + start;
  r.nbytes = values.size();
  r.entry_crc = e.crc32;
  r.crc_before = detail::crc32_of(entry.span().subspan(0, start));
  r.crc_after = detail::crc32_of(entry.span().subspan(start + values.size()));
  r.after_bytes = after;
  return r;
}

}  // namespace modelzip
