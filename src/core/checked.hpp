// Overflow-safe arithmetic and bounds-checked little-endian reading of
// untrusted bytes. Every parser in modelzip reads through ByteReader (or
// these helpers) so that no size or offset from a file is used before it is
// checked against the bytes really there.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "modelzip/error.hpp"

namespace modelzip::detail {

static_assert(std::endian::native == std::endian::little,
              "modelzip assumes a little-endian host (byte-order fields exist for the format)");

// a + b, or Error(corrupt, what) on overflow.
inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw Error(ErrorCode::corrupt, std::string(what) + ": size overflows 64 bits");
  return r;
}

// a * b, or Error(corrupt, what) on overflow.
inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw Error(ErrorCode::corrupt, std::string(what) + ": size overflows 64 bits");
  return r;
}

// True when [offset, offset + length) lies inside [0, size).
inline bool range_fits(std::uint64_t offset, std::uint64_t length, std::uint64_t size) noexcept {
  return offset <= size && length <= size - offset;
}

inline std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) noexcept {
  return (value + alignment - 1) / alignment * alignment;
}

template <class T>
T load_le(const std::byte* p) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void store_le(std::byte* p, T v) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(p, &v, sizeof(T));
}

// A cursor over untrusted bytes. Every read checks the remaining length and
// throws Error(corrupt) naming `what` and the absolute offset on failure.
class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> bytes, std::uint64_t base_offset = 0)
      : bytes_(bytes), base_(base_offset) {}

  std::uint64_t position() const noexcept { return pos_; }
  // Position plus the base offset given at construction (for messages).
  std::uint64_t absolute_position() const noexcept { return base_ + pos_; }
  std::uint64_t remaining() const noexcept { return bytes_.size() - pos_; }
  bool at_end() const noexcept { return pos_ == bytes_.size(); }
  std::span<const std::byte> all() const noexcept { return bytes_; }

  template <class T>
  T read(std::string_view what) {
    require(sizeof(T), what);
    T v = load_le<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }

  // The next `length` bytes (a view into the input).
  std::span<const std::byte> bytes(std::uint64_t length, std::string_view what) {
    require(length, what);
    auto s = bytes_.subspan(pos_, length);
    pos_ += length;
    return s;
  }

  std::string_view string(std::uint64_t length, std::string_view what) {
    auto s = bytes(length, what);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }

  void skip(std::uint64_t length, std::string_view what) {
    require(length, what);
    pos_ += length;
  }

  void seek(std::uint64_t position, std::string_view what) {
    if (position > bytes_.size())
      fail(what, "offset " + std::to_string(position) + " is past the end");
    pos_ = position;
  }

  [[noreturn]] void fail(std::string_view what, std::string_view problem) const {
    throw Error(ErrorCode::corrupt, std::string(what) + ": " + std::string(problem),
                ErrorContext{.offset = absolute_position()});
  }

  void require(std::uint64_t length, std::string_view what) const {
    if (length > remaining())
      fail(what, "needs " + std::to_string(length) + " bytes, only " + std::to_string(remaining()) +
                     " left");
  }

 private:
  std::span<const std::byte> bytes_;
  std::uint64_t base_;
  std::uint64_t pos_ = 0;
};

}  // namespace modelzip::detail
