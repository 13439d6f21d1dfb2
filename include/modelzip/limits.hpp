// Work and size limits applied to untrusted input. Defaults are generous for
// real checkpoints; every limit is checked before the corresponding
// allocation or loop, and exceeding one throws Error(limit_exceeded).
//
// Thread safety: a plain value type.
#pragma once

#include <cstdint>

#include "modelzip/export.hpp"

namespace modelzip {

struct MODELZIP_API Limits {
  // Entries in one zip archive.
  std::uint64_t max_entries = 10'000'000;
  // Bytes of one text or metadata entry (tags.txt, params.txt, TOML).
  std::uint64_t max_text_entry_bytes = 1ull << 30;
  // Uncompressed / compressed ratio allowed for a deflated entry (deflate
  // cannot exceed about 1032:1, so a larger declared ratio is a lie).
  std::uint64_t max_deflate_ratio = 1100;
  // Bytes of a FlatBuffer header inside a blob.
  std::uint64_t max_flatbuffer_bytes = 64ull << 20;
  // FlatBuffers verifier limits.
  std::uint32_t max_flatbuffer_depth = 64;
  std::uint32_t max_flatbuffer_tables = 1'000'000;
  // Bytes of strings that decoding one FlatBuffer may produce, as a multiple
  // of its size: a string referenced many times (legitimately shared, or a
  // hostile amplifier) is copied at every reference.
  std::uint64_t max_flatbuffer_expansion = 64;
  // Rank of a tensor.
  std::uint32_t max_rank = 64;
};

}  // namespace modelzip
