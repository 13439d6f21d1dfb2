// CollectiveWriter: the collective commit (FORMAT.md §8.4). Phases, each
// closed by Communicator::agree so that a failure anywhere is the same
// Error everywhere:
//   1. root: lock, recover, open the archive (CommitTarget); tag checks
//   2. all:  dedup comparisons against the newest tag; records -> root
//   3. root: validate the records, lay out the entries, journal; plan -> all
//   4. all:  pwrite local headers, blob headers and data; CRCs per piece -> root
//   5. root: combine and patch CRCs, params.txt, tags.txt, directory, end
//            records (the commit point)
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "checkpoint/archive_impl.hpp"
#include "checkpoint/entry_validators.hpp"
#include "checkpoint/new_tag_contents.hpp"
#include "core/checked.hpp"
#include "dist/blocks.hpp"
#include "dist/commit_target.hpp"
#include "dist/rank_locks.hpp"
#include "format/blob_table.hpp"
#include "format/tag_name.hpp"
#include "format/tensor_blob.hpp"
#include "io/append_journal.hpp"
#include "io/durable_file.hpp"
#include "io/posix_file.hpp"
#include "io/shared_file_writer.hpp"
#include "io/syscalls.hpp"
#include "modelzip/dist/distributed.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "remote/remote_source.hpp"
#include "zip/crc32.hpp"
#include "zip/crc_queue.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip {

using format::BlobFormat;
using format::BlobRef;
using format::BlobRow;
using format::TableKind;

namespace {

// entry: a tag-level entry (CollectiveWriter::set_entry), written by the root.
enum class Kind : std::uint8_t { whole = 0, shard = 1, shared = 2, entry = 3 };

// One parameter or updater state staged on this rank.
struct Item {
  std::string name;  // updater state: the variable
  Kind kind = Kind::whole;
  Tensor tensor;  // whole or block
  Shape global;
  Block block;
  std::string from_tag, from_param;
  TableKind table = TableKind::params;
  std::string state;  // updater state: its name ("exp_avg"); empty for parameters
};

// What a staged array is called in the plan and in messages: parameters and
// updater states (variable, state) have separate name spaces.
std::string key_of(TableKind table, std::string_view name, std::string_view state) {
  return std::to_string(static_cast<int>(table)) + ":" + std::to_string(name.size()) + ":" +
         std::string(name) + std::string(state);
}
std::string label_of(TableKind table, std::string_view name, std::string_view state) {
  return table == TableKind::params
             ? "parameter '" + std::string(name) + "'"
             : "updater state '" + std::string(state) + "' of '" + std::string(name) + "'";
}

// ---- wire format of the collective messages (little-endian) ---------------

class WireOut {
 public:
  void u64(std::uint64_t v) {
    char b[8];
    detail::store_le(reinterpret_cast<std::byte*>(b), v);
    s.append(b, 8);
  }
  void str(std::string_view v) {
    u64(v.size());
    s.append(v);
  }
  void dims(const std::vector<std::int64_t>& v) {
    u64(v.size());
    for (auto d : v) u64(static_cast<std::uint64_t>(d));
  }
  std::string s;
};

class WireIn {
 public:
  WireIn(std::string_view data, int from) : d_(data), from_(from) {}
  std::uint64_t u64() {
    need(8);
    std::uint64_t v = detail::load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(d_.data()));
    d_.remove_prefix(8);
    return v;
  }
  std::string str() {
    std::uint64_t n = u64();
    need(n);
    std::string v(d_.substr(0, n));
    d_.remove_prefix(n);
    return v;
  }
  std::vector<std::int64_t> dims() {
    std::uint64_t n = u64();
    if (n > 64) bad();
    std::vector<std::int64_t> v;
    for (std::uint64_t i = 0; i < n; ++i) v.push_back(static_cast<std::int64_t>(u64()));
    return v;
  }
  bool done() const { return d_.empty(); }

 private:
  void need(std::uint64_t n) {
    if (n > d_.size()) bad();
  }
  [[noreturn]] void bad() const {
    throw Error(ErrorCode::corrupt,
                "malformed collective message from rank " + std::to_string(from_));
  }
  std::string_view d_;
  int from_;
};

// ---- agreement --------------------------------------------------------------

// The communicator's operations, with its failures explained: from the write
// phase on, every rank holds its alive lock (dist/rank_locks.hpp), so when
// an operation fails (gloo's "Connection closed by peer", an MPI error or
// time-out, an mpi4py exception) and some rank's alive lock is gone, the
// failure becomes Error(io) "collective commit failed: rank R was lost
// ...", naming the ranks whose process ended. Otherwise the engine's
// exception passes unchanged.
class Engine {
 public:
  Engine(Communicator& comm, const ErrorContext& ctx) : comm_(comm), ctx_(ctx) {}
  Communicator& comm() { return comm_; }
  // From now on, failures are checked against these locks (null: no more).
  void watch(const dist::RankLocks* locks) { locks_ = locks; }

  template <class F>
  auto operator()(F&& op) -> decltype(op()) {
    try {
      return op();
    } catch (const std::exception& e) {
      if (locks_ == nullptr) throw;
      // A process that dies closes its descriptors one by one: its peers
      // may see its connections closed before its lock on the archive goes.
      std::vector<int> lost = locks_->lost(comm_.size());
      for (int i = 0; lost.empty() && i < 100; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        lost = locks_->lost(comm_.size());
      }
      if (lost.empty()) throw;
      std::string what = e.what();  // its first line (Python adds a traceback)
      what = what.substr(0, what.find('\n'));
      // The other survivors see the same failure at about the same time and
      // look at the alive locks too: this rank keeps its own a moment
      // longer, so that they do not take it for lost.
      std::this_thread::sleep_for(std::chrono::seconds(2));
      throw Error(ErrorCode::io,
                  "collective commit failed: " + dist::ranks_text(lost) +
                      (lost.size() == 1 ? " was" : " were") +
                      " lost (the process ended during the commit; noticed by rank " +
                      std::to_string(comm_.rank()) + ", whose communication engine said: " +
                      what + ")",
                  ctx_);
    }
  }

 private:
  Communicator& comm_;
  ErrorContext ctx_;
  const dist::RankLocks* locks_ = nullptr;
};

// Runs `step` on this rank, then agrees with every rank: if any failed, all
// throw the lowest failing rank's error (its code kept) naming that rank.
template <class F>
void agreed_step(Engine& engine, const ErrorContext& ctx, F&& step) {
  std::string error;
  try {
    step();
  } catch (const Error& e) {
    error = std::to_string(static_cast<int>(e.code())) + "|" + e.what();
  } catch (const std::exception& e) {
    error = std::to_string(static_cast<int>(ErrorCode::io)) + "|" + e.what();
  }
  if (auto failure = engine([&] { return engine.comm().agree(error); })) {
    ErrorCode code = ErrorCode::io;
    std::string message = failure->message;
    if (auto bar = message.find('|'); bar != std::string::npos) {
      code = static_cast<ErrorCode>(std::atoi(message.substr(0, bar).c_str()));
      message = message.substr(bar + 1);
    }
    throw Error(
        code, "collective commit failed on rank " + std::to_string(failure->rank) + ": " + message,
        ctx);
  }
}

// A record of a staged item as sent to the root.
struct Record {
  int rank = 0;
  std::string name;
  Kind kind = Kind::whole;
  DType dtype = DType::float32;
  Shape global;
  Block block;
  std::string from_tag, from_param;
  bool equals_namesake = false;
  TableKind table = TableKind::params;
  std::string state;
  std::string content;  // Kind::entry: the entry's bytes
};

// An entry of the layout, as broadcast to every rank.
struct PlannedEntry {
  std::string param, entry;
  std::uint64_t local_offset = 0, data_offset = 0, values_offset = 0, size = 0;
  int header_rank = 0;
};

struct Plan {
  std::string file;
  std::uint64_t nonce = 0;  // of the append journal; 0: a new archive's temporary file
  std::vector<PlannedEntry> entries;
};

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

// A piece of an entry's data written by one rank, with its CRC.
struct Piece {
  std::uint64_t entry = 0, offset = 0, length = 0;
  std::uint32_t crc = 0;
};

void pwrite_all(int fd, const std::byte* data, std::uint64_t size, std::uint64_t offset,
                const std::string& file) {
  io::pwrite_full(fd, data, size, offset, ErrorContext{.archive = file});
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

constexpr std::uint64_t kChunk = 4u << 20;
constexpr std::uint64_t kInlineUpTo = 256u << 10;

}  // namespace

class CollectiveWriter::Impl {
 public:
  std::filesystem::path path;
  Communicator* comm = nullptr;
  CollectiveOptions options;
  std::vector<Item> items;
  NewTag entries;  // set_entry(): its name rules, in staging order

  ErrorContext context(const std::string& tag = {}) const {
    return ErrorContext{.archive = path.string(), .tag = tag};
  }
  void check_new(const std::string& name, TableKind table = TableKind::params,
                 const std::string& state = {}) const {
    if (name.empty()) throw Error(ErrorCode::invalid_argument, "empty parameter name", context());
    if (table == TableKind::updater && state.empty())
      throw Error(ErrorCode::invalid_argument, "empty updater state name", context());
    for (const auto& i : items)
      if (i.name == name && i.table == table && i.state == state)
        throw Error(ErrorCode::invalid_argument,
                    label_of(table, name, state) + " is staged twice on rank " +
                        std::to_string(comm->rank()),
                    context());
  }
  void check_tensor(const std::string& label, const Tensor& t) const {
    if (t.layout() != Layout::dense || dtype_size(t.dtype()) == 0)
      throw Error(ErrorCode::unsupported,
                  label + ": distributed saves take dense tensors of fixed-size types", context());
  }
  void stage(Item item, const std::optional<ShardSpec>& spec);

  std::vector<Record> records_with_dedup(const std::optional<Archive>& old) const;
  Plan plan(const std::vector<std::vector<Record>>& all, const std::string& tag,
            dist::CommitTarget& target, std::vector<BlobRow>& rows, CollectiveStats& stats,
            std::vector<std::pair<PlannedEntry, std::string>>& root_entries) const;
  std::vector<Piece> write(const Plan& plan, int fd, std::uint64_t& written) const;
};

namespace {

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
    if (kind > static_cast<std::uint64_t>(Kind::entry) ||
        table > static_cast<std::uint64_t>(TableKind::updater))
      throw Error(ErrorCode::corrupt,
                  "malformed collective message from rank " + std::to_string(rank));
    r.table = static_cast<TableKind>(table);
    r.state = in.str();
    r.content = in.str();
    out.push_back(std::move(r));
  }
  return out;
}

// This rank's share of every entry it wrote pieces of: the bytes covered
// and the zip::SparseCrc32 value of its pieces, from which the root gets
// each entry's CRC-32 with one xor per rank (not one combination per
// piece: a column-sharded tensor has a piece per row and rank).
// `pieces` come as write() returns them: by entry, then by offset.
std::string encode_entry_crcs(const std::vector<Piece>& pieces, const Plan& plan,
                              std::uint64_t written) {
  WireOut w;
  w.u64(written);
  std::vector<std::pair<std::uint64_t, zip::SparseCrc32>> sums;
  for (const Piece& p : pieces) {
    if (sums.empty() || sums.back().first != p.entry)
      sums.emplace_back(p.entry, zip::SparseCrc32(plan.entries[p.entry].size));
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

}  // namespace

// Records of this rank's items; with dedup, each tensor (block) is compared
// with the same region of its namesake in the archive's newest tag.
std::vector<Record> CollectiveWriter::Impl::records_with_dedup(
    const std::optional<Archive>& old) const {
  std::vector<Record> out;
  for (const auto& item : items) {
    Record r;
    r.rank = comm->rank();
    r.name = item.name;
    r.kind = item.kind;
    r.dtype = item.tensor.dtype();
    r.global = item.global;
    r.block = item.block;
    r.from_tag = item.from_tag;
    r.from_param = item.from_param;
    r.table = item.table;
    r.state = item.state;
    if (old && options.dedup && item.kind != Kind::shared && !old->tags().empty()) {
      const auto& impl = Archive::Impl::of(*old);
      const std::size_t prev = impl.tags.size() - 1;
      const auto& tt = impl.tables[prev];
      const auto& index = item.table == TableKind::params ? tt.param_index : tt.updater_index;
      const auto& rows = tt.rows(item.table);
      const std::size_t at =
          index.find(format::row_key_hash(item.table, item.name, item.state), [&](std::size_t p) {
            return format::row_has_keys(rows[p], item.table, item.name, item.state);
          });
      if (at != detail::PositionIndex::npos && rows[at].ref.format == BlobFormat::tensor) {
        const ParamInfo info = impl.info(prev, rows[at], item.table);
        if (!info.compressed && info.layout == Layout::dense && info.dtype == r.dtype &&
            info.shape == r.global) {
          const Tensor before =
              item.table == TableKind::params
                  ? old->tensor(item.name, impl.tags[prev], ReadMode::zero_copy)
                  : old->updater_state(item.name, item.state, impl.tags[prev], ReadMode::zero_copy);
          const std::uint64_t esize = dtype_size(r.dtype);
          const std::byte* mine = item.tensor.values().data();
          const std::byte* theirs = before.values().data();
          bool same = true;
          dist::for_each_run(r.global, r.block,
                             [&](std::uint64_t b, std::uint64_t g, std::uint64_t n) {
                               if (same)
                                 same = std::memcmp(mine + b * esize, theirs + g * esize,
                                                    static_cast<std::size_t>(n * esize)) == 0;
                             });
          r.equals_namesake = same;
        }
      }
    }
    out.push_back(std::move(r));
  }
  for (const auto& e : NewTag::Contents::of(entries).entries) {
    Record r;
    r.rank = comm->rank();
    r.name = e.relative_name;
    r.kind = Kind::entry;
    r.content = std::string(e.contents.as_string_view());
    out.push_back(std::move(r));
  }
  return out;
}

// Root: validates every rank's records together and lays out the new
// entries (params.txt, then the blobs in parameter order) after the
// archive's data, exactly as the single writer places them.
Plan CollectiveWriter::Impl::plan(
    const std::vector<std::vector<Record>>& all, const std::string& tag, dist::CommitTarget& target,
    std::vector<BlobRow>& rows, CollectiveStats& stats,
    std::vector<std::pair<PlannedEntry, std::string>>& root_entries) const {
  const Archive* old = target.old();
  auto rank_of = [](const Record* r) { return "rank " + std::to_string(r->rank); };
  // Parameters and updater states in order of first appearance (rank
  // order, then staging order); tag-level entries likewise.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Record*>> by_name;  // by key_of
  std::vector<const Record*> tag_entries;
  for (const auto& rank_records : all)
    for (const auto& r : rank_records) {
      if (r.kind == Kind::entry) {
        for (const Record* e : tag_entries)
          if (e->name == r.name)
            throw Error(ErrorCode::invalid_argument,
                        "entry '" + r.name + "' is staged twice (by " + rank_of(e) + " and " +
                            rank_of(&r) + ")",
                        ErrorContext{.tag = tag});
        if (auto validate = find_entry_validator(tag + "/" + r.name)) {
          try {
            validate(Bytes::borrow(std::as_bytes(std::span(r.content)), nullptr), Limits{});
          } catch (const Error& e) {
            throw e.with_context({.entry = tag + "/" + r.name, .tag = tag});
          }
        }
        tag_entries.push_back(&r);
        continue;
      }
      const std::string key = key_of(r.table, r.name, r.state);
      auto& v = by_name[key];
      if (v.empty()) order.push_back(key);
      v.push_back(&r);
    }
  auto invalid = [&](const std::string& label, const std::string& what) {
    throw Error(ErrorCode::invalid_argument, label + ": " + what, ErrorContext{.tag = tag});
  };

  struct Param {
    const Record* first;
    bool new_blob = false;
    BlobRef ref;
  };
  std::vector<Param> params;
  for (const auto& key : order) {
    const auto& pieces = by_name[key];
    const Record* first = pieces.front();
    const std::string& name = first->name;
    const std::string label = label_of(first->table, name, first->state);
    for (const Record* p : pieces)
      if (p != first && (p->kind != Kind::shard || first->kind != Kind::shard))
        invalid(label, "staged twice (by " + rank_of(first) + " and " + rank_of(p) + ")");
    Param param{first};
    if (first->kind == Kind::shared) {
      if (!old || !old->find_tag(first->from_tag))
        throw Error(ErrorCode::not_found,
                    "cannot share '" + name + "' from tag '" + first->from_tag + "': no such tag",
                    ErrorContext{.tag = tag});
      const auto& impl = Archive::Impl::of(*old);
      const std::size_t pos = impl.tag_position(first->from_tag);
      const BlobRow& row = impl.row(pos, TableKind::params, first->from_param);
      param.ref = row.ref;
      if (param.ref.tag.empty()) param.ref.tag = impl.tags[pos];
      params.push_back(param);
      continue;
    }
    std::uint64_t covered = 0;
    bool all_equal = true;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const Record* p = pieces[i];
      if (p->dtype != first->dtype)
        invalid(label, rank_of(first) + " and " + rank_of(p) + " disagree on the dtype (" +
                           std::string(dtype_name(first->dtype)) + " vs " +
                           std::string(dtype_name(p->dtype)) + ")");
      if (p->global != first->global)
        invalid(label, rank_of(first) + " and " + rank_of(p) + " disagree on the global shape (" +
                           shape_text(first->global) + " vs " + shape_text(p->global) + ")");
      dist::check_block(p->global, p->block, label);
      for (std::size_t k = 0; k < i; ++k)
        if (dist::blocks_overlap(pieces[k]->block, p->block))
          invalid(label, "the blocks of " + rank_of(pieces[k]) + " " +
                             dist::block_text(pieces[k]->block) + " and " + rank_of(p) + " " +
                             dist::block_text(p->block) + " overlap");
      covered += dist::block_numel(p->block);
      all_equal = all_equal && p->equals_namesake;
    }
    const std::uint64_t numel = shape_numel(first->global);
    if (covered != numel)
      invalid(label, "the blocks staged by " + std::to_string(pieces.size()) + " rank(s) cover " +
                         std::to_string(covered) + " of its " + std::to_string(numel) +
                         " elements (global shape " + shape_text(first->global) +
                         "): blocks are missing");
    if (all_equal && old && options.dedup) {
      const auto& impl = Archive::Impl::of(*old);
      const std::size_t prev = impl.tags.size() - 1;
      const std::string row_key =
          first->table == TableKind::params ? name : name + std::string(1, '\0') + first->state;
      param.ref = impl.row(prev, first->table, row_key).ref;
      if (param.ref.tag.empty()) param.ref.tag = impl.tags[prev];
      ++stats.blobs_deduplicated;
    } else {
      param.new_blob = true;
    }
    params.push_back(param);
  }

  // params.txt, updater.txt (when there is updater state), the tag-level
  // entries and the blob entries (parameters, then updater states), placed
  // one after another in the single writer's order.
  std::uint64_t next_index[2] = {0, 0};
  std::vector<BlobRow> updater_rows;
  for (auto& p : params) {
    const TableKind table = p.first->table;
    if (p.new_blob) p.ref = BlobRef{"", next_index[static_cast<int>(table)]++, BlobFormat::tensor};
    if (table == TableKind::params)
      rows.push_back(BlobRow{{p.first->name}, p.ref, 0});
    else
      updater_rows.push_back(BlobRow{{p.first->name, p.first->state}, p.ref, 0});
  }
  const std::string params_txt = format::write_blob_table(rows, TableKind::params);

  const dist::CommitTarget::Start start = target.begin(tag);
  Plan plan;
  plan.file = start.file;
  plan.nonce = start.nonce;
  std::uint64_t cursor = start.offset;
  auto place = [&](const std::string& param, const std::string& entry, std::uint64_t size,
                   std::uint64_t values_offset, int header_rank) {
    PlannedEntry e{param, entry, cursor, 0, values_offset, size, header_rank};
    const auto lh =
        zip::encode_local_header(zip::LocalHeader{.name = entry,
                                                  .compressed = size,
                                                  .uncompressed = size,
                                                  .zip64 = zip::needs_zip64_local(size)},
                                 cursor, true);
    e.data_offset = detail::checked_add(cursor, lh.size(), "archive");
    cursor = detail::checked_add(e.data_offset, size, "archive");
    return e;
  };
  root_entries.emplace_back(place("", tag + "/params.txt", params_txt.size(), 0, options.root),
                            params_txt);
  if (!updater_rows.empty()) {
    std::string updater_txt = format::write_blob_table(updater_rows, TableKind::updater);
    root_entries.emplace_back(place("", tag + "/updater.txt", updater_txt.size(), 0, options.root),
                              updater_txt);
  }
  for (const Record* e : tag_entries)
    root_entries.emplace_back(place("", tag + "/" + e->name, e->content.size(), 0, options.root),
                              e->content);
  for (TableKind table : {TableKind::params, TableKind::updater})
    for (const auto& p : params) {
      if (!p.new_blob || p.first->table != table) continue;
      const auto layout = format::dense_blob_layout(p.first->dtype, p.first->global);
      const std::string key = key_of(table, p.first->name, p.first->state);
      // The header goes with the block that holds the first element (for an
      // empty tensor: the first rank that staged it).
      int header_rank = p.first->rank;
      for (const Record* r : by_name[key])
        if (dist::block_numel(r->block) > 0 &&
            std::all_of(r->block.offset.begin(), r->block.offset.end(),
                        [](std::int64_t o) { return o == 0; }))
          header_rank = r->rank;
      plan.entries.push_back(place(key, format::blob_entry_name(p.ref, tag, table), layout.size,
                                   layout.values_offset, header_rank));
      ++stats.blobs_written;
    }
  // Until the new end records are in place, the file stays an ordinary zip
  // of the old archive (FORMAT.md section 8.1): a copy of the old tail goes
  // beyond everything this commit writes. The new tail is at most the old
  // one plus a directory record per new entry, the tag's line in tags.txt,
  // a larger padding and the ZIP64 end records.
  {
    std::uint64_t tail = 4096 + tag.size();
    for (const auto& e : plan.entries) tail += 46 + 28 + 67 + e.entry.size();
    for (const auto& e : root_entries) tail += 46 + 28 + 67 + e.first.entry.size();
    const std::uint64_t old_tail =
        target.old() ? Archive::Impl::of(*target.old()).reader.file().size() - start.offset : 0;
    target.protect(detail::checked_add(cursor, tail + old_tail, "archive"));
  }
  // The blocks of the new entries are allocated before any rank writes, so
  // that the ranks' writes (io::SharedFileWriter) run in parallel, none of
  // them extending the file or allocating. An interrupted commit cuts the
  // file back (journal) or removes it (temporary file).
  {
    io::AppendFile file(plan.file);
    io::preallocate(file.fd(), start.offset, cursor - start.offset);
  }
  return plan;
}

// Writes this rank's part of every planned entry: the local header and blob
// header where this rank is the header rank, and the runs of its blocks.
// Returns the pieces with their CRCs, by entry and then by offset (the CRCs
// of long runs computed on a second thread while the same chunks are
// written, those of short ones inline).
std::vector<Piece> CollectiveWriter::Impl::write(const Plan& plan, int fd,
                                                 std::uint64_t& written) const {
  std::map<std::string, const Item*> mine;  // by key_of
  for (const auto& i : items) mine.emplace(key_of(i.table, i.name, i.state), &i);
  std::vector<Piece> pieces;
  // Tensor data goes out through io::SharedFileWriter: the middle of long
  // runs directly, the rest through the page cache (see there for why, and
  // why the headers, written with pwrite, can share the file with it).
  io::SharedFileWriter out(plan.file, ErrorContext{.archive = plan.file});
  zip::CrcQueue queue;
  std::vector<std::size_t> slot_of;  // piece -> CRC slot, or npos when computed inline
  constexpr std::size_t kInline = static_cast<std::size_t>(-1);
  for (std::uint64_t idx = 0; idx < plan.entries.size(); ++idx) {
    const PlannedEntry& e = plan.entries[idx];
    auto it = mine.find(e.param);
    const bool header = e.header_rank == comm->rank();
    if (it == mine.end() && !header) continue;
    const Item* item = it == mine.end() ? nullptr : it->second;
    std::vector<std::byte> head;
    if (header) {
      if (!item)
        throw Error(ErrorCode::invalid_argument, "the plan makes this rank write the header of '" +
                                                     e.param + "', which it did not stage");
      const auto layout = format::dense_blob_layout(item->tensor.dtype(), item->global);
      head = zip::encode_local_header(zip::LocalHeader{.name = e.entry,
                                                       .flags = zip::name_flags(e.entry),
                                                       .compressed = e.size,
                                                       .uncompressed = e.size,
                                                       .zip64 = zip::needs_zip64_local(e.size)},
                                      e.local_offset, true);
      if (e.local_offset + head.size() != e.data_offset)
        throw Error(ErrorCode::invalid_argument,
                    "local header of '" + e.entry + "' does not end where the plan says");
      head.insert(head.end(), layout.header.data(), layout.header.data() + layout.header.size());
      head.resize(static_cast<std::size_t>(e.data_offset - e.local_offset + e.values_offset));
    }
    const std::uint64_t head_data = header ? e.values_offset : 0;  // entry bytes in `head`
    const std::uint64_t esize = dtype_size(item->tensor.dtype());
    const std::byte* src = item->tensor.values().data();
    // A small whole tensor goes out with its header in one write.
    if (header && item->kind == Kind::whole && e.size <= kInlineUpTo) {
      head.insert(head.end(), src, src + item->tensor.values().size());
      pwrite_all(fd, head.data(), head.size(), e.local_offset, plan.file);
      const std::byte* data = head.data() + (e.data_offset - e.local_offset);
      pieces.push_back(Piece{idx, 0, e.size, zip::crc32_of(std::span(data, e.size))});
      slot_of.push_back(kInline);
      written += head.size();
      continue;
    }
    if (header) {
      pwrite_all(fd, head.data(), head.size(), e.local_offset, plan.file);
      const std::byte* data = head.data() + (e.data_offset - e.local_offset);
      pieces.push_back(Piece{idx, 0, head_data, zip::crc32_of(std::span(data, head_data))});
      slot_of.push_back(kInline);
      written += head.size();
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
            crc = zip::crc32_of(std::span(from, len));
          } else {
            // The queue's thread computes the CRC-32 while the run is written.
            slot = queue.new_slot();
            for (std::uint64_t off = 0; off < len; off += kChunk)
              queue.push(slot, values.slice(b * esize + off, std::min(kChunk, len - off)));
          }
          out.write(from, len, e.data_offset + rel);
          pieces.push_back(Piece{idx, rel, len, crc});
          slot_of.push_back(slot);
          written += len;
        });
  }
  out.finish();
  const std::vector<std::uint32_t> crcs = queue.finish();
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (slot_of[i] != kInline) pieces[i].crc = crcs[slot_of[i]];
  return pieces;
}

CollectiveWriter::CollectiveWriter(std::filesystem::path path, Communicator& comm,
                                   CollectiveOptions options)
    : impl_(std::make_unique<Impl>()) {
  remote::refuse_write(path.native());
  impl_->path = std::move(path);
  impl_->comm = &comm;
  impl_->options = options;
  if (options.root < 0 || options.root >= comm.size())
    throw Error(ErrorCode::invalid_argument,
                "root rank " + std::to_string(options.root) + " is not in the communicator of " +
                    std::to_string(comm.size()) + " ranks",
                impl_->context());
}
CollectiveWriter::~CollectiveWriter() = default;
CollectiveWriter::CollectiveWriter(CollectiveWriter&&) noexcept = default;
CollectiveWriter& CollectiveWriter::operator=(CollectiveWriter&&) noexcept = default;

// Checks and stages `item` (its name, table, state and tensor set): whole,
// or the block `spec` places.
void CollectiveWriter::Impl::stage(Item item, const std::optional<ShardSpec>& spec) {
  check_new(item.name, item.table, item.state);
  const std::string label = label_of(item.table, item.name, item.state);
  check_tensor(label, item.tensor);
  if (!spec) {
    item.kind = Kind::whole;
    item.global = item.tensor.shape();
    item.block = Block{std::vector<std::int64_t>(item.global.size(), 0), item.global};
  } else {
    item.kind = Kind::shard;
    item.block = Block{spec->offset, item.tensor.shape()};
    item.global = spec->global_shape;
    try {
      dist::check_block(item.global, item.block, label);
    } catch (const Error& e) {
      throw e.with_context(context());
    }
  }
  items.push_back(std::move(item));
}

void CollectiveWriter::add(std::string name, Tensor tensor) {
  impl_->stage(Item{std::move(name), Kind::whole, std::move(tensor)}, std::nullopt);
}

void CollectiveWriter::add_shard(std::string name, Tensor block, ShardSpec spec) {
  impl_->stage(Item{std::move(name), Kind::shard, std::move(block)}, std::move(spec));
}

void CollectiveWriter::add_updater_state(std::string variable, std::string state, Tensor tensor) {
  Item item{std::move(variable), Kind::whole, std::move(tensor)};
  item.table = TableKind::updater;
  item.state = std::move(state);
  impl_->stage(std::move(item), std::nullopt);
}

void CollectiveWriter::add_updater_shard(std::string variable, std::string state, Tensor block,
                                         ShardSpec spec) {
  Item item{std::move(variable), Kind::shard, std::move(block)};
  item.table = TableKind::updater;
  item.state = std::move(state);
  impl_->stage(std::move(item), std::move(spec));
}

void CollectiveWriter::set_entry(std::string relative_name, Bytes contents) {
  try {
    impl_->entries.set_entry(std::move(relative_name), std::move(contents));
  } catch (const Error& e) {
    throw e.with_context(impl_->context());
  }
}

void CollectiveWriter::share(std::string name, std::string from_tag, std::string from_param) {
  impl_->check_new(name);
  Item item{std::move(name), Kind::shared};
  item.from_tag = std::move(from_tag);
  item.from_param = std::move(from_param);
  impl_->items.push_back(std::move(item));
}

CollectiveStats CollectiveWriter::commit(const std::string& tag) {
  Impl& m = *impl_;
  Communicator& comm = *m.comm;
  const int root = m.options.root;
  const bool is_root = comm.rank() == root;
  const ErrorContext ctx = m.context(tag);
  CollectiveStats stats;
  Engine engine(comm, ctx);

  // 1. The root locks the archive and checks the tag.
  std::unique_ptr<dist::CommitTarget> target;
  agreed_step(engine, ctx, [&] {
    format::check_tag(tag);
    if (!is_root) return;
    target = std::make_unique<dist::CommitTarget>(m.path, m.options.durable, m.options.on_notice);
    if (target->old())
      if (auto existing = target->old()->find_tag(tag))
        throw Error(ErrorCode::already_exists,
                    "tag '" + *existing + "' exists already (tags ignore case)", ctx);
  });
  const bool exists =
      engine([&] { return comm.broadcast(is_root && target->old() ? "1" : "0", root); }) == "1";

  // 2. Records (with dedup verdicts) to the root. From here on every rank
  // holds its alive lock on the archive (on a new archive's temporary file
  // from step 4), so that a failure of the engine can name a rank that died.
  std::string records;
  std::optional<dist::RankLocks> locks;
  agreed_step(engine, ctx, [&] {
    if (exists) {
      locks.emplace(m.path, comm.rank());
      engine.watch(&*locks);
    }
    std::optional<Archive> old;
    if (exists && m.options.dedup && !m.items.empty()) {
      if (is_root)
        old = *target->old();
      else
        old = Archive::open(m.path);
    }
    records = encode_records(m.records_with_dedup(old));
  });
  const std::vector<std::string> gathered = engine([&] { return comm.gather(records, root); });

  // 3. The root validates and plans.
  std::vector<BlobRow> rows;
  std::vector<std::pair<PlannedEntry, std::string>> root_entries;
  std::string plan_bytes;
  agreed_step(engine, ctx, [&] {
    if (!is_root) return;
    std::vector<std::vector<Record>> all;
    for (std::size_t r = 0; r < gathered.size(); ++r)
      all.push_back(decode_records(gathered[r], static_cast<int>(r)));
    plan_bytes = encode_plan(m.plan(all, tag, *target, rows, stats, root_entries));
  });
  const Plan plan =
      decode_plan(engine([&] { return comm.broadcast(plan_bytes, root); }), root);

  // 4. Every rank writes its bytes, holding its writing lock meanwhile (the
  // root undoes a failed commit only once no rank holds one) and its alive
  // lock until the commit ends (dist/rank_locks.hpp).
  std::string shares_bytes;
  std::optional<io::AppendFile> out;
  agreed_step(engine, ctx, [&] {
    if (!locks) {
      locks.emplace(plan.file, comm.rank());
      engine.watch(&*locks);
    }
    locks->begin_writes();
    struct EndWrites {
      dist::RankLocks& locks;
      ~EndWrites() { locks.end_writes(); }
    } end_writes{*locks};
    // Locked while the commit is still on: its journal is there (once the
    // root has undone the commit, a later writer may own the file).
    if (plan.nonce != 0) {
      const io::JournalState journal = io::read_append_journal(plan.file);
      if (journal.kind != io::JournalState::Kind::valid || journal.journal.nonce != plan.nonce)
        throw Error(ErrorCode::io, "the commit was undone before rank " +
                                       std::to_string(comm.rank()) + " began to write");
    }
    out.emplace(plan.file);
    std::uint64_t written = 0;
    std::vector<Piece> pieces = m.write(plan, out->fd(), written);
    if (is_root)
      for (const auto& [e, content] : root_entries) {
        auto head = zip::encode_local_header(
            zip::LocalHeader{.name = e.entry,
                             .flags = zip::name_flags(e.entry),
                             .crc = zip::crc32_of(std::as_bytes(std::span(content))),
                             .compressed = e.size,
                             .uncompressed = e.size},
            e.local_offset, true);
        head.insert(head.end(), reinterpret_cast<const std::byte*>(content.data()),
                    reinterpret_cast<const std::byte*>(content.data()) + content.size());
        pwrite_all(out->fd(), head.data(), head.size(), e.local_offset, plan.file);
        written += head.size();
      }
    if (m.options.durable && written > 0) out->sync();
    stats.bytes_written = written;
    shares_bytes = encode_entry_crcs(pieces, plan, written);
  });
  const std::vector<std::string> all_shares =
      engine([&] { return comm.gather(shares_bytes, root); });

  // 5. The root checks that the ranks' pieces cover every entry, gets its
  // CRC from their shares, patches it into the local header and commits.
  std::string stats_bytes;
  bool visible = false;
  agreed_step(engine, ctx, [&] {
    if (!is_root) return;
    struct Share {
      std::uint64_t covered = 0;
      std::uint32_t xored = 0;
    };
    std::vector<Share> shares(plan.entries.size());
    std::uint64_t total = 0;
    for (std::size_t r = 0; r < all_shares.size(); ++r) {
      WireIn in(all_shares[r], static_cast<int>(r));
      total += in.u64();
      const std::uint64_t n = in.u64();
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t entry = in.u64(), covered = in.u64(), value = in.u64();
        if (entry >= shares.size())
          throw Error(ErrorCode::corrupt, "rank " + std::to_string(r) + " wrote an unknown entry");
        shares[entry].covered += covered;
        shares[entry].xored ^= static_cast<std::uint32_t>(value);
      }
    }
    std::vector<zip::EntryInfo> written;
    for (const auto& [e, content] : root_entries) {
      zip::EntryInfo info;
      info.name = e.entry;
      info.flags = zip::name_flags(e.entry);
      info.crc32 = zip::crc32_of(std::as_bytes(std::span(content)));
      info.compressed_size = info.uncompressed_size = e.size;
      info.local_header_offset = e.local_offset;
      info.data_offset = e.data_offset;
      written.push_back(std::move(info));
    }
    std::uint64_t end = root_entries.back().first.data_offset + root_entries.back().first.size;
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
      const std::uint32_t crc = zip::SparseCrc32::crc_of_run(e.size, shares[i].xored);
      std::byte field[4];
      detail::store_le<std::uint32_t>(field, crc);
      pwrite_all(out->fd(), field, 4, e.local_offset + 14, plan.file);
      zip::EntryInfo info;
      info.name = e.entry;
      info.flags = zip::name_flags(e.entry);
      info.crc32 = crc;
      info.compressed_size = info.uncompressed_size = e.size;
      info.local_header_offset = e.local_offset;
      info.data_offset = e.data_offset;
      written.push_back(std::move(info));
      end = std::max(end, e.data_offset + e.size);
    }
    std::vector<std::string> tags =
        target->old() ? target->old()->tags() : std::vector<std::string>{};
    tags.push_back(tag);
    const std::uint64_t before = end;
    try {
      target->finish(written, tags, end, &visible);
    } catch (const Error& e) {
      if (!visible) throw;
      throw e.reworded(
          "the new tag is visible, but finishing the commit failed (it may not survive "
          "a power loss): " +
              e.message(),
          e.context());
    }
    total += std::filesystem::file_size(m.path) - before + 4 * plan.entries.size();
    WireOut w;
    w.u64(total);
    w.u64(stats.blobs_written);
    w.u64(stats.blobs_deduplicated);
    w.u64(exists ? 1 : 0);
    stats_bytes = w.s;
  });
  out.reset();
  target.reset();  // unlocks
  const std::string final_stats = engine([&] { return comm.broadcast(stats_bytes, root); });
  WireIn in(final_stats, root);
  stats.archive_bytes_written = in.u64();
  stats.blobs_written = in.u64();
  stats.blobs_deduplicated = in.u64();
  stats.appended = in.u64() != 0;
  m.items.clear();
  m.entries = NewTag();
  return stats;
}

}  // namespace modelzip
