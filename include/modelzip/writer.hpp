// Writer: creates an archive, adds tags to it, removes tags, and commits the
// result atomically and durably.
//
// Nothing touches the archive file until commit(). commit() writes a complete
// new archive to a temporary file in the same folder, fsyncs it, renames it
// over the target and fsyncs the folder: the path holds either the old archive
// or the new one, never a mix. If commit() throws (or the process dies), the
// previous archive is untouched; leftover temporary files of dead writers are
// removed by the next Writer::open on the same archive.
//
// Memory: tensors given to a NewTag are not copied. Their Bytes must stay
// valid until commit() returns (Bytes::borrow with a null keeper is the
// caller's promise that they do).
//
// Sharing: NewTag::share() declares that a parameter is another tag's
// parameter; it is written as a reference. With dedup on (default), a tensor
// whose encoded blob equals a blob already in the archive (or earlier in the
// same commit) is written as a reference too. The parameter of the same name
// in the previous tag is tried first (the usual case when a checkpoint
// repeats unchanged tensors: one comparison pass, no hashing); otherwise
// candidates are found by size and CRC-32. A match is always confirmed byte
// for byte. Dedup thus reads every byte of the new tensors once;
// NewTag::share() avoids even that.
//
// Removing a tag whose blobs other tags still reference keeps those blobs:
// each one moves into the folder of the oldest remaining tag that references
// it, and every referencing params.txt is rewritten to point there.
//
// Removing in place (WriterOptions::append): a commit that only adds and
// removes tags leaves the removed entries' bytes where they are, no longer
// listed in the central directory, and marks each run of them as one free
// entry that streaming zip readers skip (FORMAT.md "Removing in place"); it
// writes only the new tags, the blobs that move (copied), the tables that
// change, and a new tail. Readers that opened the archive before keep
// reading the removed tag's bytes (but the first 85 bytes at most of each
// run, where the free entry's header goes), which stay until a rewrite
// (gc, or a commit that would leave more freed than live bytes) drops them.
//
// Thread safety: a Writer is not thread-safe; use one per thread. Two
// processes (or two Writers in different threads) committing to one archive
// at once are serialized by an exclusive lock of the archive file itself
// (of its folder when there is no archive yet; no lock file is created), so
// neither loses the other's tag. A symbolic link given as the path is
// followed once at open(): the file it leads to is locked, replaced and
// appended to, and the link stays a link. A rewrite keeps the archive's
// permission bits, owner and group (Error(io), archive unchanged, if it
// cannot); an archive this process may not open for writing is refused by
// commit() with Error(io). NewTag, WriterOptions and the
// other option structs are plain values, not thread-safe to modify while
// shared. Readers (Archive::open) never wait for a writer and always see
// the old or the new archive, also while an append is in progress.
//
// A failed commit() throws Error(io) (or the error that stopped it) naming
// the archive and what failed, and removes its temporary file; the Writer
// stays usable. If the failure came before the new archive became visible,
// the archive is unchanged and the changes stay staged, so commit() can be
// called again. If only a final durability step failed (fsync of the folder
// after the rename, of the appended file, or removing the append journal),
// the new archive is visible, the staged changes are consumed, and the
// error says the change may not survive a power loss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/export.hpp"
#include "modelzip/metadata.hpp"
#include "modelzip/progress.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip {

enum class Compression : std::uint8_t {
  store,    // uncompressed, data 64-byte aligned: zero-copy reads
  deflate,  // smaller; decompressed on read
};

struct MODELZIP_API ParamOptions {
  Compression compression = Compression::store;
};

// The contents of one new tag. Parameters keep their insertion order.
class MODELZIP_API NewTag {
 public:
  NewTag();
  ~NewTag();
  NewTag(const NewTag& other);
  NewTag& operator=(const NewTag& other);
  NewTag(NewTag&& other) noexcept;  // leaves `other` empty
  NewTag& operator=(NewTag&& other) noexcept;

  // A tensor parameter. Throws Error(invalid_argument) on an empty or
  // duplicate name.
  void add(std::string name, Tensor tensor, ParamOptions options = {});
  // A finalfusion embedding parameter: `fifu_file` is a complete finalfusion
  // file (validated at commit). Always stored uncompressed and aligned.
  void add_embedding(std::string name, Bytes fifu_file);
  // The parameter `name` is `from_param` of the existing tag `from_tag`.
  void share(std::string name, std::string from_tag, std::string from_param);
  // Optimizer state array `state` (e.g. Adam's "M" and "V") of trainable
  // variable `variable`, listed in <tag>/updater.txt and stored under
  // <tag>/updater/. Escaping, sharing and dedup work as for parameters.
  void add_updater_state(std::string variable, std::string state, Tensor tensor,
                         ParamOptions options = {});
  // The state is the same as `from_tag`'s state of the same variable/state.
  void share_updater_state(std::string variable, std::string state, std::string from_tag);
  // A braced list of strings where the tag goes (`share("w", {"a", "b"},
  // "w")`, which would make the tag std::string("a", "b"): undefined
  // behaviour) does not compile (error.hpp, detail::braced_list_is_a_tag).
  template <std::size_t N>
  requires(N >= 2) void share(std::string, const char* const (&)[N], std::string) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "share(name, {\"a\", \"b\"}, from_param): a tag is one string, as in "
                  "share(name, \"step-1\", from_param)");
  }
  template <std::size_t N>
  requires(N >= 2) void share_updater_state(std::string, std::string, const char* const (&)[N]) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "share_updater_state(variable, state, {\"a\", \"b\"}): a tag is one string, "
                  "as in share_updater_state(variable, state, \"step-1\")");
  }
  // An additional tag-level entry, relative to the tag folder, e.g.
  // "graph.fb" or "trainingConfig.fb" (used by the checkpoint layer). Must not
  // be params.txt, updater.txt, or lie under params/ or updater/. A tag with
  // graph.fb must be a consistent graph checkpoint (schemas/GRAPH.md section
  // 4): commit refuses it otherwise (Error(invalid_argument)).
  void set_entry(std::string relative_name, Bytes contents,
                 Compression compression = Compression::store);
  // A braced list of strings where a name goes (`add({"a", "b"}, t)`) does
  // not compile either.
  template <std::size_t N>
  requires(N >= 2) void add(const char* const (&)[N], Tensor, ParamOptions = {}) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "add({\"a\", \"b\"}, tensor): a name is one string, as in add(\"w\", tensor); "
                  "each parameter is one add()");
  }
  template <std::size_t N>
  requires(N >= 2) void add_embedding(const char* const (&)[N], Bytes) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "add_embedding({\"a\", \"b\"}, fifu_file): a name is one string, as in "
                  "add_embedding(\"vectors\", fifu_file)");
  }
  template <std::size_t N>
  requires(N >= 2) void add_updater_state(const char* const (&)[N], std::string, Tensor,
                                          ParamOptions = {}) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "add_updater_state({\"a\", \"b\"}, state, tensor): a variable is one string, "
                  "as in add_updater_state(\"w\", \"M\", tensor)");
  }
  template <std::size_t N>
  requires(N >= 2) void add_updater_state(std::string, const char* const (&)[N], Tensor,
                                          ParamOptions = {}) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "add_updater_state(variable, {\"a\", \"b\"}, tensor): a state is one string, "
                  "as in add_updater_state(\"w\", \"M\", tensor); each state is one call");
  }
  template <std::size_t N>
  requires(N >= 2) void set_entry(const char* const (&)[N], Bytes,
                                  Compression = Compression::store) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "set_entry({\"a\", \"b\"}, contents): an entry name is one string, as in "
                  "set_entry(\"graph.fb\", contents)");
  }

  // What was added, in order (opaque: defined and used only inside modelzip).
  struct Contents;

 private:
  Contents& mutable_contents();         // allocates contents_ when null
  std::unique_ptr<Contents> contents_;  // null when nothing was added (or moved from)
};

struct MODELZIP_API WriterOptions {
  bool dedup = true;
  bool durable = true;  // fsync file and folder before commit returns
  // A commit that only adds and removes tags (add_tag, replace_tag,
  // remove_tag, keep_last) changes the archive in place (time and I/O
  // proportional to what changes): it overwrites the archive's tail
  // (tags.txt, central directory, end records) with the new entries and a
  // new tail, and leaves the removed entries as free entries; see FORMAT.md
  // "Appending" and "Removing in place". Such a commit that would leave more
  // freed bytes than live ones rewrites instead, so the file stays within
  // about twice its live data. Other commits, and archives not in that
  // layout (e.g. written by modelzip 0.1.0), are rewritten.
  bool append = true;
  // Also asked, with 0 of 0 bytes, when a signal interrupts the commit's
  // wait for another writer's lock (see on_wait): false cancels the wait.
  ProgressCallback progress{};
  // Called once by a commit that has to wait because another writer (any
  // process or thread) holds the archive's write lock, just before it
  // starts waiting; never when the lock is free. From the committing
  // thread; must not throw. (The CLI says "waiting for the writer of ...".)
  std::function<void()> on_wait{};
  // Called with a one-line notice when a commit recovered from an earlier writer that was killed
  // mid-append ("rolled back an interrupted save of tag X"), and when an s3:// commit is planned
  // again as another writer's came first ("... (new plan N of 3)": its progress restarts at 0).
  // From the committing thread (under the lock); must not throw. (CLI: stderr; Python: a warning.)
  std::function<void(const std::string&)> on_notice{};
};

class MODELZIP_API Writer {
 public:
  // Opens `path` for modification; a missing file starts an empty archive
  // (created at commit). Throws if `path` exists and is not a valid archive.
  // The archive parsed here stays mapped until the next commit(), which
  // reuses it if the file has not changed since (else it parses the file
  // again, so changes other writers committed in between are kept).
  static Writer open(const std::filesystem::path& path, WriterOptions options = {});
  ~Writer();
  // A Writer moved from holds no archive: every member function then throws
  // Error(invalid_argument) (last_stats() gives empty Stats); assigning a
  // Writer to it makes it usable again.
  Writer(Writer&&) noexcept;
  Writer& operator=(Writer&&) noexcept;

  // Stages a new tag (validated here: name rules, unique without regard to
  // case; Error(already_exists) says whether the archive holds the name or
  // an earlier add_tag/replace_tag of this Writer staged it). It becomes
  // the newest tag. Its shares (NewTag::share, share_updater_state) are
  // resolved by commit(), against the archive as it is then: one that names
  // no tag or parameter throws Error(not_found) from commit(), and the
  // change stays staged like every change of a commit that failed, so later
  // commits fail alike; a new Writer::open drops it.
  void add_tag(std::string tag, NewTag contents);
  // Stages a new tag that replaces the tag of the same name (matched
  // without regard to case) if there is one at commit: in one commit the
  // old tag is removed (as remove_tag) and the new one added as the newest
  // tag, with the new spelling. Readers see the old tag or the new one.
  // Contents cannot share from the tag they replace (it is removed first);
  // dedup compares with the remaining tags.
  void replace_tag(std::string tag, NewTag contents);
  // Stages removal of a tag (matched without regard to case).
  void remove_tag(std::string_view tag);
  // A braced list of strings where the tag goes (`add_tag({"a", "b"}, c)`,
  // which would make the tag std::string("a", "b"): undefined behaviour)
  // does not compile (error.hpp, detail::braced_list_is_a_tag).
  template <std::size_t N>
  requires(N >= 2) void add_tag(const char* const (&)[N], NewTag) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "add_tag({\"a\", \"b\"}, contents): a tag is one string, as in "
                  "add_tag(\"step-1\", contents)");
  }
  template <std::size_t N>
  requires(N >= 2) void replace_tag(const char* const (&)[N], NewTag) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "replace_tag({\"a\", \"b\"}, contents): a tag is one string, as in "
                  "replace_tag(\"step-1\", contents)");
  }
  template <std::size_t N>
  requires(N >= 2) void remove_tag(const char* const (&)[N]) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "remove_tag({\"a\", \"b\"}): a tag is one string; remove_tag(\"a\") and "
                  "remove_tag(\"b\") remove two");
  }
  // Stages keeping only the newest `n` tags: at commit, after the changes
  // staged before it, the oldest tags beyond `n` are removed (as
  // remove_tag), also those another writer added meanwhile.
  // Error(invalid_argument) when n is 0.
  void keep_last(std::size_t n);
  // Stages an edit of the metadata, the one way to change it: at commit,
  // `edit` is called (once, under the lock) with the metadata the archive
  // has then, after any earlier staged metadata change, so it can change
  // some fields and keep the rest even when another writer committed in
  // between. A whole replacement is an edit that assigns
  // (`[m](Metadata& current) { current = m; }`). `edit` must not throw.
  // The writer field is always set to this modelzip afterwards. Values must
  // be UTF-8 text: commit() throws Error(invalid_argument) naming the key
  // before anything is written otherwise.
  void update_metadata(std::function<void(Metadata&)> edit);
  // Stages garbage collection: blob entries that no params.txt or
  // updater.txt references are dropped at commit.
  void collect_garbage();

  // Drops every staged change: tags added or replaced, removals, keep_last,
  // metadata edits and garbage collection, also those a failed commit()
  // kept staged, and with them the staged tensors (their Bytes are
  // released). The archive is not touched. The Writer stays usable: tags()
  // gives the tags as of open() or the last commit() again, and new changes
  // can be staged. This is how to drop a change that can never be committed
  // (a share of a missing tag or parameter) without opening a new Writer.
  void discard();

  // Tags as they will be after commit, oldest first.
  std::vector<std::string> tags() const;

  // Writes everything staged. Afterwards the Writer can stage more changes.
  // With nothing staged it leaves an existing archive byte for byte as it is
  // (it still recovers an interrupted append) and creates an archive without
  // tags where there is none.
  void commit();

  // Statistics of the last commit.
  struct Stats {
    std::uint64_t bytes_written = 0;       // bytes written (the new archive, or the appended part)
    std::uint64_t blobs_written = 0;       // new blob entries
    std::uint64_t blobs_deduplicated = 0;  // parameters written as references by dedup
    std::uint64_t blobs_collected = 0;     // unreferenced blobs dropped by collect_garbage
    std::uint64_t bytes_collected = 0;     // their uncompressed size
    bool appended = false;                 // written in place (the append path)
    // Bytes of removed entries left in the file as free entries by an
    // in-place commit (a rewrite drops them).
    std::uint64_t bytes_freed = 0;
  };
  // On an rvalue Writer (a temporary): a copy, which outlives it.
  const Stats& last_stats() const& noexcept;
  Stats last_stats() const&& noexcept;

  class Impl;

 private:
  explicit Writer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace modelzip
