// Geometry of rectangular blocks of row-major tensors: bounds checks,
// overlap, and the contiguous runs a block occupies in the whole tensor's
// data (what a rank writes, and what a resharding read copies).
//
// Pure functions; thread-safe. Errors: Error(invalid_argument) naming the
// parameter (or updater state).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "modelzip/dist/distributed.hpp"

namespace modelzip::dist {

// Throws unless `block` has the rank of `global`, non-negative extents and
// lies inside it; the message starts with `label` ("parameter 'fc.weight'").
void check_block(const Shape& global, const Block& block, std::string_view label);

// Element count of `block.shape` (overflow-checked).
std::uint64_t block_numel(const Block& block);

// Whether two blocks of the same tensor share an element.
bool blocks_overlap(const Block& a, const Block& b);

// Calls `run(block_element, global_element, length)` for each maximal run of
// elements of `block` that is contiguous in the row-major data of `global`,
// in increasing order; `block_element` indexes the block's own row-major
// data. A block of a scalar is one run of 1; an empty block has no runs.
void for_each_run(const Shape& global, const Block& block,
                  const std::function<void(std::uint64_t, std::uint64_t, std::uint64_t)>& run);

// Whether `block` is one contiguous run of `global` (or empty).
bool block_is_contiguous(const Shape& global, const Block& block);

// "[o0:o0+s0, o1:o1+s1]" for messages.
std::string block_text(const Block& block);

}  // namespace modelzip::dist
