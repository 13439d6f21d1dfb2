// A rank's share of a collective commit: it writes its part of every
// planned entry into its io::ByteSink onto the commit's file (the blob
// header where it is the entry's header rank, and the runs of its blocks;
// a text blob whole, by its header rank)
// and sums up the CRC-32 of its pieces per entry for the root, which gets
// each entry's CRC with one xor per rank (detail::SparseCrc32) and finishes
// the entries' local headers (zip::finish_entry).
// Not thread-safe. Errors: the sink's; Error(invalid_argument) for a plan
// that does not fit this rank's items; Error(corrupt) for a malformed
// share; Error(io) for pieces that do not cover an entry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/commit_messages.hpp"
#include "io/byte_sink.hpp"

namespace modelzip::dist {

// A piece of an entry's data written by one rank, with its CRC.
struct Piece {  // `entry` indexes Plan::entries; `offset` is in its data
  std::uint64_t entry = 0, offset = 0, length = 0;
  std::uint32_t crc = 0;
};

struct RankShare {
  std::vector<Piece> pieces;  // by entry, then by offset
  std::uint64_t written = 0;  // bytes
};

// Writes this rank's part of every planned entry into `sink`: the local
// header's range reserved (the root writes it once the CRC is known), the
// blob header where this rank is the header rank, and the runs of its
// blocks. The CRCs of long runs are computed on a second thread while the
// same chunks are written, those of short ones inline. Does not finish
// the sink. `items` must outlive the sink's finish (it may hold their
// bytes until then).
RankShare write_rank_share(const Plan& plan, const std::vector<Item>& items, int rank,
                           io::ByteSink& sink);

// The message to the root: bytes written and, per entry, the bytes covered
// and the detail::SparseCrc32 value of this rank's pieces.
std::string encode_share(const RankShare& share, const Plan& plan);

struct EntryCrcs {
  std::vector<std::uint32_t> crcs;  // by Plan::entries
  std::uint64_t written = 0;        // by all ranks
};
// Root: each entry's CRC-32 from every rank's share (by rank); Error(io)
// naming the entry where the ranks' pieces do not cover it.
EntryCrcs combine_shares(const std::vector<std::string>& shares, const Plan& plan,
                         const ErrorContext& context);

}  // namespace modelzip::dist
