// PositionIndex: finds positions 0..n-1 of a caller's sequence (zip
// entries, table rows) by the hash of their key, without copying the keys.
// Open addressing with linear probing over one array of 64-bit slots (32
// bits of hash, 32 bits of position), so building it costs no allocation per
// key and lookups touch one or two cache lines.
//
// The caller owns the keys and supplies, with each call, the key's 64-bit
// hash and a predicate `same(position)` telling whether the key at that
// indexed position equals the key being inserted or looked up. The index
// never calls `same` on positions it was not given. Keys must not change
// while indexed. Copying a PositionIndex copies positions, so a copy is valid
// for a copy of the sequence.
//
// Thread safety: const member functions may run concurrently; insert may not
// run concurrently with anything. Errors: insert throws
// Error(limit_exceeded) past 2^32 - 2 positions; std::bad_alloc.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "modelzip/error.hpp"

namespace modelzip::detail {

// The hash PositionIndex users should give for a string key.
inline std::uint64_t hash_key(std::string_view key) noexcept {
  return std::hash<std::string_view>{}(key);
}

class PositionIndex {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  PositionIndex() = default;
  // Sized for `expected` insertions without growing.
  explicit PositionIndex(std::size_t expected) { rehash(capacity_for(expected)); }

  std::size_t size() const noexcept { return size_; }

  // Indexes `position` under `hash` and returns npos, unless an indexed
  // position p with same(p) exists: then returns p and changes nothing.
  template <class Same>
  std::size_t insert(std::uint64_t hash, std::size_t position, Same&& same) {
    if (position >= kEmpty)
      throw Error(ErrorCode::limit_exceeded, "more than 2^32 - 2 keys in one index");
    if ((size_ + 1) * 2 > slots_.size()) rehash(capacity_for(size_ + 1));
    const auto h = static_cast<std::uint32_t>(hash ^ (hash >> 32));
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const std::uint64_t slot = slots_[i];
      const auto at = static_cast<std::uint32_t>(slot);
      if (at == kEmpty) {
        slots_[i] = (std::uint64_t{h} << 32) | static_cast<std::uint32_t>(position);
        ++size_;
        return npos;
      }
      if (static_cast<std::uint32_t>(slot >> 32) == h && same(static_cast<std::size_t>(at)))
        return at;
    }
  }

  // The indexed position p under `hash` with same(p), or npos.
  template <class Same>
  std::size_t find(std::uint64_t hash, Same&& same) const {
    if (size_ == 0) return npos;
    const auto h = static_cast<std::uint32_t>(hash ^ (hash >> 32));
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const std::uint64_t slot = slots_[i];
      const auto at = static_cast<std::uint32_t>(slot);
      if (at == kEmpty) return npos;
      if (static_cast<std::uint32_t>(slot >> 32) == h && same(static_cast<std::size_t>(at)))
        return at;
    }
  }

 private:
  static constexpr std::uint32_t kEmpty = 0xFFFFFFFFu;

  // A power of two at least twice `keys` (load factor <= 1/2), at least 8.
  static std::size_t capacity_for(std::size_t keys) {
    std::size_t capacity = 8;
    while (capacity < keys * 2) capacity *= 2;
    return capacity;
  }

  void rehash(std::size_t capacity) {
    std::vector<std::uint64_t> old = std::move(slots_);
    slots_.assign(capacity, std::uint64_t{kEmpty});
    const std::size_t mask = capacity - 1;
    for (std::uint64_t slot : old) {
      if (static_cast<std::uint32_t>(slot) == kEmpty) continue;
      std::size_t i = static_cast<std::uint32_t>(slot >> 32) & mask;
      while (static_cast<std::uint32_t>(slots_[i]) != kEmpty) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }

  std::vector<std::uint64_t> slots_;
  std::size_t size_ = 0;
};

}  // namespace modelzip::detail
