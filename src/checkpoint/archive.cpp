#include <algorithm>

#include "checkpoint/archive_impl.hpp"
#include "checkpoint/entry_validators.hpp"
#include "checkpoint/private_views.hpp"
#include "core/checked.hpp"
#include "core/kept_symbol.hpp"
#include "core/printable.hpp"
#include "core/progress_tracker.hpp"
#include "core/suggestions.hpp"
#include "format/archive_metadata.hpp"
#include "format/tag_name.hpp"
#include "format/tags_file.hpp"
#include "format/tensor_blob.hpp"
#include "modelzip/error.hpp"
#include "remote/pin_check.hpp"
#include "remote/remote_source.hpp"
#include "zip/archive_snapshot.hpp"

namespace modelzip {

using format::BlobRow;
using format::TableKind;

namespace {

std::string key_text(TableKind kind, std::string_view key) {
  if (kind == TableKind::params) return "parameter " + modelzip::detail::quote_name(key);
  auto nul = key.find('\0');
  return "updater state " + modelzip::detail::quote_name(key.substr(nul + 1)) + " of variable " +
         modelzip::detail::quote_name(std::string(key.substr(0, nul)));
}

// `length` bytes of `e` from byte `offset`, the range within its declared
// size, as Archive::entry_part reads them.
Bytes entry_range(const zip::EntryReader& reader, const zip::EntryInfo& e, std::uint64_t offset,
                  std::uint64_t length) {
  const bool whole = offset == 0 && length == e.uncompressed_size;
  if (length == 0 && !whole) return Bytes();
  if (e.stored() && whole) return reader.read(e, true);
  return reader.read_range(e, offset, length);
}

// The shape of the embedding entry `e`, read by the shape reader of its kind
// through ranged reads of the entry (a deflated one decompressed only as far
// as it reads); empty when it cannot be read that way (Error(corrupt) or
// Error(unsupported) there: reading the embedding names the problem), so
// that a damaged embedding does not fail the listing of its parameter.
Shape embedding_shape(const zip::EntryReader& reader, const zip::EntryInfo& e) {
  const EntryShapeReader read_shape = entry_validators().shape_reader_of(EntryKind::embedding);
  if (!read_shape) return {};
  try {
    return read_shape(e.uncompressed_size, [&](std::uint64_t offset, std::uint64_t length) {
      return entry_range(reader, e, offset, length);
    });
  } catch (const Error& err) {
    if (err.code() != ErrorCode::corrupt && err.code() != ErrorCode::unsupported) throw;
  }
  return {};
}

}  // namespace

Archive::Impl::Impl(std::string archive_name, Bytes file, const OpenOptions& options,
                    std::optional<zip::Directory> parsed,
                    std::shared_ptr<const io::ByteSource> source)
    : name(std::move(archive_name)),
      limits(options.limits),
      open_options(options),
      reader(file, options.limits, std::move(source)) {
  if (file.empty() && !reader.source())
    throw Error(ErrorCode::corrupt, "the file is empty (0 bytes), not a modelzip archive",
                context());
  try {
    directory =
        parsed ? std::move(*parsed) : zip::parse_directory(file.span(), limits, reader.source());
    if (reader.source()) {
      // The text entries read below, fetched together: root files and every
      // tag's tables (bounded by the text entry limit, checked on read).
      std::vector<const zip::EntryInfo*> texts;
      for (const auto& e : directory.entries) {
        auto slash = e.name.find('/');
        std::string_view rest = slash == std::string::npos
                                    ? std::string_view(e.name)
                                    : std::string_view(e.name).substr(slash + 1);
        bool table = slash == std::string::npos
                         ? (rest == format::kMetadataEntry || rest == format::kTagsEntry)
                         : (rest == format::table_entry_name(TableKind::params) ||
                            rest == format::table_entry_name(TableKind::updater));
        if (table && e.uncompressed_size <= limits.max_text_entry_bytes) texts.push_back(&e);
      }
      reader.prefetch(texts);
    }
  } catch (const Error& e) {
    throw e.with_context(context());
  }
  auto text_of = [this](std::string_view entry_name) { return text_entry(entry_name); };
  if (!find_entry(format::kMetadataEntry)) {  // e.g. a zip made by zip(1), torch.save, np.savez
    const auto& entries = directory.entries;
    const auto any_entry = [&](auto&& test) {
      return std::any_of(entries.begin(), entries.end(), test);
    };
    std::string what;
    if (any_entry([](const auto& e) { return e.name.ends_with("/data.pkl"); }))
      what =
          " written by torch.save (read it with torch.load(..., weights_only=True); "
          "modelzip.torch.save converts it)";
    else if (!entries.empty() &&
             !any_entry([](const auto& e) { return !e.name.ends_with(".npy"); }))
      what = ", an .npz of numpy arrays (modelzip import reads it)";
    throw Error(ErrorCode::corrupt,
                "not a modelzip archive (no " + std::string(format::kMetadataEntry) +
                    "): a zip file of " + std::to_string(entries.size()) +
                    (entries.size() == 1 ? " entry" : " entries") + what,
                context());
  }
  {
    Bytes text = text_of(format::kMetadataEntry);
    try {
      metadata = format::parse_metadata(text.as_string_view(), limits);
    } catch (const Error& e) {
      throw e.with_context(context(std::string(format::kMetadataEntry)));
    }
  }
  {
    Bytes text = text_of(format::kTagsEntry);
    try {
      tags = format::parse_tags_file(text.as_string_view(), limits);
    } catch (const Error& e) {
      throw e.with_context(context(std::string(format::kTagsEntry)));
    }
  }
  for (std::size_t i = 0; i < tags.size(); ++i) tag_index.emplace(format::ascii_lower(tags[i]), i);

  // Every entry in a folder belongs to a listed tag, spelled as listed.
  // Folder entries ("x/", "t1/params/") are ignored wherever they are.
  std::string_view checked_folder;  // entries of one folder come together: check it once
  for (const auto& e : directory.entries) {
    auto slash = e.name.find('/');
    if (slash == std::string::npos) continue;  // root files: metadata, tags, future additions
    if (e.name.back() == '/') continue;
    if (!checked_folder.empty() && std::string_view(e.name).substr(0, slash) == checked_folder)
      continue;
    std::string folder = e.name.substr(0, slash);
    auto it = tag_index.find(format::ascii_lower(folder));
    if (it == tag_index.end())
      throw Error(ErrorCode::corrupt,
                  "entry lies in folder " + modelzip::detail::quote_name(folder) +
                      ", which tags.txt does not list",
                  context(e.name));
    if (tags[it->second] != folder)
      throw Error(ErrorCode::corrupt,
                  "folder " + modelzip::detail::quote_name(folder) + " differs in case from tag " +
                      modelzip::detail::quote_name(tags[it->second]),
                  context(e.name));
    checked_folder = std::string_view(e.name).substr(0, slash);
  }

  // Every tag has its params.txt before any per-tag state is built, so that
  // a tags.txt of a million lines without tag folders costs no tables.
  for (const auto& tag : tags) {
    std::string entry_name = tag + "/" + std::string(format::table_entry_name(TableKind::params));
    if (!find_entry(entry_name))
      throw Error(ErrorCode::corrupt,
                  "tag " + modelzip::detail::quote_name(tag) + " has no params.txt",
                  context(entry_name, tag));
  }
  tables.resize(tags.size());
  for (std::size_t t = 0; t < tags.size(); ++t) {
    TagTables& tt = tables[t];
    tt.tag = tags[t];
    try {
      read_tables(t, tt);
    } catch (const Error& e) {  // one damaged tag does not take the others down
      tt = TagTables{.tag = tags[t], .damage = e.with_context(context({}, tags[t]))};
    }
  }
}

void Archive::Impl::read_tables(std::size_t t, TagTables& tt,
                                const std::function<void(const Error&)>& report) const {
  auto text_of = [this](std::string_view entry_name) { return text_entry(entry_name); };
  for (TableKind kind : {TableKind::params, TableKind::updater}) {
    std::string entry_name = tags[t] + "/" + std::string(format::table_entry_name(kind));
    // Throws the problem `e` of this table, or reports it (and goes on).
    auto problem = [&](const Error& e) {
      if (!report) throw e.with_context(context(entry_name, tags[t]));
      report(e.with_context(context(entry_name, tags[t])));
    };
    if (kind == TableKind::updater && !find_entry(entry_name)) continue;
    if (kind == TableKind::params && !find_entry(entry_name)) {
      problem(Error(ErrorCode::corrupt,
                    "tag " + modelzip::detail::quote_name(tags[t]) + " has no params.txt"));
      continue;
    }
    Bytes text;
    auto& rows = kind == TableKind::params ? tt.params : tt.updater;
    auto& index = kind == TableKind::params ? tt.param_index : tt.updater_index;
    try {
      text = text_of(entry_name);
      rows = format::parse_blob_table(text.as_string_view(), kind, limits, &index,
                                      report ? problem : std::function<void(const Error&)>());
    } catch (const Error& e) {
      problem(e);
      continue;
    }
    if (kind == TableKind::updater) tt.has_updater = true;
    std::string blob;                         // reused for every row's blob entry name
    const std::string* ref_tag_ok = nullptr;  // last reference tag found valid
    for (const BlobRow& row : rows) {
      auto bad_row = [&](std::string message) {
        problem(Error(ErrorCode::corrupt, std::move(message), ErrorContext{.line = row.line}));
      };
      if (!row.ref.tag.empty() && !(ref_tag_ok && *ref_tag_ok == row.ref.tag)) {
        auto it = tag_index.find(format::ascii_lower(row.ref.tag));
        if (it == tag_index.end()) {
          bad_row("reference to tag " + modelzip::detail::quote_name(row.ref.tag) +
                  ", which tags.txt does not list");
          continue;
        }
        if (tags[it->second] != row.ref.tag) {
          bad_row("reference " + modelzip::detail::quote_name(format::blob_ref_text(row.ref)) +
                  " differs in case from the tag's spelling");
          continue;
        }
        ref_tag_ok = &row.ref.tag;
      }
      format::blob_entry_name_into(blob, row.ref, tags[t], kind);
      if (!find_entry(blob))
        bad_row("blob entry " + modelzip::detail::quote_name(blob) + " does not exist");
    }
  }
}

Bytes Archive::Impl::text_entry(std::string_view entry_name) const {
  const zip::EntryInfo* found = find_entry(entry_name);
  if (!found)
    throw Error(ErrorCode::corrupt, "required entry is missing", context(std::string(entry_name)));
  const auto& e = *found;
  if (e.uncompressed_size > limits.max_text_entry_bytes)
    throw Error(ErrorCode::limit_exceeded,
                "text entry of " + std::to_string(e.uncompressed_size) + " bytes exceeds the limit",
                context(std::string(entry_name)));
  try {
    return reader.read(e, true);
  } catch (const Error& err) {
    throw err.with_context(context(std::string(entry_name)));
  }
}

bool Archive::Impl::file_changed_since_open() const {
  if (!snapshot_file.fd) return false;
  try {
    return !zip::snapshot_current(name, snapshot_file);
  } catch (const Error&) {  // the journal cannot be read: nothing is claimed
    return false;
  }
}

std::unordered_set<std::string> Archive::Impl::changed_since_open(
    std::span<const std::string> names) const {
  std::unordered_set<std::string> out;
  if (names.empty() || !file_changed_since_open()) return out;
  std::optional<zip::Directory> now;
  try {
    now = zip::current_directory(name, format::kTagsEntry, snapshot_file, limits);
  } catch (const Error&) {  // cannot be told: every entry may have changed
  }
  for (const std::string& entry : names) {
    const zip::EntryInfo* mine = entry.empty() ? nullptr : find_entry(entry);
    if (!now || !mine || !zip::same_entry(*now, *mine)) out.insert(entry);
  }
  return out;
}

Error Archive::Impl::read_error(const Error& err, const ErrorContext& outer) const {
  Error out = err.with_context(outer);
  const ErrorCode code = err.code();
  if ((code == ErrorCode::corrupt || code == ErrorCode::limit_exceeded ||
       code == ErrorCode::unsupported) &&
      (out.context().entry.empty()
           ? file_changed_since_open()
           : !changed_since_open(std::span(&out.context().entry, 1)).empty())) {
    ErrorContext c = out.context();
    c.line.reset();  // what the bytes said, not what this reader opened
    c.offset.reset();
    return Error(ErrorCode::io,
                 std::string(kChangedSinceOpen) + ": reopen the archive to read it as it is now",
                 std::move(c));
  }
  return out;
}

const zip::EntryInfo* Archive::Impl::find_entry(std::string_view entry) const {
  return directory.find(entry);
}

const zip::EntryInfo& Archive::Impl::entry_or_throw(std::string_view entry) const {
  if (const auto* e = find_entry(entry)) return *e;
  throw Error(ErrorCode::not_found, "no such entry", context(std::string(entry)));
}

std::size_t Archive::Impl::tag_position(std::string_view tag) const {
  if (tag.empty()) {
    if (tags.empty()) throw Error(ErrorCode::not_found, "the archive has no tags", context());
    return tags.size() - 1;
  }
  auto it = tag_index.find(format::ascii_lower(tag));
  if (it == tag_index.end())
    throw Error(ErrorCode::not_found, "no such tag" + detail::did_you_mean(tag, tags),
                ErrorContext{.archive = name, .tag = std::string(tag)});
  return it->second;
}

std::size_t Archive::Impl::usable_tag(std::string_view tag) const {
  std::size_t t = tag_position(tag);
  if (tables[t].damage) throw *tables[t].damage;
  return t;
}

const BlobRow* Archive::Impl::find_row(std::size_t tag_pos, TableKind kind, std::string_view param,
                                       std::string_view state) const {
  const TagTables& tt = tables[tag_pos];
  const auto& index = kind == TableKind::params ? tt.param_index : tt.updater_index;
  const auto& rows = tt.rows(kind);
  std::size_t at = index.find(format::row_key_hash(kind, param, state), [&](std::size_t p) {
    return format::row_has_keys(rows[p], kind, param, state);
  });
  return at == detail::PositionIndex::npos ? nullptr : &rows[at];
}

const BlobRow& Archive::Impl::row(std::size_t tag_pos, TableKind kind, std::string_view key) const {
  std::string_view first = key, second;
  if (kind == TableKind::updater) {
    auto nul = key.find('\0');
    first = key.substr(0, nul);
    second = nul == std::string_view::npos ? std::string_view() : key.substr(nul + 1);
  }
  if (const BlobRow* found = find_row(tag_pos, kind, first, second)) return *found;
  const auto& rows = tables[tag_pos].rows(kind);
  std::string suggestion;
  if (kind == TableKind::params && rows.size() <= detail::kMaxSuggestionCandidates) {
    std::vector<std::string_view> names;
    for (const auto& r : rows) names.push_back(r.keys.front());
    suggestion = detail::did_you_mean(key, names);
  }
  throw Error(ErrorCode::not_found, "no " + key_text(kind, key) + suggestion,
              context({}, tags[tag_pos]));
}

std::string Archive::Impl::blob_entry(std::size_t tag_pos, const BlobRow& row,
                                      TableKind kind) const {
  return format::blob_entry_name(row.ref, tags[tag_pos], kind);
}

ParamInfo Archive::Impl::info(std::size_t tag_pos, const BlobRow& row, TableKind kind) const {
  ParamInfo p;
  p.name = row.keys[0];
  if (kind == TableKind::updater) p.state = row.keys[1];
  p.blob = blob_entry(tag_pos, row, kind);
  p.owner_tag = row.ref.tag.empty() ? tags[tag_pos] : row.ref.tag;
  p.shared = p.owner_tag != tags[tag_pos];
  const zip::EntryInfo& e = entry_or_throw(p.blob);
  p.compressed = !e.stored();
  try {
    if (row.ref.format == format::BlobFormat::fifu) {
      p.kind = BlobKind::embedding;
      p.dtype = DType::float32;
      p.shape = embedding_shape(reader, e);
      p.nbytes = e.uncompressed_size;
      return p;
    }
    Bytes prefix = reader.read_prefix(e, 4);
    std::uint64_t header = format::blob_header_size(prefix.span(), e.uncompressed_size, limits);
    prefix = reader.read_prefix(e, header);
    format::BlobHeader h = format::read_blob_header(prefix.span(), e.uncompressed_size, limits);
    p.dtype = h.dtype;
    p.shape = std::move(h.shape);
    p.layout = h.layout;
    p.quantization = std::move(h.quantization);
    p.nbytes = h.data_bytes();
  } catch (const Error& err) {
    throw read_error(err, context(p.blob, tags[tag_pos]));
  }
  return p;
}

Tensor Archive::Impl::read_tensor(const std::string& entry_name, ReadMode mode,
                                  const std::string& tag) const {
  const zip::EntryInfo& e = entry_or_throw(entry_name);
  try {
    return format::decode_tensor_blob(read_entry(e, mode), limits);
  } catch (const Error& err) {
    throw read_error(err, context(entry_name, tag));
  }
}

Bytes Archive::Impl::read_entry(const zip::EntryInfo& e, ReadMode mode) const {
  switch (mode) {
    case ReadMode::copy:
      return reader.read_owned(e);
    case ReadMode::private_view:
      return PrivateViews::read_one(*this, e, false);
    case ReadMode::zero_copy:
      break;
  }
  return reader.read(e, false);
}

// ---- Archive ---------------------------------------------------------------

bool Archive::is_remote_url(std::string_view path) noexcept {
  return remote::is_url(path);
}

Archive Archive::Impl::open_url(const std::string& url, const OpenOptions& options,
                                remote::MissingObject missing) {
  remote::Opened r = remote::open(url, options.remote, missing);
  return Archive(std::make_shared<const Impl>(url, std::move(r.file), options, std::nullopt,
                                              std::move(r.source)));
}

Archive Archive::open(const std::filesystem::path& path, const OpenOptions& options) {
  if (path.empty())
    throw Error(ErrorCode::invalid_argument, "the archive path is empty: name the archive file");
  // Remote archives have no journal: the server's object is complete or the
  // open fails (remote/remote_source.hpp).
  if (remote::is_url(path.native()))
    return Impl::open_url(path.string(), options, remote::MissingObject::explain);
  return Impl::open_file(path, options);
}

Archive Archive::Impl::open_file(const std::filesystem::path& path, const OpenOptions& options,
                                 const std::function<void()>& parsed) {
  // One committed state of the archive, even while a writer appends to it
  // (the reader protocol of FORMAT.md section 8.3); its tail is a private
  // copy, so later appends never change what this Archive sees. Its prefix
  // is mapped from the file: a commit that removes tags in place formats
  // free entries there (FORMAT.md 8.5) once it is committed, so the tags'
  // tables are parsed within read_snapshot's attempt, which counts only if
  // the snapshot is still current after it (else a removed tag's table may
  // have been overwritten under it).
  std::shared_ptr<Impl> impl;
  try {
    // read_snapshot looks for the journal beside the name given and, for a
    // symbolic link, beside its target (where writers keep it).
    zip::read_snapshot(path, format::kTagsEntry, options.limits, [&](zip::Snapshot& snapshot) {
      impl.reset();
      impl = std::make_shared<Impl>(path.string(), std::move(snapshot.bytes), options,
                                    std::move(snapshot.directory));
      impl->snapshot_file = std::move(snapshot.file);
      if (parsed) parsed();
    });
  } catch (const Error& e) {
    std::error_code ec;  // a plain sentence for an empty file, as Impl gives
    if (e.code() == ErrorCode::corrupt && std::filesystem::is_regular_file(path, ec) &&
        std::filesystem::file_size(path, ec) == 0 && !ec)
      throw Error(ErrorCode::corrupt, "the file is empty (0 bytes), not a modelzip archive",
                  ErrorContext{.archive = path.string()});
    throw e.with_context({.archive = path.string()});
  }
  return Archive(std::move(impl));
}

bool Archive::changed_since_open() const {
  const Impl& a = *impl_;
  try {
    if (const io::ByteSource* source = a.reader.source()) return remote::changed_on_server(*source);
    if (!a.snapshot_file.fd) return false;
    if (!zip::same_file(a.name, a.snapshot_file)) return true;
    // The journal and the file's identity first (a few system calls); only
    // when they moved, the committed tail is read and compared.
    auto& check = a.committed_check;
    std::lock_guard lock(check.mutex);
    if (zip::snapshot_current(a.name, check.confirmed ? *check.confirmed : a.snapshot_file))
      return false;
    auto now = zip::same_committed_state(a.name, format::kTagsEntry, a.snapshot_file,
                                         a.reader.file(), a.limits);
    if (!now) return true;
    check.confirmed = std::move(now);
    return false;
  } catch (const Error& e) {
    throw e.with_context(a.context());
  }
}

Archive Archive::reopen() const {
  const Impl& a = *impl_;
  if (a.reader.source())
    return Impl::open_url(a.name, a.open_options, remote::MissingObject::explain);
  if (!a.snapshot_file.fd) return *this;  // held in memory: it cannot change
  return Impl::open_file(a.name, a.open_options);
}

Archive Archive::from_memory(Bytes bytes, std::string name, const OpenOptions& options) {
  return Archive(std::make_shared<const Impl>(std::move(name), std::move(bytes), options));
}

const std::string& Archive::name() const& noexcept {
  return impl_->name;
}
std::string Archive::name() const&& {
  return impl_->name;
}
const Metadata& Archive::metadata() const& noexcept {
  return impl_->metadata;
}
Metadata Archive::metadata() const&& {
  return impl_->metadata;
}
const std::vector<std::string>& Archive::tags() const& noexcept {
  return impl_->tags;
}
std::vector<std::string> Archive::tags() const&& {
  return impl_->tags;
}

std::optional<Error> Archive::tag_damage(std::string_view tag) const {
  return impl_->tables[impl_->tag_position(tag)].damage;
}

const std::string& Archive::newest_tag() const& {
  return impl_->tags[impl_->tag_position({})];
}
std::string Archive::newest_tag() const&& {
  return impl_->tags[impl_->tag_position({})];
}
// 0.1.0's unqualified forms (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip7Archive4nameB5cxx11Ev, _ZNKR8modelzip7Archive4nameB5cxx11Ev);
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip7Archive8metadataEv, _ZNKR8modelzip7Archive8metadataEv);
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip7Archive4tagsB5cxx11Ev, _ZNKR8modelzip7Archive4tagsB5cxx11Ev);
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip7Archive10newest_tagB5cxx11Ev,
                     _ZNKR8modelzip7Archive10newest_tagB5cxx11Ev);

std::optional<std::string> Archive::find_tag(std::string_view tag) const {
  auto it = impl_->tag_index.find(format::ascii_lower(tag));
  if (it == impl_->tag_index.end()) return std::nullopt;
  return impl_->tags[it->second];
}

void Archive::Impl::prefetch_headers(std::size_t tag_pos, TableKind kind) const {
  if (!reader.source()) return;
  std::vector<const zip::EntryInfo*> blobs;
  std::string entry_name;
  for (const auto& row : tables[tag_pos].rows(kind)) {
    format::blob_entry_name_into(entry_name, row.ref, tags[tag_pos], kind);
    if (const auto* e = find_entry(entry_name)) blobs.push_back(e);
  }
  try {
    reader.prefetch(blobs, kBlobHeaderPrefetch);
  } catch (const Error& e) {
    throw e.with_context(context({}, tags[tag_pos]));
  }
}

std::vector<ParamInfo> Archive::params(std::string_view tag) const {
  std::size_t t = impl_->usable_tag(tag);
  impl_->prefetch_headers(t, TableKind::params);
  std::vector<ParamInfo> out;
  out.reserve(impl_->tables[t].params.size());
  for (const auto& row : impl_->tables[t].params)
    out.push_back(impl_->info(t, row, TableKind::params));
  return out;
}

ParamInfo Archive::param(std::string_view name, std::string_view tag) const {
  std::size_t t = impl_->usable_tag(tag);
  return impl_->info(t, impl_->row(t, TableKind::params, name), TableKind::params);
}

Tensor Archive::tensor(std::string_view name, std::string_view tag, ReadMode mode) const {
  std::size_t t = impl_->usable_tag(tag);
  const BlobRow& row = impl_->row(t, TableKind::params, name);
  std::string entry = impl_->blob_entry(t, row, TableKind::params);
  if (row.ref.format != format::BlobFormat::tensor)
    throw Error(ErrorCode::invalid_argument,
                "parameter " + modelzip::detail::quote_name(name) +
                    " is an embedding; use embedding_file()",
                impl_->context(entry, impl_->tags[t]));
  return impl_->read_tensor(entry, mode, impl_->tags[t]);
}

NamedTensors Archive::load(std::string_view tag, const LoadOptions& options) const {
  const std::size_t t = impl_->usable_tag(tag);
  const std::string& tag_name = impl_->tags[t];
  const auto& rows = impl_->tables[t].params;
  const ReadMode mode = options.mode;
  const ProgressCallback& progress = options.progress;
  if (options.names || mode == ReadMode::private_view ||
      (options.verify_crc && mode != ReadMode::copy)) {
    std::vector<std::string> every;
    if (!options.names)
      for (const auto& row : rows)
        if (row.ref.format == format::BlobFormat::tensor) every.push_back(row.keys[0]);
    NamedTensors out = impl_->load_named(options.names ? *options.names : every, t, mode,
                                         options.verify_crc, progress);
    out.context_ = impl_->context({}, tag_name);
    return out;
  }
  std::vector<const BlobRow*> blob_rows;
  std::vector<const zip::EntryInfo*> entries;
  blob_rows.reserve(rows.size());
  entries.reserve(rows.size());
  std::string entry_name;
  for (const auto& row : rows) {
    if (row.ref.format != format::BlobFormat::tensor) continue;
    format::blob_entry_name_into(entry_name, row.ref, tag_name, TableKind::params);
    blob_rows.push_back(&row);
    entries.push_back(&impl_->entry_or_throw(entry_name));
  }
  if (mode == ReadMode::zero_copy && impl_->reader.source()) {
    try {  // every blob's requests in flight together
      impl_->reader.prefetch(entries);
    } catch (const Error& err) {
      throw err.with_context(impl_->context({}, tag_name));
    }
  }
  NamedTensors out;
  out.context_ = impl_->context({}, tag_name);
  auto decode = [&](std::size_t i, const Bytes& data) {
    try {
      out.insert_or_assign(blob_rows[i]->keys[0], format::decode_tensor_blob(data, impl_->limits));
    } catch (const Error& err) {
      throw impl_->read_error(err, impl_->context(entries[i]->name, tag_name));
    }
  };
  if (mode == ReadMode::copy) {
    // Copies and CRC checks of all blobs at once (shared by two threads);
    // progress once per blob, from this thread.
    std::vector<Bytes> data;
    try {
      data = impl_->reader.read_owned_all(entries, progress);
    } catch (const Error& err) {
      throw impl_->read_error(err, impl_->context({}, tag_name));
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
      decode(i, data[i]);
      data[i] = Bytes();  // the tensor keeps what it needs
    }
  } else {
    detail::ProgressTracker tracker(progress, "load", impl_->context({}, tag_name));
    if (tracker.enabled())
      for (const auto* e : entries) tracker.add_to_total(e->compressed_size);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const zip::EntryInfo& e = *entries[i];
      Bytes data;
      try {
        data = impl_->reader.read(e, false);
      } catch (const Error& err) {
        throw impl_->read_error(err, impl_->context(e.name, tag_name));
      }
      decode(i, data);
      tracker.advance(e.compressed_size);
    }
    tracker.finish();
  }
  return out;
}

NamedTensors Archive::Impl::load_named(std::span<const std::string> names, std::size_t t,
                                       ReadMode mode, bool check_crc,
                                       const ProgressCallback& progress) const {
  const std::string& tag_name = tags[t];
  std::vector<const zip::EntryInfo*> entries;
  entries.reserve(names.size());
  for (const std::string& param : names) {
    const BlobRow& blob_row = row(t, TableKind::params, param);
    std::string entry = blob_entry(t, blob_row, TableKind::params);
    if (blob_row.ref.format != format::BlobFormat::tensor)
      throw Error(ErrorCode::invalid_argument,
                  "parameter " + modelzip::detail::quote_name(param) +
                      " is an embedding; use embedding_file()",
                  context(entry, tag_name));
    entries.push_back(&entry_or_throw(entry));
  }
  if (mode != ReadMode::copy && reader.source()) {
    try {  // every blob's requests in flight together
      reader.prefetch(entries);
    } catch (const Error& err) {
      throw err.with_context(context({}, tag_name));
    }
  }
  std::optional<PrivateViews> views;
  if (mode == ReadMode::private_view) views.emplace(*this, entries);
  NamedTensors out;
  detail::ProgressTracker tracker(mode == ReadMode::private_view ? ProgressCallback() : progress,
                                  "load", context({}, tag_name));
  if (tracker.enabled())
    for (const auto* e : entries) tracker.add_to_total(e->compressed_size);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const zip::EntryInfo& e = *entries[i];
    try {
      Bytes data;
      switch (mode) {
        case ReadMode::copy:
          data = reader.read_owned(e);
          break;
        case ReadMode::private_view:
          data = views->read(e, check_crc);
          break;
        case ReadMode::zero_copy:
          data = reader.read(e, check_crc);
          break;
      }
      out.insert_or_assign(names[i], format::decode_tensor_blob(data, limits));
    } catch (const Error& err) {
      throw read_error(err, context(e.name, tag_name));
    }
    tracker.advance(e.compressed_size);
  }
  tracker.finish();
  return out;
}

void NamedTensors::throw_missing(std::string_view name) const {
  constexpr std::size_t kListed = 8;  // names shown; the rest are counted
  std::string message = "no tensor " + modelzip::detail::quote_name(name);
  if (items_.size() <= detail::kMaxSuggestionCandidates) {
    std::vector<std::string_view> names;
    names.reserve(items_.size());
    for (const auto& item : items_) names.push_back(item.first);
    message += detail::did_you_mean(name, names);
  }
  if (items_.empty()) {
    message += ": there are no tensors";
  } else {
    message += " among " + std::to_string(items_.size()) + ": ";
    for (std::size_t i = 0; i < items_.size() && i < kListed; ++i)
      message += (i ? ", " : "") + modelzip::detail::quote_name(items_[i].first);
    if (items_.size() > kListed)
      message += " and " + std::to_string(items_.size() - kListed) + " more";
  }
  throw Error(ErrorCode::not_found, message, context_);
}

std::vector<ParamInfo> Archive::updater_states(std::string_view tag) const {
  std::size_t t = impl_->usable_tag(tag);
  impl_->prefetch_headers(t, TableKind::updater);
  std::vector<ParamInfo> out;
  for (const auto& row : impl_->tables[t].updater)
    out.push_back(impl_->info(t, row, TableKind::updater));
  return out;
}

Tensor Archive::updater_state(std::string_view variable, std::string_view state,
                              std::string_view tag, ReadMode mode) const {
  std::size_t t = impl_->usable_tag(tag);
  std::string key = std::string(variable) + std::string(1, '\0') + std::string(state);
  const BlobRow& row = impl_->row(t, TableKind::updater, key);
  return impl_->read_tensor(impl_->blob_entry(t, row, TableKind::updater), mode, impl_->tags[t]);
}

Bytes Archive::embedding_file(std::string_view name, std::string_view tag, ReadMode mode) const {
  std::size_t t = impl_->usable_tag(tag);
  const BlobRow& row = impl_->row(t, TableKind::params, name);
  std::string entry = impl_->blob_entry(t, row, TableKind::params);
  if (row.ref.format != format::BlobFormat::fifu)
    throw Error(
        ErrorCode::invalid_argument,
        "parameter " + modelzip::detail::quote_name(name) + " is a tensor, not an embedding",
        impl_->context(entry, impl_->tags[t]));
  return this->entry(entry, mode);
}

Bytes Archive::entry(std::string_view entry_name, ReadMode mode) const {
  const zip::EntryInfo& e = impl_->entry_or_throw(entry_name);
  try {
    return impl_->read_entry(e, mode);
  } catch (const Error& err) {
    throw impl_->read_error(err, impl_->context(e.name));
  }
}

Bytes Archive::entry_part(std::string_view entry_name, std::uint64_t offset,
                          std::uint64_t length) const {
  const zip::EntryInfo& e = impl_->entry_or_throw(entry_name);
  const std::uint64_t size = e.uncompressed_size;
  if (offset > size || length > size - offset)
    throw Error(ErrorCode::invalid_argument,
                std::to_string(length) + " bytes from byte " + std::to_string(offset) +
                    " lie outside the entry's " + std::to_string(size),
                impl_->context(e.name));
  try {
    return entry_range(impl_->reader, e, offset, length);
  } catch (const Error& err) {
    throw impl_->read_error(err, impl_->context(e.name));
  }
}

std::uint64_t Archive::entry_size(std::string_view entry_name) const {
  return impl_->entry_or_throw(entry_name).uncompressed_size;
}

bool Archive::has_entry(std::string_view entry_name) const {
  return impl_->find_entry(entry_name);
}

std::vector<std::string> Archive::entry_names() const {
  std::vector<std::string> out;
  out.reserve(impl_->directory.entries.size());
  for (const auto& e : impl_->directory.entries) out.push_back(e.name);
  return out;
}

}  // namespace modelzip
