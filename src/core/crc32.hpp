// CRC-32 as zip and zlib define it (polynomial 0xEDB88320, bit-reflected,
// initial and final value inverted), faster than zlib's where
// the CPU can fold with carry-less multiplication (PCLMULQDQ on 128-bit
// registers; VPCLMULQDQ on 512-bit ones for runs of 1 KiB and more where it
// also has AVX-512), and zlib's own code elsewhere. The functions are pure:
// thread-safe, no errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace modelzip::detail {

// The CRC-32 of `data`.
std::uint32_t crc32_of(std::span<const std::byte> data) noexcept;
// The CRC-32 of A followed by `data`, from crc(A): zlib's crc32(crc, p, n).
std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::byte> data) noexcept;
// The CRC-32 of A followed by B, from crc(A), crc(B) and B's length.
std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b,
                           std::uint64_t length_b) noexcept;

// The CRC-32 of a run of bytes that several holders wrote, each knowing
// only its own pieces (the ranks of a collective commit): each holder
// summarizes its pieces in one value, and the run's CRC-32 follows from the
// xor of those values. CRC-32 is affine in the data, so with the linear
// part L(M) = crc(M) xor crc(zeros of |M|):
//   crc(run) = crc(zeros of `size`) xor (xor over holders of L(the run with
//   only that holder's pieces, zeros elsewhere)),
// and each L is built piece by piece, shifting by carry-less
// multiplication (zlib's crc32_combine_gen64 / crc32_combine_op).
// Not thread-safe; no errors but add()'s refusal.
class SparseCrc32 {
 public:
  explicit SparseCrc32(std::uint64_t size) noexcept : size_(size) {}
  // Adds this holder's piece of `length` bytes at `offset` with CRC-32
  // `crc`. Pieces come in ascending order without overlap and end within
  // the run; false (nothing added) otherwise.
  bool add(std::uint64_t offset, std::uint64_t length, std::uint32_t crc) noexcept;
  // This holder's value: L of its pieces in place.
  std::uint32_t value() const noexcept;
  std::uint64_t covered() const noexcept { return covered_; }
  // The run's CRC-32 from the xor of every holder's value().
  static std::uint32_t crc_of_run(std::uint64_t size, std::uint32_t xored_values) noexcept;

 private:
  std::uint64_t size_, end_ = 0, covered_ = 0;
  std::uint32_t acc_ = 0;
  // The last piece's stride (gap + length) and shift operator, length and
  // CRC of that many zeros: a strided shard repeats them.
  std::uint64_t stride_ = ~std::uint64_t{0}, length_ = ~std::uint64_t{0};
  std::uint32_t stride_op_ = 0, zeros_ = 0;
};

}  // namespace modelzip::detail
