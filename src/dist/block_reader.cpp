// read_block: one rank's block of a tensor parameter, reading only the
// bytes of the block (the archive is mapped; only the runs copied, or the
// pages of a zero-copy view the caller touches, are ever read).
#include <cstring>

#include "checkpoint/archive_impl.hpp"
#include "core/checked.hpp"
#include "dist/blocks.hpp"
#include "modelzip/distributed.hpp"
#include "modelzip/error.hpp"

namespace modelzip {

Tensor read_block(const Archive& archive, std::string_view name, const Block& block,
                  std::string_view tag, BlockReadStats* stats) {
  const ParamInfo info = archive.param(name, tag);
  const ErrorContext ctx{.archive = archive.name(), .entry = info.blob, .tag = info.owner_tag};
  if (info.kind != BlobKind::tensor || info.layout != Layout::dense || dtype_size(info.dtype) == 0)
    throw Error(ErrorCode::unsupported,
                "parameter '" + std::string(name) +
                    "': blocks can be read of dense tensors of fixed-size types only",
                ctx);
  dist::check_block(info.shape, block, name);
  // The whole tensor: a view into the mapping for stored blobs (nothing is
  // read yet), decompressed for deflated ones.
  const Tensor whole = archive.tensor(name, tag, ReadMode::zero_copy);
  const std::uint64_t esize = dtype_size(info.dtype);
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

}  // namespace modelzip
