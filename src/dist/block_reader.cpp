// read_block: one rank's block of a tensor parameter, reading only the
// bytes of the block (the archive is mapped; only the runs copied, or the
// pages of a zero-copy view the caller touches, are ever read). A remote
// archive fetches the blob header, then only the block's runs (nearby runs
// in one request: the byte source coalesces gaps up to 16 KiB).
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "checkpoint/archive_state.hpp"
#include "core/checked.hpp"
#include "dist/blocks.hpp"
#include "format/tensor_blob.hpp"
#include "modelzip/dist/distributed.hpp"
#include "modelzip/error.hpp"

namespace modelzip {
namespace {

// For a stored blob of a remote archive: the whole tensor as a view of the
// archive's mapping, after fetching its header and the runs of `block`
// only (the parts of the view outside them are not fetched: callers read
// the runs only). Nullopt where a view would not hold the stored bytes as
// they are (big-endian or misaligned values are converted whole): then the
// caller reads the whole tensor.
std::optional<Tensor> view_with_runs(const checkpoint::ArchiveState& archive,
                                     const zip::EntryInfo& e, const Shape& shape,
                                     const Block& block, std::uint64_t esize) {
  const zip::EntryReader& reader = archive.reader();
  const Limits& limits = archive.limits();
  const io::ByteSource* source = reader.source();
  if (!source || !e.stored()) return std::nullopt;
  Bytes prefix = reader.read_prefix(e, 4);
  prefix =
      reader.read_prefix(e, format::blob_header_size(prefix.span(), e.uncompressed_size, limits));
  const format::BlobHeader h = format::read_blob_header(prefix.span(), e.uncompressed_size, limits);
  const Bytes entry = reader.file().slice(reader.data_offset(e), e.compressed_size);
  if (h.big_endian || h.layout != Layout::dense ||
      reinterpret_cast<std::uintptr_t>(entry.data() + h.values.offset) % esize != 0)
    return std::nullopt;
  const std::uint64_t base = reader.data_offset(e) + h.values.offset;
  std::vector<io::ByteRange> runs;
  dist::for_each_run(shape, block, [&](std::uint64_t, std::uint64_t g, std::uint64_t n) {
    const io::ByteRange r{base + g * esize, n * esize};  // inside the values: checked by the header
    if (!runs.empty() && runs.back().offset + runs.back().length == r.offset)
      runs.back().length += r.length;
    else
      runs.push_back(r);
  });
  source->ensure(runs);
  return format::decode_tensor_blob(entry, limits);
}

// The block of the array `info` describes (a parameter or an updater
// state; `label` names it in messages); `read_whole` reads the whole array
// when no view with the block's runs can be had.
template <class ReadWhole>
Tensor read_array_block(const Archive& archive, const ParamInfo& info, const std::string& label,
                        const Block& block, BlockReadStats* stats, ReadWhole&& read_whole) {
  const ErrorContext ctx{.archive = archive.name(), .entry = info.blob, .tag = info.owner_tag};
  if (info.kind != BlobKind::tensor || info.layout != Layout::dense || dtype_size(info.dtype) == 0)
    throw Error(ErrorCode::unsupported,
                label + ": blocks can be read of dense tensors of fixed-size types only", ctx);
  try {
    dist::check_block(info.shape, block, label);
  } catch (const Error& e) {
    throw e.with_context(ctx);
  }
  // The whole tensor: a view into the mapping for stored blobs (nothing is
  // read yet; of a remote archive, only the block's runs are fetched),
  // decompressed for deflated ones.
  const std::uint64_t esize = dtype_size(info.dtype);
  const checkpoint::ArchiveState state(archive);
  std::optional<Tensor> view;
  try {
    view = view_with_runs(state, state.entry(info.blob), info.shape, block, esize);
  } catch (const Error& e) {
    throw e.with_context(ctx);
  }
  const Tensor whole = view ? std::move(*view) : read_whole();
  const std::uint64_t nbytes = detail::checked_mul(dist::block_numel(block), esize, "block bytes");
  BlockReadStats local;
  local.bytes_read = info.compressed ? whole.values().size() : nbytes;
  Bytes values;
  if (dist::block_is_contiguous(info.shape, block)) {
    std::uint64_t first = 0;
    dist::for_each_run(info.shape, block,
                       [&](std::uint64_t, std::uint64_t g, std::uint64_t) { first = g; });
    values = whole.values().slice(first * esize, nbytes);
    local.zero_copy = values.is_mapped();
  } else {
    std::vector<std::byte> out(static_cast<std::size_t>(nbytes));
    const std::byte* src = whole.values().data();
    dist::for_each_run(info.shape, block, [&](std::uint64_t b, std::uint64_t g, std::uint64_t n) {
      std::memcpy(out.data() + b * esize, src + g * esize, static_cast<std::size_t>(n * esize));
    });
    values = Bytes::take(std::move(out));
  }
  if (stats) *stats = local;
  return Tensor::dense(info.dtype, block.shape, std::move(values));
}

}  // namespace

Tensor read_block(const Archive& archive, std::string_view name, const Block& block,
                  std::string_view tag, BlockReadStats* stats) {
  return read_array_block(archive, archive.param(name, tag),
                          "parameter '" + std::string(name) + "'", block, stats,
                          [&] { return archive.tensor(name, tag, ReadMode::zero_copy); });
}

Tensor read_updater_block(const Archive& archive, std::string_view variable, std::string_view state,
                          const Block& block, std::string_view tag, BlockReadStats* stats) {
  const checkpoint::ArchiveState parsed(archive);
  const std::size_t t = parsed.usable_tag(tag);
  const ParamInfo info = parsed.info(t, parsed.row(t, format::TableKind::updater, variable, state),
                                     format::TableKind::updater);
  return read_array_block(
      archive, info,
      "updater state '" + std::string(state) + "' of '" + std::string(variable) + "'", block, stats,
      [&] { return archive.updater_state(variable, state, tag, ReadMode::zero_copy); });
}

}  // namespace modelzip
