#include "dist/commit_messages.hpp"

#include <algorithm>
#include <atomic>

namespace modelzip::dist {

namespace {

std::atomic<std::size_t> g_chunk_bytes{0};  // 0: the default

[[noreturn]] void malformed(int rank) {
  throw Error(ErrorCode::corrupt, "malformed collective message from rank " + std::to_string(rank));
}

}  // namespace

std::size_t message_chunk_bytes(int ranks) noexcept {
  if (const std::size_t set = g_chunk_bytes.load()) return set;
  const std::size_t spread = (std::size_t{1} << 30) / static_cast<std::size_t>(std::max(ranks, 1));
  return std::clamp(spread, std::size_t{64} << 10, std::size_t{64} << 20);
}

void set_message_chunk_bytes(std::size_t bytes) noexcept {
  g_chunk_bytes.store(bytes);
}

std::vector<std::string> gather_in_rounds(Communicator& comm, std::string_view bytes, int root) {
  const bool is_root = comm.rank() == root;
  std::size_t chunk = message_chunk_bytes(comm.size());
  WireOut first;
  first.u64(bytes.size());
  first.s.append(bytes.substr(0, chunk));
  std::size_t sent = std::min(bytes.size(), chunk);
  std::vector<std::string> all = comm.gather(first.s, root);
  // The root: each rank's size, its first chunk; the rounds that follow.
  std::vector<std::uint64_t> sizes;
  std::uint64_t rounds = 0;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() < 8) malformed(static_cast<int>(r));
    const std::uint64_t size = WireIn(all[r], static_cast<int>(r)).u64();
    all[r].erase(0, 8);
    if (all[r].size() > size) malformed(static_cast<int>(r));
    sizes.push_back(size);
    rounds = std::max<std::uint64_t>(rounds, (size - all[r].size() + chunk - 1) / chunk);
  }
  WireOut said;
  if (is_root) {
    said.u64(chunk);
    said.u64(rounds);
  }
  const std::string heard = comm.broadcast(said.s, root);
  WireIn in(heard, root);
  chunk = static_cast<std::size_t>(in.u64());
  rounds = in.u64();
  if (chunk == 0 && rounds > 0) malformed(root);
  for (std::uint64_t i = 0; i < rounds; ++i) {
    const std::string_view piece = bytes.substr(std::min(sent, bytes.size()), chunk);
    sent += piece.size();
    std::vector<std::string> got = comm.gather(piece, root);
    for (std::size_t r = 0; r < got.size(); ++r) {
      if (got[r].size() > sizes[r] - all[r].size()) malformed(static_cast<int>(r));
      all[r] += got[r];
    }
  }
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r].size() != sizes[r]) malformed(static_cast<int>(r));
  return all;
}

void broadcast_in_rounds(Communicator& comm, std::string_view bytes, std::uint64_t size, int from,
                         std::size_t chunk, const std::function<void(std::string_view)>& piece) {
  const bool is_source = comm.rank() == from;
  if (chunk == 0 && size > 0) malformed(from);
  for (std::uint64_t at = 0; at < size; at += chunk) {
    const std::uint64_t n = std::min<std::uint64_t>(chunk, size - at);
    const std::string got = comm.broadcast(
        is_source ? bytes.substr(static_cast<std::size_t>(at), static_cast<std::size_t>(n))
                  : std::string_view(),
        from);
    if (got.size() != n) malformed(from);
    piece(got);
  }
}

std::string encode_plan(const Plan& plan) {
  WireOut w;
  w.str(plan.file);
  w.u64(plan.nonce);
  w.u64(plan.entries.size());
  for (const auto& e : plan.entries) {
    w.str(e.param);
    w.str(e.entry);
    w.u64(e.local_offset);
    w.u64(e.data_offset);
    w.u64(e.values_offset);
    w.u64(e.size);
    w.u64(static_cast<std::uint64_t>(e.header_rank));
  }
  return w.s;
}

Plan decode_plan(std::string_view bytes, int root) {
  WireIn r(bytes, root);
  Plan plan;
  plan.file = r.str();
  plan.nonce = r.u64();
  const std::uint64_t n = r.u64();
  for (std::uint64_t i = 0; i < n; ++i) {
    PlannedEntry e;
    e.param = r.str();
    e.entry = r.str();
    e.local_offset = r.u64();
    e.data_offset = r.u64();
    e.values_offset = r.u64();
    e.size = r.u64();
    e.header_rank = static_cast<int>(r.u64());
    plan.entries.push_back(std::move(e));
  }
  return plan;
}

std::string encode_text_checks(const TextChecks& checks) {
  WireOut w;
  w.u64(checks.chunk);
  w.u64(checks.checks.size());
  for (const TextCheck& c : checks.checks) {
    w.u64(static_cast<std::uint64_t>(c.source));
    w.str(c.key);
    w.u64(c.size);
    w.u64(c.claims.size());
    for (const TextCheck::Claim& claim : c.claims) {
      w.u64(static_cast<std::uint64_t>(claim.rank));
      w.str(claim.key);
    }
  }
  return w.s;
}

TextChecks decode_text_checks(std::string_view bytes, int root) {
  WireIn in(bytes, root);
  TextChecks out;
  out.chunk = static_cast<std::size_t>(in.u64());
  const std::uint64_t n = in.u64();
  if (n > 0 && out.chunk == 0) malformed(root);
  for (std::uint64_t i = 0; i < n; ++i) {
    TextCheck c;
    c.source = static_cast<int>(in.u64());
    c.key = in.str();
    c.size = in.u64();
    const std::uint64_t claims = in.u64();
    for (std::uint64_t k = 0; k < claims; ++k) {
      TextCheck::Claim claim;
      claim.rank = static_cast<int>(in.u64());
      claim.key = in.str();
      c.claims.push_back(std::move(claim));
    }
    out.checks.push_back(std::move(c));
  }
  if (!in.done()) malformed(root);
  return out;
}

std::string encode_records(const std::vector<Record>& records) {
  WireOut w;
  w.u64(records.size());
  for (const auto& r : records) {
    w.str(r.name);
    w.u64(static_cast<std::uint64_t>(r.kind));
    w.u64(static_cast<std::uint64_t>(r.dtype));
    w.dims(r.global);
    w.dims(r.block.offset);
    w.dims(r.block.shape);
    w.str(r.from_tag);
    w.str(r.from_param);
    w.u64(r.equals_namesake ? 1 : 0);
    w.u64(static_cast<std::uint64_t>(r.table));
    w.str(r.state);
    w.str(r.content);
    w.u64(r.text_size);
    w.u64(r.text_crc);
    w.u64(r.same_blob ? 1 : 0);
    if (r.same_blob) {
      w.str(r.same_blob->tag);
      w.u64(r.same_blob->index);
      w.u64(static_cast<std::uint64_t>(r.same_blob->format));
    }
  }
  return w.s;
}

std::vector<Record> decode_records(std::string_view bytes, int rank) {
  WireIn in(bytes, rank);
  std::vector<Record> out;
  const std::uint64_t n = in.u64();
  for (std::uint64_t i = 0; i < n; ++i) {
    Record r;
    r.rank = rank;
    r.name = in.str();
    const std::uint64_t kind = in.u64();
    r.kind = static_cast<Kind>(std::min<std::uint64_t>(kind, 255));
    r.dtype = static_cast<DType>(in.u64());
    r.global = in.dims();
    r.block.offset = in.dims();
    r.block.shape = in.dims();
    r.from_tag = in.str();
    r.from_param = in.str();
    r.equals_namesake = in.u64() != 0;
    const std::uint64_t table = in.u64();
    if (kind > static_cast<std::uint64_t>(Kind::text) ||
        table > static_cast<std::uint64_t>(TableKind::updater))
      throw Error(ErrorCode::corrupt,
                  "malformed collective message from rank " + std::to_string(rank));
    r.table = static_cast<TableKind>(table);
    r.state = in.str();
    r.content = in.str();
    r.text_size = in.u64();
    const std::uint64_t crc = in.u64();
    const std::uint64_t same = in.u64();
    if (crc > 0xffffffffu || same > 1)
      throw Error(ErrorCode::corrupt,
                  "malformed collective message from rank " + std::to_string(rank));
    r.text_crc = static_cast<std::uint32_t>(crc);
    if (same) {
      format::BlobRef ref;
      ref.tag = in.str();
      ref.index = in.u64();
      if (in.u64() != static_cast<std::uint64_t>(format::BlobFormat::tensor))
        throw Error(ErrorCode::corrupt,
                    "malformed collective message from rank " + std::to_string(rank));
      r.same_blob = std::move(ref);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace modelzip::dist
