// The data of a collective commit (dist::CollectiveWriter, FORMAT.md
// section 8.4) and its wire format: what a rank stages (Item), what it
// tells the root about it (Record), and the layout the root broadcasts
// (Plan). Messages are little-endian; decoding checks every length and
// throws Error(corrupt) "malformed collective message from rank R".
// Values; thread-safe as values are.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checked.hpp"
#include "format/blob_table.hpp"
#include "modelzip/dist/communicator.hpp"
#include "modelzip/dist/distributed.hpp"
#include "modelzip/error.hpp"
#include "modelzip/tensor.hpp"
#include "zip/entry_writer.hpp"

namespace modelzip::dist {

using format::TableKind;

// entry: a tag-level entry (CollectiveWriter::set_entry), written by the root.
// text: a utf8 tensor, whole (staged on any number of ranks, equal
// everywhere); one rank that staged it writes its encoded blob (the root
// learns its size and CRC-32; the ranks compare texts: TextCheck).
enum class Kind : std::uint8_t { whole = 0, shard = 1, shared = 2, entry = 3, text = 4 };

// One parameter or updater state staged on this rank.
struct Item {
  std::string name;  // updater state: the variable
  Kind kind = Kind::whole;
  Tensor tensor;  // whole or block
  Shape global;
  Block block;
  std::string from_tag, from_param;
  TableKind table = TableKind::params;
  std::string state;           // updater state: its name ("exp_avg"); empty for parameters
  std::string text;            // Kind::text: the encoded blob (owned; `tensor` is empty)
  std::uint32_t text_crc = 0;  // Kind::text: its CRC-32
};

// What a staged array is called in the plan and in messages: parameters and
// updater states (variable, state) have separate name spaces.
inline std::string key_of(TableKind table, std::string_view name, std::string_view state) {
  return std::to_string(static_cast<int>(table)) + ":" + std::to_string(name.size()) + ":" +
         std::string(name) + std::string(state);
}
inline std::string label_of(TableKind table, std::string_view name, std::string_view state) {
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
  // Kind::text: the encoded blob's size and CRC-32, and (dedup) the old
  // blob of the same bytes this rank found (dist/dedup.hpp).
  std::uint64_t text_size = 0;
  std::uint32_t text_crc = 0;
  std::optional<format::BlobRef> same_blob{};
};

// An entry of the layout, as broadcast to every rank.
struct PlannedEntry {
  std::string param, entry;
  std::uint64_t local_offset = 0, data_offset = 0, values_offset = 0, size = 0;
  int header_rank = 0;  // writes the blob header (the root writes the local header)
  // The entry as zip::EntryPlan places it: a stored entry of `size` bytes
  // at local_offset (data_offset is where that puts its data).
  zip::EntryPlan zip_plan() const { return zip::plan_stored(entry, local_offset, size); }
};

// Texts the ranks compare byte for byte before the root plans (their sizes
// and CRC-32s are equal: dist/commit_plan.hpp says when): in order, the
// text `key` of rank `source`, sent to every rank in rounds of `chunk`
// bytes, against each claim's text (a rank's text under its key). The root
// fills in `equal` from the ranks' verdicts.
struct TextCheck {
  int source = 0;
  std::string key;  // key_of
  std::uint64_t size = 0;
  struct Claim {
    int rank = 0;
    std::string key;
    bool equal = false;
  };
  std::vector<Claim> claims;
};
struct TextChecks {
  std::size_t chunk = 0;
  std::vector<TextCheck> checks;
};

struct Plan {
  std::string file;
  std::uint64_t nonce = 0;  // of the append journal; 0: a new archive's temporary file
  std::vector<PlannedEntry> entries;
};

// ---- messages in rounds -----------------------------------------------------

// The most bytes one rank puts into one message of the collectives that
// carry staged bytes (the records, with set_entry contents; text compared
// byte for byte): longer ones go in rounds, so that any size fits the
// engine's limits (MPI counts a gather's bytes, all ranks' together, in an
// int: 2 GiB). 64 MiB, less with more than 16 ranks (1 GiB over all ranks),
// at least 64 KiB.
std::size_t message_chunk_bytes(int ranks) noexcept;
// Internal (tests): every later commit of this process uses chunks of
// `bytes` (0: the default again). Set on every rank alike, between commits.
void set_message_chunk_bytes(std::size_t bytes) noexcept;

// Communicator::gather of any size: every rank's `bytes`, by rank, at
// `root` (empty elsewhere), sent in rounds of at most the root's chunk per
// rank (the first round: each rank's size and its first chunk; then the
// root says how many rounds follow). Error(corrupt) "malformed collective
// message from rank R" for a round that does not add up.
std::vector<std::string> gather_in_rounds(Communicator& comm, std::string_view bytes, int root);

// Communicator::broadcast of `size` bytes (known to every rank) from
// `from`'s `bytes` (ignored elsewhere), in rounds of `chunk` bytes: `piece`
// gets each round's bytes on every rank, in order.
void broadcast_in_rounds(Communicator& comm, std::string_view bytes, std::uint64_t size, int from,
                         std::size_t chunk, const std::function<void(std::string_view)>& piece);

std::string encode_plan(const Plan& plan);
Plan decode_plan(std::string_view bytes, int root);
std::string encode_text_checks(const TextChecks& checks);
TextChecks decode_text_checks(std::string_view bytes, int root);
std::string encode_records(const std::vector<Record>& records);
// Records from `rank` (set in each).
std::vector<Record> decode_records(std::string_view bytes, int rank);

}  // namespace modelzip::dist
