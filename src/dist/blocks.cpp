#include "dist/blocks.hpp"

#include <algorithm>

#include "core/checked.hpp"
#include "core/fail.hpp"
#include "core/shape_text.hpp"
#include "modelzip/error.hpp"

namespace modelzip::dist {
namespace {

using modelzip::detail::fail_invalid;

// The first dimension j such that the block spans every dimension after j
// completely: runs are then prod(shape[j..]) elements long.
std::size_t run_dim(const Shape& global, const Block& b) {
  std::size_t j = global.size();
  while (j > 0 && (j == global.size() || b.shape[j] == global[j])) --j;
  return j;
}

}  // namespace

void check_block(const Shape& global, const Block& block, std::string_view label) {
  if (block.offset.size() != global.size() || block.shape.size() != global.size())
    fail_invalid(std::string(label) + ": " + "block " + block_text(block) +
                 " does not have the rank of the global shape " +
                 modelzip::detail::shape_text(global));
  shape_numel(global);  // negative dimensions, overflow
  for (std::size_t d = 0; d < global.size(); ++d)
    if (block.offset[d] < 0 || block.shape[d] < 0 || block.offset[d] > global[d] ||
        block.shape[d] > global[d] - block.offset[d])
      fail_invalid(std::string(label) + ": " + "block " + block_text(block) +
                   " is not inside the global shape " + modelzip::detail::shape_text(global));
}

std::uint64_t block_numel(const Block& block) {
  return shape_numel(block.shape);
}

bool blocks_overlap(const Block& a, const Block& b) {
  if (block_numel(a) == 0 || block_numel(b) == 0) return false;
  for (std::size_t d = 0; d < a.shape.size(); ++d)
    if (a.offset[d] + a.shape[d] <= b.offset[d] || b.offset[d] + b.shape[d] <= a.offset[d])
      return false;
  return true;
}

void for_each_run(const Shape& global, const Block& b,
                  const std::function<void(std::uint64_t, std::uint64_t, std::uint64_t)>& run) {
  const std::size_t rank = global.size();
  if (block_numel(b) == 0) return;
  if (rank == 0) return run(0, 0, 1);
  std::vector<std::uint64_t> stride(rank, 1);
  for (std::size_t d = rank - 1; d > 0; --d)
    stride[d - 1] = stride[d] * static_cast<std::uint64_t>(global[d]);
  const std::size_t j = run_dim(global, b);
  std::uint64_t length = 1;
  for (std::size_t d = j; d < rank; ++d) length *= static_cast<std::uint64_t>(b.shape[d]);
  // Odometer over the block's dimensions before j.
  std::vector<std::int64_t> index(j, 0);
  std::uint64_t block_pos = 0;
  for (;;) {
    std::uint64_t global_pos = static_cast<std::uint64_t>(b.offset[j]) * stride[j];
    for (std::size_t d = 0; d < j; ++d)
      global_pos += static_cast<std::uint64_t>(b.offset[d] + index[d]) * stride[d];
    run(block_pos, global_pos, length);
    block_pos += length;
    std::size_t d = j;
    while (d > 0) {
      --d;
      if (++index[d] < b.shape[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (j == 0) return;
  }
}

bool block_is_contiguous(const Shape& global, const Block& block) {
  if (block_numel(block) == 0 || global.empty()) return true;
  const std::size_t j = run_dim(global, block);
  for (std::size_t d = 0; d < j; ++d)
    if (block.shape[d] != 1) return false;
  return true;
}

std::string block_text(const Block& block) {
  std::string out = "[";
  for (std::size_t i = 0; i < block.shape.size(); ++i) {
    const std::int64_t o = i < block.offset.size() ? block.offset[i] : 0;
    out += (i ? ", " : "") + std::to_string(o) + ":" + std::to_string(o + block.shape[i]);
  }
  return out + "]";
}

}  // namespace modelzip::dist

namespace modelzip {

Block split_block(const Shape& global_shape, std::size_t dim, std::int64_t part,
                  std::int64_t parts) {
  if (dim >= global_shape.size() || parts <= 0 || part < 0 || part >= parts)
    throw Error(ErrorCode::invalid_argument, "split_block: part " + std::to_string(part) + " of " +
                                                 std::to_string(parts) + " along dimension " +
                                                 std::to_string(dim) + " of a rank-" +
                                                 std::to_string(global_shape.size()) + " shape");
  shape_numel(global_shape);
  Block b;
  b.offset.assign(global_shape.size(), 0);
  b.shape = global_shape;
  const std::int64_t n = global_shape[dim], base = n / parts, extra = n % parts;
  b.offset[dim] = part * base + std::min(part, extra);
  b.shape[dim] = base + (part < extra ? 1 : 0);
  return b;
}

}  // namespace modelzip
