// The rule of deduplication that decides which earlier blob a new blob
// references: among the blobs of the same table, format and compression
// whose size and CRC-32 equal the new blob's, the first in order (oldest
// tag first, then by index) that holds the same bytes. Writer's dedup and
// the collective writer's dedup of text both pick through this index, so
// that a single and a collective commit write the same archive.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "format/blob_table.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::checkpoint {

// `Where` is what the user of the index keeps with a blob to find its bytes
// (it takes no part in the order).
template <class Where>
class DedupIndex {
 public:
  // What a duplicate shares with the new blob before its bytes are compared.
  struct Key {
    format::TableKind table;
    format::BlobFormat format;
    Compression compression;
    std::uint64_t size;
    std::uint32_t crc;
    auto operator<=>(const Key&) const = default;
  };
  // A blob: the position of its tag in the archive (oldest first) and its
  // index in its table.
  struct Blob {
    std::size_t tag;
    std::uint64_t index;
    Where where;
  };

  // Adds `blob` under `key`, at its place in the order (blobs may be added
  // in any order; in order costs O(log n)).
  void add(const Key& key, Blob blob) {
    std::vector<Blob>& blobs = by_key_[key];
    const auto later = [](const Blob& a, const Blob& b) {
      return std::tie(a.tag, a.index) < std::tie(b.tag, b.index);
    };
    if (blobs.empty() || !later(blob, blobs.back()))
      blobs.push_back(std::move(blob));
    else
      blobs.insert(std::upper_bound(blobs.begin(), blobs.end(), blob, later), std::move(blob));
  }

  // The first blob under `key` in the order for which `same(blob)` is true
  // (it holds the new blob's bytes), or nullopt. `same` is called on the
  // blobs before it only.
  template <class Same>
  std::optional<Blob> first_same(const Key& key, Same&& same) const {
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) return std::nullopt;
    for (const Blob& blob : it->second)
      if (same(blob)) return blob;
    return std::nullopt;
  }

  void clear() noexcept { by_key_.clear(); }

 private:
  std::map<Key, std::vector<Blob>> by_key_;
};

}  // namespace modelzip::checkpoint
