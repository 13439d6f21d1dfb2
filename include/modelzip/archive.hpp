// Archive: read access to a modelzip archive (a zip of tagged checkpoints).
//
// Opening maps the file read-only, parses and validates the zip central
// directory, the archive metadata, tags.txt and every tag's params.txt.
// A tag whose params.txt or updater.txt is damaged does not fail the open:
// it is listed, reported by tag_damage() and verify(), can be removed, and
// every read of it throws the error found; the other tags stay usable.
// Tensor data is not touched until asked for. Tensors of stored
// (uncompressed) blobs are zero-copy views into the mapping: each view keeps
// the mapping alive, so they stay valid after the Archive is destroyed.
// Deflated blobs are decompressed (and CRC-checked) on read.
//
// CRC-32 policy: zero-copy views are not CRC-checked (that would read every
// byte up front); Tensor reads with `ReadMode::copy` and verify() check every
// CRC. Everything else (FlatBuffers, sizes, offsets, references) is validated
// before any use, whatever the mode.
//
// Thread safety: an Archive is immutable after open. All const member
// functions may be called concurrently from several threads. Copies share
// the same underlying state.
//
// Errors: every failure throws modelzip::Error with the archive, entry, tag
// and line/offset filled in as far as they apply.
//
// Other writers: an Archive describes the archive as it was at open (tags,
// tables), whatever other writers commit afterwards (docs/crash-safety.md);
// changed_since_open() tells whether it still is the archive, reopen() opens
// it as it is now. When a read or verify() finds bytes of an entry that do
// not match, and another writer's commit since the open may have
// overwritten them (it removed or rewrote that entry), it reports that
// (Error(io) "the archive was changed by another writer since this reader
// opened it": reopen), not damage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/export.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/metadata.hpp"
#include "modelzip/progress.hpp"
#include "modelzip/remote.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip {

enum class BlobKind : std::uint8_t { tensor, embedding };

// Tensors by parameter name, in the order of the tag's params.txt (the
// order Python's Archive.load() gives too). Iteration yields
// std::pair<const std::string, Tensor> as a std::map does; at(), find(),
// contains() and count() look a name up in O(log n). at() throws
// Error(not_found) for a missing name, naming it, the names held and, for
// tensors Archive::load read, the archive and tag (contains() or find() ask
// without an exception); at() of an rvalue (a temporary, as in
// `archive.load().at("w").shape()`) returns the Tensor itself, which
// outlives it. Thread safety: a plain value type.
class NamedTensors {
 public:
  using value_type = std::pair<const std::string, Tensor>;
  using iterator = std::vector<value_type>::iterator;
  using const_iterator = std::vector<value_type>::const_iterator;

  // Appends `tensor` under `name`; a name already present is replaced in
  // place (it keeps its position).
  void insert_or_assign(std::string name, Tensor tensor) {
    if (auto it = index_.find(name); it != index_.end()) {
      items_[it->second].second = std::move(tensor);
      return;
    }
    index_.emplace(name, items_.size());
    items_.emplace_back(std::move(name), std::move(tensor));
  }

  iterator begin() noexcept { return items_.begin(); }
  iterator end() noexcept { return items_.end(); }
  const_iterator begin() const noexcept { return items_.begin(); }
  const_iterator end() const noexcept { return items_.end(); }
  std::size_t size() const noexcept { return items_.size(); }
  bool empty() const noexcept { return items_.empty(); }

  iterator find(std::string_view name) { return begin() + position(name); }
  const_iterator find(std::string_view name) const { return begin() + position(name); }
  bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }
  std::size_t count(std::string_view name) const { return contains(name) ? 1 : 0; }
  Tensor& at(std::string_view name) & { return items_[checked(name)].second; }
  const Tensor& at(std::string_view name) const& { return items_[checked(name)].second; }
  Tensor at(std::string_view name) && { return std::move(items_[checked(name)].second); }
  Tensor at(std::string_view name) const&& { return items_[checked(name)].second; }

  // A braced list of strings where the name goes (`at({"a", "b"})`, which
  // would make the name string_view("a", "b"): undefined behaviour) does
  // not compile (error.hpp, detail::braced_list_is_a_tag). One overload per
  // form above, so that none of them is as good a match.
  template <std::size_t N>
  requires(N >= 2) const_iterator find(const char* const (&)[N]) {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "find({\"a\", \"b\"}): a name is one string, as in find(\"w\")");
    return end();
  }
  template <std::size_t N>
  requires(N >= 2) const_iterator find(const char* const (&)[N])
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "find({\"a\", \"b\"}): a name is one string, as in find(\"w\")");
    return end();
  }
  template <std::size_t N>
  requires(N >= 2) bool contains(const char* const (&)[N]) const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "contains({\"a\", \"b\"}): a name is one string, as in contains(\"w\")");
    return false;
  }
  template <std::size_t N>
  requires(N >= 2) std::size_t count(const char* const (&)[N])
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "count({\"a\", \"b\"}): a name is one string, as in count(\"w\")");
    return 0;
  }
  template <std::size_t N>
  requires(N >= 2) Tensor at(const char* const (&)[N])
  &{
    static_assert(detail::braced_list_is_a_tag<N>,
                  "at({\"a\", \"b\"}): a name is one string, as in at(\"w\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Tensor at(const char* const (&)[N])
  const& {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "at({\"a\", \"b\"}): a name is one string, as in at(\"w\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Tensor at(const char* const (&)[N]) && {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "at({\"a\", \"b\"}): a name is one string, as in at(\"w\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Tensor at(const char* const (&)[N])
  const&& {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "at({\"a\", \"b\"}): a name is one string, as in at(\"w\")");
    return {};
  }

 private:
  friend class Archive;  // sets context_
  // The index of `name` in items_, or size() if absent.
  std::ptrdiff_t position(std::string_view name) const {
    auto it = index_.find(name);
    return static_cast<std::ptrdiff_t>(it == index_.end() ? items_.size() : it->second);
  }
  std::size_t checked(std::string_view name) const {
    auto it = index_.find(name);
    if (it == index_.end()) throw_missing(name);
    return it->second;
  }
  // Throws Error(not_found) for `name`, with the names held and context_.
  [[noreturn]] MODELZIP_API void throw_missing(std::string_view name) const;

  std::vector<value_type> items_;
  std::map<std::string, std::size_t, std::less<>> index_;
  ErrorContext context_{};  // where the tensors were read from (archive, tag)
};

// What params.txt says about one parameter, plus the blob header (dtype and
// shape) -- all without reading tensor data.
struct MODELZIP_API ParamInfo {
  std::string name{};   // parameter name; for updater state: the variable
  std::string state{};  // updater state name ("M", "V"...); empty for parameters
  BlobKind kind = BlobKind::tensor;
  DType dtype = DType::float32;  // embeddings: float32 (rows x dims)
  // Embeddings: {rows, dims} of the .fifu file's storage (what `modelzip ls`
  // shows), read from its header and chunk frames (the entry is read, or
  // decompressed, up to the storage chunk's fixed fields); empty when they
  // cannot be read there (Archive::embedding_file and finalfusion reading
  // name the problem).
  Shape shape{};
  Layout layout = Layout::dense;
  // Layout::quantized: scheme, storage and the header's parameters (the
  // `scales` and `zero_points` arrays are left empty: no data is read).
  // `dtype` is then the original floating-point type.
  std::optional<Quantization> quantization{};
  std::uint64_t nbytes =
      0;  // uncompressed bytes of tensor data (quantized: integers, scales and zero points)
  std::string blob{};       // entry path of the blob in the zip
  std::string owner_tag{};  // tag whose folder holds the blob
  bool shared = false;      // the blob belongs to another tag
  bool compressed = false;  // the blob entry is deflated
};

enum class ReadMode {
  zero_copy,  // views into the mapping where possible (stored blobs)
  copy,       // owned memory, CRC-checked
  // Memory the caller may write, without a copy where possible: views of a
  // private copy-on-write mapping of the archive file made for this read
  // (stored blobs of a local archive, apart from the part an append may
  // overwrite). Writes through it (the Tensor's Bytes are const in the
  // type; the memory is not) stay in this process and reach neither the
  // file, nor other reads, nor another parameter, also not one that
  // deduplication stored in the same blob. Other blobs are read into owned
  // memory, CRC-checked. Data is not CRC-checked otherwise
  // (LoadOptions::verify_crc can); nothing is read before the memory is
  // touched.
  private_view,
};

// What Archive::load reads, and how.
struct MODELZIP_API LoadOptions {
  // Only these tensor parameters, in this order (a name given twice is
  // loaded once, at its first position): Error(not_found) for a name the
  // tag lacks, Error(invalid_argument) for an embedding parameter. nullopt:
  // every tensor parameter, in params.txt order (embeddings are skipped).
  std::optional<std::vector<std::string>> names{};
  ReadMode mode = ReadMode::zero_copy;
  // Check every blob's CRC-32 before any tensor is returned, also for views
  // (ReadMode::copy always does).
  bool verify_crc = false;
  // Hears of the blob bytes read; returning false throws Error(cancelled).
  // (ReadMode::private_view reads nothing up front: no progress is
  // reported.)
  ProgressCallback progress{};
};

struct MODELZIP_API OpenOptions {
  Limits limits{};         // work and size limits for untrusted input
  RemoteOptions remote{};  // for URLs (modelzip/remote.hpp)
};

// One problem found by Archive::verify.
struct MODELZIP_API Problem {
  std::string entry{};  // the entry concerned ("" for the archive as a whole)
  std::string message{};
};

// How many problems Archive::verify found, given what it returned: one for
// each problem listed, and N for each "... and N more problems in this
// entry" (the problems it found but did not list).
MODELZIP_API std::uint64_t problems_found(std::span<const Problem> problems);

class MODELZIP_API Archive {
 public:
  // `path` is a local file or a URL: http://, https:// or s3://bucket/key
  // (is_remote_url). A remote archive is read by ranges: open fetches the
  // zip tail, central directory and tables; tensor data is fetched when
  // read, and views point into a local cache file (modelzip/remote.hpp).
  // A remote object that changes while it is read gives Error(io,
  // "archive changed on the server while reading").
  static Archive open(const std::filesystem::path& path, const OpenOptions& options = {});
  // Whether open() treats `path` as a URL (a local file named like one can be
  // opened as ./http:/...).
  static bool is_remote_url(std::string_view path) noexcept;
  // Reads an archive held in memory; `name` is used in error messages.
  static Archive from_memory(Bytes bytes, std::string name = "<memory>",
                             const OpenOptions& options = {});

  // Copies share the opened archive. Moving copies too, so an Archive moved
  // from stays usable (its accessors are noexcept and have no "moved from"
  // to report).
  Archive(const Archive&) = default;
  Archive& operator=(const Archive&) = default;
  Archive(Archive&& other) noexcept : impl_(other.impl_) {}
  Archive& operator=(Archive&& other) noexcept {
    impl_ = other.impl_;
    return *this;
  }
  ~Archive() = default;

  // Whether the archive is no longer what this Archive describes: a local file another
  // writer committed to since the open, that a rewrite replaced, that was removed, or whose
  // committed state differs otherwise; a remote object replaced or removed since the open.
  // Then reopen() gives the archive as it is now; this Archive keeps describing it as it was.
  // Local: a few system calls (FORMAT.md 8.3: its append journal, the file's identity) and,
  // only when they moved, a read of the committed tail (tags.txt, central directory, end
  // records) compared with this Archive's: an append in flight or rolled back, or a `touch`,
  // is no change. Remote: one HEAD (size, and ETag or else Last-Modified, against the pin;
  // 404: changed). False for an archive held in memory. Throws Error(io) naming the archive
  // when the file or its journal cannot be looked at, or the server cannot be asked
  // (network failure, an answer other than 200 or 404).
  bool changed_since_open() const;
  // The archive as it is now: open() of name() with this open's options (an
  // archive held in memory: this Archive). Throws as open() does (a file
  // removed since: Error(io)). This Archive is left as it is.
  Archive reopen() const;

  // The accessors that return a reference into the archive's state have a
  // second form for an Archive that is an rvalue (a temporary, as in
  // `for (auto& t : Archive::open(p).tags())`): it returns a copy, because
  // the state may die with the temporary before the reference is used.
  const std::string& name() const& noexcept;  // the path or name given at open
  std::string name() const&&;
  const Metadata& metadata() const& noexcept;
  Metadata metadata() const&&;

  // Tags, oldest first.
  const std::vector<std::string>& tags() const& noexcept;
  std::vector<std::string> tags() const&&;
  // The newest tag. Throws Error(not_found) if the archive has no tags.
  const std::string& newest_tag() const&;
  std::string newest_tag() const&&;
  // The stored spelling of `tag`, compared without regard to ASCII case;
  // nullopt if absent.
  std::optional<std::string> find_tag(std::string_view tag) const;

  // A braced list of strings where the tag goes (`load({"a", "b"})`, which
  // would make the tag string_view("a", "b"): undefined behaviour) does not
  // compile: these overloads fail with a message that names the right call
  // (error.hpp, detail::braced_list_is_a_tag).
  template <std::size_t N>
  requires(N >= 2) std::optional<std::string> find_tag(const char* const (&)[N])
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "find_tag({\"a\", \"b\"}): a tag is one string, as in find_tag(\"step-1\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) std::optional<Error> tag_damage(const char* const (&)[N])
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "tag_damage({\"a\", \"b\"}): a tag is one string, as in tag_damage(\"step-1\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) std::vector<ParamInfo> params(const char* const (&)[N])
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "params({\"a\", \"b\"}): a tag is one string, as in params(\"step-1\"); one "
                  "parameter: param(name, tag)");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) std::vector<ParamInfo> updater_states(const char* const (&)[N])
  const {
    static_assert(
        detail::braced_list_is_a_tag<N>,
        "updater_states({\"a\", \"b\"}): a tag is one string, as in updater_states(\"step-1\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) NamedTensors load(const char* const (&)[N], const LoadOptions& = {})
  const {
    static_assert(
        detail::braced_list_is_a_tag<N>,
        "load({\"a\", \"b\"}): a tag is one string, as in load(\"step-1\"); to load the "
        "parameters a and b: load(tag, {.names = std::vector<std::string>{\"a\", \"b\"}})");
    return {};
  }

  // The error found in `tag`'s params.txt or updater.txt at open (with the
  // entry and line), or nullopt when its tables are intact. Throws
  // Error(not_found) for a tag that does not exist.
  std::optional<Error> tag_damage(std::string_view tag = {}) const;

  // The parameters of `tag` (empty: the newest), in params.txt order.
  std::vector<ParamInfo> params(std::string_view tag = {}) const;
  ParamInfo param(std::string_view name, std::string_view tag = {}) const;

  // One parameter of `tag` (empty: newest). Embedding parameters are not
  // tensors: use embedding_file().
  Tensor tensor(std::string_view name, std::string_view tag = {},
                ReadMode mode = ReadMode::zero_copy) const;
  // Tensor parameters of `tag` (empty: newest) by name: every one, or those
  // options.names lists (LoadOptions).
  NamedTensors load(std::string_view tag = {}, const LoadOptions& options = {}) const;
#ifndef MODELZIP_NO_DEPRECATED
  // The spellings of 0.1, removed in 0.3 (docs/cpp.md, "Changes in 0.2").
  [[deprecated("use load(tag, LoadOptions{.mode = mode, .progress = progress})")]] NamedTensors
  load(std::string_view tag, ReadMode mode, const ProgressCallback& progress = {}) const {
    LoadOptions options;
    options.mode = mode;
    options.progress = progress;
    return load(tag, options);
  }
  [[deprecated(
      "use load(tag, LoadOptions{.names = names, .mode = mode, .verify_crc = "
      "check_crc})")]] NamedTensors
  load_params(std::span<const std::string> names, std::string_view tag = {},
              ReadMode mode = ReadMode::zero_copy, bool check_crc = false) const {
    LoadOptions options;
    options.names.emplace(names.begin(), names.end());
    options.mode = mode;
    options.verify_crc = check_crc;
    return load(tag, options);
  }
#endif

  // Optimizer state arrays of `tag` (from updater.txt), in file order; each
  // ParamInfo has `name` = variable and `state` = state name. Empty when the
  // tag has no updater.txt.
  std::vector<ParamInfo> updater_states(std::string_view tag = {}) const;
  Tensor updater_state(std::string_view variable, std::string_view state, std::string_view tag = {},
                       ReadMode mode = ReadMode::zero_copy) const;

  // The bytes of an embedding parameter's finalfusion file (zero-copy when
  // stored).
  Bytes embedding_file(std::string_view name, std::string_view tag = {},
                       ReadMode mode = ReadMode::zero_copy) const;

  // The full contents of any entry (zero-copy when stored and mode allows).
  Bytes entry(std::string_view entry_name, ReadMode mode = ReadMode::zero_copy) const;
  // `length` bytes of entry()'s result from byte `offset` on, reading no
  // more of the entry than that: a stored entry's part is a view of the
  // archive (as ReadMode::zero_copy); a deflated one is decompressed from
  // its start to the part's end and no further (the bytes before the part through a
  // 64 KiB buffer), the part into owned memory of `length` bytes (as entry(): pages no
  // data reaches stay untouched). The whole entry (offset 0, length entry_size()) is
  // checked, size and CRC-32, and so is a part that ends a deflated entry; a shorter
  // part cannot be. Throws Error(invalid_argument) for a range beyond
  // entry_size(), Error(not_found) for a missing entry, Error(corrupt)
  // naming the entry for damaged data.
  Bytes entry_part(std::string_view entry_name, std::uint64_t offset, std::uint64_t length) const;
  // The size in bytes of entry()'s result, as the central directory
  // declares it, without reading the entry: a caller can refuse an entry
  // too large for it before anything is read or allocated. Checked at open
  // against the file (a stored entry lies within it) and
  // Limits::max_deflate_ratio (a deflated one); a read whose data does not
  // match it throws Error(corrupt). Throws Error(not_found) for a missing
  // entry.
  std::uint64_t entry_size(std::string_view entry_name) const;
  bool has_entry(std::string_view entry_name) const;
  // Every entry name, in central directory order.
  std::vector<std::string> entry_names() const;

  // Checks everything: zip structure, every CRC, blob header, FlatBuffer and reference, and in
  // tags with graph.fb the rules tying params and updater state to graph and config (GRAPH.md
  // section 4). Returns the problems found (empty: valid): every problem that does not keep
  // the checks after it from being made (every bad line of a damaged params.txt or
  // updater.txt, every broken rule of a graph.fb or trainingConfig.fb that decodes), at most
  // 20 per entry, then one "... and N more problems in this entry" (problems_found counts
  // them). `progress` (optional) hears of the entry bytes checked; returning false throws
  // Error(cancelled).
  std::vector<Problem> verify(const ProgressCallback& progress = {}) const;

  // A braced list of strings where a tag, a name or an entry name goes
  // (`tensor("w", {"a", "b"})`, `entry({"a", "b"})`: a string_view("a", "b"),
  // undefined behaviour) does not compile either, in any position
  // (error.hpp, detail::braced_list_is_a_tag).
  template <std::size_t N>
  requires(N >= 2) ParamInfo param(const char* const (&)[N], std::string_view = {})
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "param({\"a\", \"b\"}): a name is one string, as in param(\"w\", tag); "
                  "every parameter: params(tag)");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) ParamInfo param(std::string_view, const char* const (&)[N])
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "param(name, {\"a\", \"b\"}): a tag is one string, as in "
                  "param(name, \"step-1\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Tensor
      tensor(const char* const (&)[N], std::string_view = {}, ReadMode = ReadMode::zero_copy)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "tensor({\"a\", \"b\"}): a name is one string, as in tensor(\"w\", tag); "
                  "the tensors a and b: load(tag, {.names = std::vector<std::string>{\"a\", "
                  "\"b\"}})");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Tensor
      tensor(std::string_view, const char* const (&)[N], ReadMode = ReadMode::zero_copy)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "tensor(name, {\"a\", \"b\"}): a tag is one string, as in "
                  "tensor(name, \"step-1\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Tensor updater_state(std::string_view, std::string_view,
                                        const char* const (&)[N], ReadMode = ReadMode::zero_copy)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "updater_state(variable, state, {\"a\", \"b\"}): a tag is one string, as in "
                  "updater_state(variable, state, \"step-1\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Tensor updater_state(const char* const (&)[N], std::string_view,
                                        std::string_view = {}, ReadMode = ReadMode::zero_copy)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "updater_state({\"a\", \"b\"}, state): a variable is one string, as in "
                  "updater_state(\"w\", \"M\", tag); every state: updater_states(tag)");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Tensor updater_state(std::string_view, const char* const (&)[N],
                                        std::string_view = {}, ReadMode = ReadMode::zero_copy)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "updater_state(variable, {\"a\", \"b\"}): a state is one string, as in "
                  "updater_state(\"w\", \"M\", tag); every state: updater_states(tag)");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Bytes embedding_file(const char* const (&)[N], std::string_view = {},
                                        ReadMode = ReadMode::zero_copy)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "embedding_file({\"a\", \"b\"}): a name is one string, as in "
                  "embedding_file(\"vectors\", tag)");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Bytes
      embedding_file(std::string_view, const char* const (&)[N], ReadMode = ReadMode::zero_copy)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "embedding_file(name, {\"a\", \"b\"}): a tag is one string, as in "
                  "embedding_file(name, \"step-1\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Bytes entry(const char* const (&)[N], ReadMode = ReadMode::zero_copy)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "entry({\"a\", \"b\"}): an entry name is one string, as in "
                  "entry(\"step-1/params.txt\")");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) Bytes entry_part(const char* const (&)[N], std::uint64_t, std::uint64_t)
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "entry_part({\"a\", \"b\"}, offset, length): an entry name is one string");
    return {};
  }
  template <std::size_t N>
  requires(N >= 2) std::uint64_t entry_size(const char* const (&)[N])
  const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "entry_size({\"a\", \"b\"}): an entry name is one string");
    return 0;
  }
  template <std::size_t N>
  requires(N >= 2) bool has_entry(const char* const (&)[N]) const {
    static_assert(detail::braced_list_is_a_tag<N>,
                  "has_entry({\"a\", \"b\"}): an entry name is one string");
    return false;
  }

  // The parsed state (opaque: defined and used only inside modelzip).
  class Impl;

 private:
  explicit Archive(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace modelzip
