// Archive::Impl: the parsed, validated state of an open archive. Shared by
// Archive (reading) and Writer (which rewrites an archive from it).
// Immutable after construction; safe to use from several threads.
#pragma once

#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/blob_table.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "remote/remote_source.hpp"
#include "zip/archive_snapshot.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"

namespace modelzip {

struct TagTables {
  std::string tag;
  std::vector<format::BlobRow> params;
  std::vector<format::BlobRow> updater;
  bool has_updater = false;
  // Set when the tag's params.txt or updater.txt could not be read (the
  // rows are then empty): the archive still opens, so that the other tags
  // stay usable; every use of this tag throws this error.
  std::optional<Error> damage;
  // Rows by key (format::row_key_hash / row_has_keys).
  detail::PositionIndex param_index;
  detail::PositionIndex updater_index;
  const std::vector<format::BlobRow>& rows(format::TableKind kind) const {
    return kind == format::TableKind::params ? params : updater;
  }
};

class Archive::Impl {
 public:
  // `parsed`, if given, is zip::parse_directory(file) done already.
  // `source` (remote archives) fills `file` on demand (io/byte_source.hpp).
  Impl(std::string name, Bytes file, const OpenOptions& options,
       std::optional<zip::Directory> parsed = std::nullopt,
       std::shared_ptr<const io::ByteSource> source = {});
  // The parsed state of `archive`, for modelzip's own modules.
  static const Impl& of(const Archive& archive) noexcept { return *archive.impl_; }
  // An Archive of this state (for modelzip's own modules that build one).
  static Archive wrap(std::shared_ptr<const Impl> impl) { return Archive(std::move(impl)); }
  // Archive::open of a URL, with `missing` saying whether a refused HEAD of
  // an s3:// object is explained (remote::open); throws as remote::open and
  // the parse do.
  static Archive open_url(const std::string& url, const OpenOptions& options,
                          remote::MissingObject missing);
  // Archive::open of a local file: read_snapshot with the parse as its
  // `use`. `parsed`, when given, runs within each attempt after the parse
  // succeeded (tests change the archive there to make the attempt fail).
  static Archive open_file(const std::filesystem::path& path, const OpenOptions& options,
                           const std::function<void()>& parsed = {});

  std::string name;
  Limits limits;
  OpenOptions open_options;  // as given at open (Archive::reopen)
  zip::Directory directory;
  zip::EntryReader reader;
  Metadata metadata;
  std::vector<std::string> tags;
  std::vector<TagTables> tables;                           // parallel to tags
  std::unordered_map<std::string, std::size_t> tag_index;  // lower-case tag -> position
  // The file a local archive was read from (for ReadMode::private_view);
  // no descriptor for remote and in-memory archives.
  zip::SnapshotFile snapshot_file;
  // Archive::changed_since_open's finding (the one state of Impl that
  // changes, under its mutex): the file's state last found to hold the
  // committed state this Archive read (zip::same_committed_state).
  struct CommittedCheck {
    std::mutex mutex;
    std::optional<zip::SnapshotFile> confirmed;
  };
  mutable CommittedCheck committed_check;

  // Error context naming this archive (and optionally an entry and tag).
  ErrorContext context(std::string entry = {}, std::string tag = {}) const {
    return ErrorContext{.archive = name, .entry = std::move(entry), .tag = std::move(tag)};
  }
  // Whether the local file this Archive was read from changed after it was
  // read (zip::snapshot_current): another writer's commit, such as an
  // in-place removal (FORMAT.md 8.5), may have overwritten bytes this
  // Archive reads again. False for remote and in-memory archives, and when
  // the file cannot be looked at.
  bool file_changed_since_open() const;
  // Of the entries `names` (of this Archive's directory; "" stands for the
  // archive as a whole), those whose bytes may be another writer's since
  // the open: none while file_changed_since_open() is false; else those that
  // the archive's committed state now no longer lists where this Archive's
  // directory has them (zip::current_directory: an append, or a removal of
  // other tags, leaves an entry in place, and a mismatch in it is damage),
  // "", and all of them when that cannot be told (the path names another
  // file now, the archive cannot be read).
  std::unordered_set<std::string> changed_since_open(std::span<const std::string> names) const;
  // `err`, thrown by a read of this archive's bytes, with `outer`'s context
  // added; an error about the bytes themselves (corrupt, limit_exceeded,
  // unsupported) about an entry that changed_since_open() names (no entry
  // named: when file_changed_since_open()) becomes Error(io) with
  // kChangedSinceOpen, ": reopen the archive to read it as it is now" and the
  // same context: the bytes may be another writer's, not damaged.
  Error read_error(const Error& err, const ErrorContext& outer) const;
  // Archive::load of `names`, tensor parameters of tag index `t`: with
  // `check_crc`, every blob's CRC-32 is checked before any is returned.
  NamedTensors load_named(std::span<const std::string> names, std::size_t t, ReadMode mode,
                          bool check_crc, const ProgressCallback& progress) const;
  static constexpr std::string_view kChangedSinceOpen =
      "the archive was changed by another writer since this reader opened it (a tag removed or "
      "rewritten in place may have overwritten what this entry held)";
  const zip::EntryInfo* find_entry(std::string_view entry) const;
  // The bytes of a text entry the format requires (missing: corrupt),
  // within the text size limit.
  Bytes text_entry(std::string_view entry_name) const;
  // Reads and checks tag `t`'s params.txt and updater.txt into `tt`;
  // throws the first problem. With `report`, each problem is passed to it
  // instead (naming the table's entry and line) and the rest is read: every
  // bad line of both tables (then left out of `tt`; per table, the lines
  // that do not parse, then the rows whose reference leads nowhere), or a
  // table that cannot be read at all (then empty).
  void read_tables(std::size_t t, TagTables& tt,
                   const std::function<void(const Error&)>& report = {}) const;
  const zip::EntryInfo& entry_or_throw(std::string_view entry) const;
  // Position of `tag` (empty: newest), matched without regard to case.
  std::size_t tag_position(std::string_view tag) const;
  // The same, for reading the tag's tables: throws the tag's damage.
  std::size_t usable_tag(std::string_view tag) const;
  // The row of parameter `param` (updater: and `state`) in the tag at
  // `tag_pos`, or nullptr.
  const format::BlobRow* find_row(std::size_t tag_pos, format::TableKind kind,
                                  std::string_view param, std::string_view state) const;
  // The row of `key` ("name", updater: "name\0state"); throws not_found.
  const format::BlobRow& row(std::size_t tag_pos, format::TableKind kind,
                             std::string_view key) const;
  std::string blob_entry(std::size_t tag_pos, const format::BlobRow& row,
                         format::TableKind kind) const;
  ParamInfo info(std::size_t tag_pos, const format::BlobRow& row, format::TableKind kind) const;
  // Remote archives: fetches the blob headers of a tag's table in one batch
  // (the first kBlobHeaderPrefetch bytes of each; info() reads more if a
  // header is longer). No-op for local archives.
  static constexpr std::uint64_t kBlobHeaderPrefetch = 1024;
  void prefetch_headers(std::size_t tag_pos, format::TableKind kind) const;
  Tensor read_tensor(const std::string& entry_name, ReadMode mode, const std::string& tag) const;
  // The whole data of `e` as `mode` asks (no CRC check for views).
  Bytes read_entry(const zip::EntryInfo& e, ReadMode mode) const;
};

}  // namespace modelzip
