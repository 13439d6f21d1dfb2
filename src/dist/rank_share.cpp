#include "dist/rank_share.hpp"

#include <map>

#include "core/crc32.hpp"
#include "dist/blocks.hpp"
#include "format/tensor_blob.hpp"
#include "zip/crc_queue.hpp"

namespace modelzip::dist {
namespace {

constexpr std::uint64_t kChunk = 4u << 20;
constexpr std::uint64_t kInlineUpTo = 256u << 10;

}  // namespace

RankShare write_rank_share(const Plan& plan, const std::vector<Item>& items, int rank,
                           io::ByteSink& sink) {
  std::map<std::string, const Item*> mine;  // by key_of
  for (const auto& i : items) mine.emplace(key_of(i.table, i.name, i.state), &i);
  RankShare share;
  std::vector<Piece>& pieces = share.pieces;
  zip::CrcQueue queue;
  std::vector<std::size_t> slot_of;  // piece -> CRC slot, or kInline when computed inline
  constexpr std::size_t kInline = static_cast<std::size_t>(-1);
  for (std::uint64_t idx = 0; idx < plan.entries.size(); ++idx) {
    const PlannedEntry& e = plan.entries[idx];
    auto it = mine.find(e.param);
    const bool header = e.header_rank == rank;
    if (it == mine.end() && !header) continue;
    const Item* item = it == mine.end() ? nullptr : it->second;
    if (item && item->kind == Kind::text) {  // written whole by its header rank
      if (!header) continue;
      if (e.size != item->text.size())
        throw Error(ErrorCode::invalid_argument,
                    "the plan gives '" + e.entry + "' another size than the text staged");
      const zip::EntryPlan zp = e.zip_plan();
      sink.reserve(io::ByteRange{zp.local_offset, zp.header_size()});
      const auto text = std::as_bytes(std::span(item->text));
      pieces.push_back(Piece{idx, 0, e.size, item->text_crc});
      slot_of.push_back(kInline);
      share.written += e.size;
      if (!text.empty()) sink.write(e.data_offset, Bytes::borrow(text, nullptr));
      continue;
    }
    std::vector<std::byte> head;  // the first bytes of the entry's data
    if (header) {
      if (!item)
        throw Error(ErrorCode::invalid_argument, "the plan makes this rank write the header of '" +
                                                     e.param + "', which it did not stage");
      const zip::EntryPlan zp = e.zip_plan();
      if (zp.data_offset != e.data_offset)
        throw Error(ErrorCode::invalid_argument,
                    "local header of '" + e.entry + "' does not end where the plan says");
      sink.reserve(io::ByteRange{zp.local_offset, zp.header_size()});
      const auto layout = format::dense_blob_layout(item->tensor.dtype(), item->global);
      head.assign(layout.header.data(), layout.header.data() + layout.header.size());
      head.resize(static_cast<std::size_t>(e.values_offset));
    }
    const std::uint64_t esize = dtype_size(item->tensor.dtype());
    const std::byte* src = item ? item->tensor.values().data() : nullptr;
    // A small whole tensor goes out with its blob header in one write.
    if (header && item->kind == Kind::whole && e.size <= kInlineUpTo) {
      head.insert(head.end(), src, src + item->tensor.values().size());
      pieces.push_back(Piece{idx, 0, e.size, detail::crc32_of(head)});
      slot_of.push_back(kInline);
      share.written += head.size();
      sink.write(e.data_offset, Bytes::take(std::move(head)));
      continue;
    }
    if (header) {
      pieces.push_back(Piece{idx, 0, head.size(), detail::crc32_of(head)});
      slot_of.push_back(kInline);
      share.written += head.size();
      if (!head.empty()) sink.write(e.data_offset, Bytes::take(std::move(head)));
    }
    if (!item) continue;
    const Bytes values = item->tensor.values();
    dist::for_each_run(
        item->global, item->block, [&](std::uint64_t b, std::uint64_t g, std::uint64_t n) {
          const std::uint64_t rel = e.values_offset + g * esize;
          const std::uint64_t len = n * esize;
          const std::byte* from = values.data() + b * esize;
          std::uint32_t crc = 0;
          std::size_t slot = kInline;
          if (len < kInlineUpTo) {
            // A short run (the piece of a strided shard): handing it to the
            // queue's thread would cost more than its CRC.
            crc = detail::crc32_of(std::span(from, len));
            sink.write_copy(e.data_offset + rel, std::span(from, len));
          } else {
            // The queue's thread computes the CRC-32 while the run is written.
            slot = queue.new_slot();
            for (std::uint64_t off = 0; off < len; off += kChunk)
              queue.push(slot, values.slice(b * esize + off, std::min(kChunk, len - off)));
            sink.write(e.data_offset + rel, values.slice(b * esize, len));
          }
          pieces.push_back(Piece{idx, rel, len, crc});
          slot_of.push_back(slot);
          share.written += len;
        });
  }
  const std::vector<std::uint32_t> crcs = queue.finish();
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (slot_of[i] != kInline) pieces[i].crc = crcs[slot_of[i]];
  return share;
}

std::string encode_share(const RankShare& share, const Plan& plan) {
  WireOut w;
  w.u64(share.written);
  std::vector<std::pair<std::uint64_t, detail::SparseCrc32>> sums;
  for (const Piece& p : share.pieces) {
    if (sums.empty() || sums.back().first != p.entry)
      sums.emplace_back(p.entry, detail::SparseCrc32(plan.entries[p.entry].size));
    if (!sums.back().second.add(p.offset, p.length, p.crc))
      throw Error(ErrorCode::io, "pieces of '" + plan.entries[p.entry].entry +
                                     "' out of order, overlapping or beyond its end (at byte " +
                                     std::to_string(p.offset) + ")");
  }
  w.u64(sums.size());
  for (const auto& [entry, sum] : sums) {
    w.u64(entry);
    w.u64(sum.covered());
    w.u64(sum.value());
  }
  return w.s;
}

EntryCrcs combine_shares(const std::vector<std::string>& all_shares, const Plan& plan,
                         const ErrorContext& ctx) {
  struct Share {
    std::uint64_t covered = 0;
    std::uint32_t xored = 0;
  };
  std::vector<Share> shares(plan.entries.size());
  EntryCrcs out;
  for (std::size_t r = 0; r < all_shares.size(); ++r) {
    WireIn in(all_shares[r], static_cast<int>(r));
    out.written += in.u64();
    const std::uint64_t n = in.u64();
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t entry = in.u64(), covered = in.u64(), value = in.u64();
      if (entry >= shares.size())
        throw Error(ErrorCode::corrupt, "rank " + std::to_string(r) + " wrote an unknown entry");
      shares[entry].covered += covered;
      shares[entry].xored ^= static_cast<std::uint32_t>(value);
    }
  }
  for (std::size_t i = 0; i < plan.entries.size(); ++i) {
    const PlannedEntry& e = plan.entries[i];
    // (The plan checked that the ranks' blocks are disjoint, so bytes that
    // add up to the entry's size cover it exactly.)
    if (shares[i].covered != e.size)
      throw Error(ErrorCode::io,
                  "the ranks' pieces of '" + e.entry + "' do not cover it (" +
                      std::to_string(shares[i].covered) + " bytes of " + std::to_string(e.size) +
                      ")",
                  ctx);
    out.crcs.push_back(detail::SparseCrc32::crc_of_run(e.size, shares[i].xored));
  }
  return out;
}

}  // namespace modelzip::dist
