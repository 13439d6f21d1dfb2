// CRC-32s already computed for byte ranges in memory, so that a writer does
// not compute them again: a background save checksums each buffer while it
// copies it into the staging area, and the commit that writes those
// buffers takes their CRCs from here.
//
// A KnownCrcs maps a range (its address and length) to the CRC-32 of its
// bytes. The recorder promises that the bytes do not change while the
// table is in use (staging memory is immutable once copied). Lookups match
// whole ranges only: a slice of a recorded range is not known.
//
// KnownCrcs::Scope makes a table the one known_crc_of consults on the
// calling thread until the scope ends (scopes nest; the innermost wins).
// The commit runs on the thread that opened the scope.
//
// Thread safety: record() is not thread-safe; once recording is done, any
// number of threads may call find(). Scopes are per thread. No errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "modelzip/bytes.hpp"

namespace modelzip::zip {

class KnownCrcs {
 public:
  void record(std::span<const std::byte> range, std::uint32_t crc);
  std::optional<std::uint32_t> find(std::span<const std::byte> range) const;
  std::size_t size() const noexcept { return crcs_.size(); }

  class Scope {
   public:
    explicit Scope(std::shared_ptr<const KnownCrcs> table) noexcept;
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::shared_ptr<const KnownCrcs> table_;
    const KnownCrcs* outer_;
  };

 private:
  std::map<std::pair<const std::byte*, std::size_t>, std::uint32_t> crcs_;
};

// Pieces of at most this many bytes are checksummed on the spot when the
// others are known (headers, padding: not worth recording).
inline constexpr std::size_t kSmallPiece = std::size_t{64} << 10;

// The CRC-32 of the concatenation of `pieces`, if the table of the calling
// thread's scope knows every piece larger than kSmallPiece (the small ones
// are computed here); nullopt otherwise, or when no scope is open, or when
// nothing is larger than kSmallPiece (cheap to compute where it is needed).
std::optional<std::uint32_t> known_crc_of(const std::vector<Bytes>& pieces);

}  // namespace modelzip::zip
