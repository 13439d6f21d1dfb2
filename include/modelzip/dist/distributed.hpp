// Distributed checkpoints: N ranks commit one tag of one ordinary archive
// together, each writing only its own bytes, and any number of ranks read
// blocks of it back, each reading only what it needs.
//
// Writing (collective, over a Communicator: modelzip/dist/mpi.hpp, or the Python
// module modelzip.distributed for torch.distributed and mpi4py):
//
//   CollectiveWriter w("model.zip", comm);
//   w.add("embedding", emb);                            // a whole parameter this rank owns
//   Block rows = split_block({4096, 1024}, 0, rank, size);  // this rank's rows
//   w.add_shard("fc.weight", my_rows, {4096, 1024}, rows);  // of a sharded parameter
//   w.commit("step-10");                                 // every rank calls it
//
// Every sharded parameter becomes ONE ordinary tensor blob entry, and the
// archive is byte for byte what a single process saving the whole tensors
// would write: row
// blocks are contiguous ranges of it, column and other blocks are written
// piece by piece at their row-major positions. The archive is a normal
// modelzip archive: Archive::open, verify, zip tools read it.
//
// Commit protocol (FORMAT.md §8.4): the root locks the archive, recovers an
// interrupted append and journals; it gathers every rank's staged records,
// validates them (a parameter staged on two ranks or twice, blocks that
// overlap, leave elements uncovered or disagree on dtype or global shape),
// lays out the new entries after the current data exactly as a single
// writer would (every tensor's data 64-byte aligned) and broadcasts the
// layout; every rank pwrites its local headers, blob headers and data in
// parallel, computing CRC-32s per piece; the root combines them in order
// (crc32_combine), and writes params.txt, tags.txt, the central directory
// and the end records. The commit point is the single writer's (the
// append journal's removal, or the rename of a new file), so a rank killed
// at any point leaves the old archive or the new one. Every phase ends with Communicator::agree: an
// error on one rank throws the same modelzip::Error (naming that rank) on every rank, and before
// the commit point the archive is left as it was.
//
// s3://BUCKET/KEY (built with libcurl): the same commit onto one S3
// object, by one multipart upload whose parts the ranks upload and the root
// completes conditionally (docs/s3-writes.md, "Collective saves").
//
// Dedup: each rank compares its tensors (or blocks) with the same region of
// the namesake parameter of the archive's newest tag; a parameter whose
// pieces all match on every rank is written as a reference (text, staged
// whole, is also found in older tags and under other names, as Writer finds
// any blob). share() references another tag's parameter explicitly.
//
// Updater (optimizer) state: add_updater_state()/add_updater_shard() stage
// the arrays of <tag>/updater.txt (FORMAT.md §4.2) the same way, e.g. each
// rank the block of Adam's exp_avg that matches its block of the parameter;
// set_entry() stages a tag-level entry such as trainingConfig.fb, which the
// root writes. The tag is then what a single Writer committing the whole
// checkpoint writes (checkpoint.hpp; modelzip.torch.save_checkpoint), and
// read_updater_block() reads any block of a state back.
//
// Text (a utf8 tensor, Tensor::strings: a vocabulary, a run id) is staged
// whole by add() or add_updater_state(), as NewTag::add takes it; one rank
// that staged it writes it. Several ranks may stage the same name with
// equal text (a replicated value): it is stored once, after the ranks
// compared it byte for byte (the writing rank sends it to the others, in
// rounds, unless each found it in the archive).
//
// Limits: distributed tensors are dense, of fixed-size dtypes or text,
// stored (uncompressed), and so are set_entry()'s entries; embeddings and
// deflated blobs are written by the single-process Writer. Thread safety:
// one thread per CollectiveWriter.
// Tensors given to add()/add_shard() and the add_updater_*() functions are
// borrowed until commit() returns (text is copied when staged).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/archive.hpp"
#include "modelzip/dist/communicator.hpp"
#include "modelzip/export.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip {

// A rectangular block of a global array (a tensor of a larger shape):
// `offset[d]` is its first index in dimension d, `shape[d]` its extent. The
// one type for a block, written (add_shard) and read (read_block).
struct MODELZIP_API Block {
  std::vector<std::int64_t> offset{};
  Shape shape{};
};

// Part `part` of `parts` of `global_shape` split along dimension `dim` as
// evenly as possible (the first `extent % parts` parts get one more index;
// parts beyond the extent are empty). Throws Error(invalid_argument).
MODELZIP_API Block split_block(const Shape& global_shape, std::size_t dim, std::int64_t part,
                               std::int64_t parts);

struct MODELZIP_API CollectiveOptions {
  bool dedup = true;    // reference unchanged namesakes of the newest tag
  bool durable = true;  // fsync data, directory and folder before commit returns
  int root = 0;         // the rank that locks, journals and writes the directory
  // Called on the root with "rolled back an interrupted save of tag X" when it recovered from an
  // earlier commit that was killed, and with "... (new plan N of 3)" on s3:// (WriterOptions).
  std::function<void(const std::string&)> on_notice{};
  // How long the root, undoing a failed commit of an existing archive, waits
  // for ranks still writing into it (their writing locks, FORMAT.md §8.4)
  // before it gives up and leaves the append journal to the next writer
  // (which then waits for those ranks through the writer lock and rolls the
  // commit back). Unset: the environment variable
  // MODELZIP_RANK_LOCK_TIMEOUT (seconds, a decimal number >= 0, e.g. "0.5"),
  // else 60 s. commit() throws Error(invalid_argument) on every rank for a
  // negative value or a malformed variable.
  std::optional<std::chrono::milliseconds> rank_lock_timeout{};
};

// Tags a collective commit removes in the same commit as it adds its tag
// (atomic: readers see the old tags or the new ones), as Writer::replace_tag
// and Writer::keep_last staged after the tag do: a removed tag's blob that
// a remaining tag (the new one included: dedup and share() reference older
// tags' blobs) still references moves into the oldest such tag, and the
// tables referencing it are rewritten. The removed entries' bytes become
// free entries (FORMAT.md "Removing in place"); when a commit leaves more
// free bytes than live ones, the root then rewrites the archive (a
// single-writer rewrite that keeps every tag, as WriterOptions::append
// does), so a rolling archive stays within about twice its live data plus
// one save. They are options of commit(), not of the writer, because they
// are about one commit (Writer and BackgroundSaveOptions take them per
// save too). Every rank passes the same values (like the tag); the commit
// fails on every rank otherwise. keep_last 0 fails the commit on every rank
// with Error(invalid_argument) before anything is written. On an s3://
// archive the tags are removed in the commit's one multipart upload (the
// free entries' headers in it) and the rewrite is a second upload of
// server-side copies (docs/s3-writes.md).
struct MODELZIP_API CollectiveCommitOptions {
  // Replace the tag of the same name (matched without regard to case) if
  // there is one; without it, an existing tag fails the commit.
  bool replace = false;
  // Then keep only the newest `keep_last` tags (the new one included).
  std::optional<std::size_t> keep_last{};
};

struct MODELZIP_API CollectiveStats {
  std::uint64_t bytes_written = 0;          // by this rank
  std::uint64_t archive_bytes_written = 0;  // by all ranks together
  std::uint64_t blobs_written = 0;          // new blob entries (all ranks)
  std::uint64_t blobs_deduplicated = 0;     // parameters written as references
  bool appended = false;                    // the archive existed and grew in place
};

class MODELZIP_API CollectiveWriter {
 public:
  // `comm` must outlive the writer. Nothing is opened until commit().
  CollectiveWriter(std::filesystem::path path, Communicator& comm, CollectiveOptions options = {});
  ~CollectiveWriter();
  CollectiveWriter(CollectiveWriter&&) noexcept;
  CollectiveWriter& operator=(CollectiveWriter&&) noexcept;

  // A whole parameter owned by this rank, or text: a dense utf8 tensor
  // (Tensor::strings), which any number of ranks may stage under one name,
  // each with the same shape and strings (written once, by one rank that
  // staged it, of any size: its size and CRC-32 go to the root, and the
  // writing rank sends its bytes to the others, which compare them, when
  // several staged it). Text that differs between ranks, or text on one
  // rank and a tensor or share of the same name on another, fails the
  // commit on every rank with Error(invalid_argument) naming the name and
  // the ranks. Throws Error(invalid_argument) on an empty or duplicate (on
  // this rank) name, Error(unsupported) for a tensor that is not dense with
  // a fixed-size dtype or utf8.
  void add(std::string name, Tensor tensor);
  // This rank's block `block` of a sharded parameter whose whole shape is
  // `global_shape`; `data` holds the block's elements (its shape must be
  // block.shape). Checked here (rank, bounds, shapes): Error(invalid_argument);
  // text is staged whole (add()): Error(unsupported).
  void add_shard(std::string name, Tensor data, Shape global_shape, Block block);
  // The parameter `name` is `from_param` of the existing tag `from_tag`.
  void share(std::string name, std::string from_tag, std::string from_param);

  // Updater state `state` (e.g. "exp_avg") of parameter `variable`, whole
  // on this rank, or this rank's block of it (checked like add_shard: a state
  // sharded like its parameter has the parameter's global shape and this
  // rank's block of the parameter). Listed in <tag>/updater.txt, stored under
  // <tag>/updater/; dedup compares with the namesake state of the newest
  // tag. Text as for add(). Same errors as add()/add_shard() (empty names
  // included).
  void add_updater_state(std::string variable, std::string state, Tensor tensor);
  void add_updater_shard(std::string variable, std::string state, Tensor data, Shape global_shape,
                         Block block);

  // A tag-level entry `relative_name` (e.g. kTrainingConfigEntryName with
  // training::encode_training_config, checkpoint.hpp), staged by one rank:
  // its bytes travel to the root with the records and the root writes it,
  // stored, after params.txt and updater.txt. Name rules as
  // NewTag::set_entry (Error(invalid_argument) here); the root validates
  // graph.fb and trainingConfig.fb before anything is written, and with
  // graph.fb the whole tag against it (schemas/GRAPH.md section 4, as
  // Writer::commit); an entry staged on two ranks fails the commit. Any
  // size: the records go to the root in rounds of at most 64 MiB per rank.
  void set_entry(std::string relative_name, Bytes contents);
  // A braced list of strings where a name goes (`add({"a", "b"}, t)`, which
  // would make the name std::string("a", "b"): undefined behaviour) does not
  // compile (error.hpp, detail::braced_list_is_a_tag); nor where the tag of
  // commit() goes, below.
  template <std::size_t N>
  requires(N >= 2) void add(const char* const (&)[N], Tensor) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "add({\"a\", \"b\"}, tensor): a name is one string, as in add(\"w\", tensor); "
                  "each parameter is one add()");
  }
  template <std::size_t N>
  requires(N >= 2) void add_updater_state(const char* const (&)[N], std::string, Tensor) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "add_updater_state({\"a\", \"b\"}, state, tensor): a variable is one string, "
                  "as in add_updater_state(\"w\", \"exp_avg\", tensor)");
  }
  template <std::size_t N>
  requires(N >= 2) void add_updater_state(std::string, const char* const (&)[N], Tensor) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "add_updater_state(variable, {\"a\", \"b\"}, tensor): a state is one string, "
                  "as in add_updater_state(\"w\", \"exp_avg\", tensor); each state is one call");
  }
  template <std::size_t N>
  requires(N >= 2) void set_entry(const char* const (&)[N], Bytes) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "set_entry({\"a\", \"b\"}, contents): an entry name is one string, as in "
                  "set_entry(kTrainingConfigEntryName, contents)");
  }

  // Collective: every rank of the communicator calls it with the same tag,
  // staging whatever it owns (possibly nothing). Throws the same Error on
  // every rank if anything fails anywhere; the staged parameters are kept
  // then (commit may be retried) and dropped after success.
  CollectiveStats commit(const std::string& tag);
  // The same, removing tags in the same commit (CollectiveCommitOptions).
  CollectiveStats commit(const std::string& tag, const CollectiveCommitOptions& options);
  // A braced list of strings where the tag goes (`commit({"a", "b"})`, which
  // would make the tag std::string("a", "b"): undefined behaviour) does not
  // compile (error.hpp, detail::braced_list_is_a_tag).
  template <std::size_t N>
  requires(N >= 2) CollectiveStats commit(const char* const (&)[N]) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "commit({\"a\", \"b\"}): a tag is one string, as in commit(\"step-1\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) CollectiveStats
      commit(const char* const (&)[N], const CollectiveCommitOptions&) {
    static_assert(
        detail::braced_list_is_a_tag<N>,
        "commit({\"a\", \"b\"}, options): a tag is one string, as in commit(\"step-1\", options)");
    return {};
  }

  class Impl;

 private:
  friend class BackgroundCollectiveSave;  // takes the staged contents (dist/background_save.hpp)
  std::unique_ptr<Impl> impl_;
};

// Bytes of the archive file a block read touched (for accounting).
struct MODELZIP_API BlockReadStats {
  std::uint64_t bytes_read = 0;
  bool zero_copy = false;
};

// The block `block` of tensor parameter `name` of `tag` (empty: newest), as
// a dense tensor of shape block.shape. No collective is needed: any number
// of ranks read any blocks. A block that is contiguous in the row-major
// data of a stored blob is a zero-copy view; otherwise the overlapping runs
// are copied (reading only those bytes of the mapping). Of a remote
// archive, only the blob header and the block's runs are fetched (nearby
// runs coalesced, io/byte_source.hpp). Deflated blobs are decompressed (and
// fetched) whole. Throws Error(invalid_argument) for a block outside
// the tensor, Error(unsupported) for sparse or utf8 tensors.
MODELZIP_API Tensor read_block(const Archive& archive, std::string_view name, const Block& block,
                               std::string_view tag = {}, BlockReadStats* stats = nullptr);

// The same for updater state `state` of `variable` (updater.txt): how a
// rank loads its block of optimizer state saved by any number of ranks.
MODELZIP_API Tensor read_updater_block(const Archive& archive, std::string_view variable,
                                       std::string_view state, const Block& block,
                                       std::string_view tag = {}, BlockReadStats* stats = nullptr);

// A braced list of strings where a name or the tag goes (`read_block(a,
// {"a", "b"}, block)`, which would make the name string_view("a", "b"):
// undefined behaviour) does not compile (error.hpp,
// detail::braced_list_is_a_tag).
template <std::size_t N>
requires(N >= 2) Tensor read_block(const Archive&, const char* const (&)[N], const Block&,
                                   std::string_view = {}, BlockReadStats* = nullptr) {
  static_assert(detail::braced_list_is_a_tag<N>,
                "read_block(archive, {\"a\", \"b\"}, block): a name is one string, as in "
                "read_block(archive, \"w\", block)");
  return {};
}
template <std::size_t N>
requires(N >= 2) Tensor read_block(const Archive&, std::string_view, const Block&,
                                   const char* const (&)[N], BlockReadStats* = nullptr) {
  static_assert(detail::braced_list_is_a_tag<N>,
                "read_block(archive, name, block, {\"a\", \"b\"}): a tag is one string, as in "
                "read_block(archive, name, block, \"step-1\")");
  return {};
}
template <std::size_t N>
requires(N >= 2) Tensor
    read_updater_block(const Archive&, const char* const (&)[N], std::string_view, const Block&,
                       std::string_view = {}, BlockReadStats* = nullptr) {
  static_assert(detail::braced_list_is_a_tag<N>,
                "read_updater_block(archive, {\"a\", \"b\"}, state, block): a variable is one "
                "string, as in read_updater_block(archive, \"w\", \"exp_avg\", block)");
  return {};
}
template <std::size_t N>
requires(N >= 2) Tensor
    read_updater_block(const Archive&, std::string_view, const char* const (&)[N], const Block&,
                       std::string_view = {}, BlockReadStats* = nullptr) {
  static_assert(detail::braced_list_is_a_tag<N>,
                "read_updater_block(archive, variable, {\"a\", \"b\"}, block): a state is one "
                "string, as in read_updater_block(archive, \"w\", \"exp_avg\", block)");
  return {};
}
template <std::size_t N>
requires(N >= 2) Tensor
    read_updater_block(const Archive&, std::string_view, std::string_view, const Block&,
                       const char* const (&)[N], BlockReadStats* = nullptr) {
  static_assert(detail::braced_list_is_a_tag<N>,
                "read_updater_block(archive, variable, state, block, {\"a\", \"b\"}): a tag is "
                "one string, as in read_updater_block(archive, variable, state, block, "
                "\"step-1\")");
  return {};
}

}  // namespace modelzip
