// CRC-32 as zip and zlib define it (polynomial 0xEDB88320, bit-reflected,
// initial and final value inverted), several times faster than zlib where
// the CPU can fold with carry-less multiplication (PCLMULQDQ on 128-bit
// registers; VPCLMULQDQ on 512-bit ones for runs of 1 KiB and more where it
// also has AVX-512), and zlib's own code elsewhere. Pure functions: thread-safe, no errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace modelzip::zip {

// The CRC-32 of `data`.
std::uint32_t crc32_of(std::span<const std::byte> data) noexcept;
// The CRC-32 of A followed by `data`, from crc(A): zlib's crc32(crc, p, n).
std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::byte> data) noexcept;
// The CRC-32 of A followed by B, from crc(A), crc(B) and B's length.
std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b,
                           std::uint64_t length_b) noexcept;

}  // namespace modelzip::zip
