// Writer: plans the new archive from the old one plus the staged changes,
// then writes it through zip::StreamZipWriter to a temporary file and replaces the
// archive durably (io::TempFile).
#include "modelzip/writer.hpp"

#include <algorithm>
#include <any>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <variant>

#include "checkpoint/archive_impl.hpp"
#include "checkpoint/entry_validators.hpp"
#include "checkpoint/fill_gate.hpp"
#include "checkpoint/new_tag_contents.hpp"
#include "checkpoint/rotation.hpp"
#include "checkpoint/s3_old_archive.hpp"
#include "core/crc32.hpp"
#include "core/kept_symbol.hpp"
#include "core/position_index.hpp"
#include "core/progress_tracker.hpp"
#include "core/suggestions.hpp"
#include "format/archive_metadata.hpp"
#include "format/tag_name.hpp"
#include "format/tags_file.hpp"
#include "format/tensor_blob.hpp"
#include "io/append_journal.hpp"
#include "io/direct_write_choice.hpp"
#include "io/durable_file.hpp"
#include "io/file_identity.hpp"
#include "io/posix_file.hpp"
#include "io/syscalls.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"
#include "remote/remote_source.hpp"
#include "remote/s3_multipart.hpp"
#include "remote/s3_upload_sink.hpp"
#include "remote/settings.hpp"
#include "remote/stale_uploads.hpp"
#include "remote/upload_config.hpp"
#include "zip/append_session.hpp"
#include "zip/archive_layout.hpp"
#include "zip/free_range.hpp"
#include "zip/known_crcs.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip {

using format::BlobFormat;
using format::BlobRef;
using format::BlobRow;
using format::TableKind;

namespace {

// Content of one entry of the planned archive: an entry of the old archive
// (copied without decoding) or new pieces.
struct Content {
  const zip::EntryInfo* old = nullptr;
  std::vector<Bytes> pieces;
  std::uint64_t size = 0;
  Compression compression = Compression::store;
  std::optional<std::uint32_t> crc;  // computed on demand for dedup
};

struct BlobKey {
  TableKind kind;
  std::uint64_t index;
  BlobFormat format;
  auto operator<=>(const BlobKey&) const = default;
};

struct TagPlan {
  std::string name;
  std::vector<BlobRow> rows[2];  // by TableKind
  bool has_updater = false;
  // The old tag's tables could not be read (Archive::tag_damage): its rows
  // are unknown, so the commit may only remove the tag.
  std::optional<Error> damage;
  std::map<BlobKey, Content> blobs;
  std::vector<std::pair<std::string, Content>> others;  // relative name -> content
  std::uint64_t next_index[2] = {0, 0};
  // The old archive's params.txt and updater.txt of this tag (null for a
  // new tag), and whether the rows changed since (references rewritten by
  // a removal): an in-place commit keeps unchanged tables where they are.
  const zip::EntryInfo* old_tables[2] = {nullptr, nullptr};
  bool tables_changed = false;

  std::vector<BlobRow>& table(TableKind k) { return rows[static_cast<int>(k)]; }
  std::string entry_name(const BlobKey& key) const {
    return format::blob_entry_name(BlobRef{"", key.index, key.format}, name, key.kind);
  }
};

struct Plan {
  Metadata metadata;
  std::string comment;  // the zip archive comment, kept across rewrites
  std::vector<TagPlan> tags;
  std::vector<std::pair<std::string, Content>> root_others;

  TagPlan* find(std::string_view tag) {
    for (auto& t : tags)
      if (format::same_tag(t.name, tag)) return &t;
    return nullptr;
  }
  std::size_t position(const std::string& tag) const {
    for (std::size_t i = 0; i < tags.size(); ++i)
      if (tags[i].name == tag) return i;
    return tags.size();
  }
};

std::uint64_t pieces_size(const std::vector<Bytes>& pieces) {
  std::uint64_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

// How far the dedup comparison has read into the blob being added: the
// furthest byte (a blob may be read twice: compared with its namesake, then
// hashed), reported to the commit's compare stage. Reading is what takes
// time when the archive or the new tensors are not in the page cache.
class ScanProgress {
 public:
  explicit ScanProgress(detail::ProgressTracker* tracker) : tracker_(tracker) {}
  void start() noexcept { at_ = 0; }
  void reached(std::uint64_t offset) {
    if (!tracker_ || offset <= at_) return;
    tracker_->advance(offset - at_);
    at_ = offset;
  }

 private:
  detail::ProgressTracker* tracker_;
  std::uint64_t at_ = 0;
};

// Pieces are read in steps of this size between progress reports.
constexpr std::uint64_t kScanStep = 4u << 20;

// CRC-32 of the concatenation of `pieces`, reporting to `scan` if given;
// taken from the calling thread's KnownCrcs (a background save's snapshot)
// where it knows the pieces.
std::uint32_t pieces_crc(const std::vector<Bytes>& pieces, ScanProgress* scan = nullptr) {
  detail::wait_filled(pieces);  // bytes still arriving (FillGate): before reading them
  if (const std::optional<std::uint32_t> known = zip::known_crc_of(pieces)) {
    if (scan) scan->reached(pieces_size(pieces));
    return *known;
  }
  std::uint32_t crc = 0;
  std::uint64_t offset = 0;
  for (const auto& p : pieces)
    for (std::uint64_t at = 0; at < p.size(); at += kScanStep) {
      const std::uint64_t n = std::min<std::uint64_t>(kScanStep, p.size() - at);
      crc = detail::crc32_update(crc, p.span().subspan(at, n));
      offset += n;
      if (scan) scan->reached(offset);
    }
  return crc;
}

// Byte-for-byte equality of two concatenations, reporting how far into `a`
// it read to `scan` if given.
bool same_bytes(const std::vector<Bytes>& a, const std::vector<Bytes>& b,
                ScanProgress* scan = nullptr) {
  detail::wait_filled(a);
  std::size_t ia = 0, ib = 0;
  std::uint64_t oa = 0, ob = 0, done = 0;
  for (;;) {
    while (ia < a.size() && oa == a[ia].size()) ++ia, oa = 0;
    while (ib < b.size() && ob == b[ib].size()) ++ib, ob = 0;
    if (ia == a.size() || ib == b.size()) return ia == a.size() && ib == b.size();
    std::uint64_t n = std::min({a[ia].size() - oa, b[ib].size() - ob, kScanStep});
    if (std::memcmp(a[ia].data() + oa, b[ib].data() + ob, n) != 0) return false;
    oa += n;
    ob += n;
    done += n;
    if (scan) scan->reached(done);
  }
}

// The blob that the tag folder file `rest` is, or nullopt (an other file).
std::optional<BlobKey> blob_key_of(std::string_view rest) {
  if (auto f = format::blob_file_of(rest)) return BlobKey{f->kind, f->index, f->format};
  return std::nullopt;
}

Plan plan_from(const Archive::Impl* old) {
  Plan plan;
  if (!old) return plan;
  plan.metadata = old->metadata;
  plan.comment = old->directory.comment;
  for (std::size_t t = 0; t < old->tags.size(); ++t) {
    TagPlan tp;
    tp.name = old->tags[t];
    tp.rows[0] = old->tables[t].params;
    tp.rows[1] = old->tables[t].updater;
    tp.has_updater = old->tables[t].has_updater;
    tp.damage = old->tables[t].damage;
    plan.tags.push_back(std::move(tp));
  }
  for (const auto& e : old->directory.entries) {
    Content c;
    c.old = &e;
    c.size = e.uncompressed_size;
    c.compression = e.stored() ? Compression::store : Compression::deflate;
    c.crc = e.crc32;
    auto slash = e.name.find('/');
    if (slash == std::string::npos) {
      if (e.name != format::kMetadataEntry && e.name != format::kTagsEntry)
        plan.root_others.emplace_back(e.name, std::move(c));
      continue;
    }
    if (e.name.ends_with("/")) continue;  // folder entries are implied
    TagPlan* tp = plan.find(e.name.substr(0, slash));
    std::string rest = e.name.substr(slash + 1);
    if (rest == "params.txt" || rest == "updater.txt") {  // rows parsed above
      tp->old_tables[rest == "updater.txt" ? 1 : 0] = &e;
      continue;
    }
    if (auto key = blob_key_of(rest)) {
      auto& next = tp->next_index[static_cast<int>(key->kind)];
      next = std::max(next, key->index + 1);
      tp->blobs.emplace(*key, std::move(c));
    } else {
      tp->others.emplace_back(rest, std::move(c));
    }
  }
  return plan;
}

// Removes `tag`, moving blobs that other tags reference into the oldest such
// tag and rewriting every reference to them.
void remove_from_plan(Plan& plan, const std::string& tag) {
  std::size_t r = plan.position(tag);
  TagPlan removed = std::move(plan.tags[r]);
  plan.tags.erase(plan.tags.begin() + static_cast<std::ptrdiff_t>(r));
  for (auto& [key, content] : removed.blobs) {
    BlobRef old_ref{removed.name, key.index, key.format};
    TagPlan* heir = nullptr;
    for (auto& t : plan.tags)
      for (const auto& row : t.table(key.kind))
        if (row.ref == old_ref && !heir) heir = &t;
    if (!heir) continue;  // nothing references it: dropped with the tag
    BlobKey moved{key.kind, heir->next_index[static_cast<int>(key.kind)]++, key.format};
    heir->blobs.emplace(moved, std::move(content));
    for (auto& t : plan.tags)
      for (auto& row : t.table(key.kind))
        if (row.ref == old_ref) {
          row.ref = BlobRef{&t == heir ? std::string() : heir->name, moved.index, moved.format};
          t.tables_changed = true;
        }
  }
}

// Dedup matches only blobs stored with the compression the new one asks for:
// sharing a deflated blob would take zero-copy reads away from a parameter
// added as stored, and sharing a stored one would leave a parameter asked to
// be deflated uncompressed.
struct DedupIndex {
  // (kind and format, compression, size, crc) -> blobs with that content hash.
  std::map<std::tuple<int, Compression, std::uint64_t, std::uint32_t>,
           std::vector<std::pair<std::string, BlobKey>>>
      by_hash;
};

class AddContext {
 public:
  // `comparing` (may be null) hears of the bytes the dedup comparison reads.
  AddContext(Plan& plan, const Archive::Impl* old, bool dedup, Writer::Stats& stats,
             detail::ProgressTracker* comparing)
      : plan_(plan), old_(old), dedup_(dedup), stats_(stats), scan_(comparing) {}

  void add(const std::string& tag, const NewTag& contents) {
    if (plan_.find(tag)) throw format::tag_exists(plan_.find(tag)->name, ErrorContext{.tag = tag});
    if (dedup_) build_index();
    row_index_.clear();  // earlier operations may have changed the tables
    TagPlan tp;
    tp.name = tag;
    plan_.tags.push_back(std::move(tp));
    TagPlan& self = plan_.tags.back();
    const NewTag::Contents& staged = NewTag::Contents::of(contents);
    std::any decoded_graph, decoded_training_config;  // for check_graph_checkpoint
    for (const auto& e : staged.entries) {
      const auto kind = entry_kind_of(tag + "/" + e.relative_name);
      if (auto v = kind ? find_entry_validator(*kind) : nullptr) {
        try {
          std::any decoded = v(e.contents, Limits{});
          if (kind == EntryKind::graph) decoded_graph = std::move(decoded);
          if (kind == EntryKind::training_config) decoded_training_config = std::move(decoded);
        } catch (const Error& err) {
          throw err.with_context({.entry = tag + "/" + e.relative_name, .tag = tag});
        }
      }
    }
    // before any blob is stored
    check_graph_checkpoint(self, staged, std::move(decoded_graph),
                           std::move(decoded_training_config));
    for (const auto& p : staged.params) {
      BlobRow row;
      row.keys = {p.name};
      switch (p.source) {
        case NewTag::Contents::Param::Source::shared:
          row.ref = resolve_share(self, TableKind::params, p.from_tag, p.from_param, {});
          break;
        case NewTag::Contents::Param::Source::tensor:
          row.ref =
              store(self, TableKind::params, BlobFormat::tensor,
                    format::encode_tensor_blob(p.tensor).pieces, p.options.compression, p.name, {});
          break;
        case NewTag::Contents::Param::Source::embedding: {
          if (auto v = find_entry_validator(EntryKind::embedding)) {
            try {
              v(p.file, Limits{});
            } catch (const Error& e) {
              // The file has no entry name yet: the error names the
              // parameter (the validator's entry is a placeholder).
              ErrorContext context = e.context();
              context.entry.clear();
              context.tag = tag;
              throw e.reworded("embedding parameter '" + p.name + "': " + e.message(), context);
            }
          }
          row.ref = store(self, TableKind::params, BlobFormat::fifu, {p.file}, Compression::store,
                          p.name, {});
          break;
        }
      }
      self.table(TableKind::params).push_back(std::move(row));
    }
    for (const auto& s : staged.updater_states) {
      BlobRow row;
      row.keys = {s.variable, s.state};
      row.ref = s.shared ? resolve_share(self, TableKind::updater, s.from_tag, s.variable, s.state)
                         : store(self, TableKind::updater, BlobFormat::tensor,
                                 format::encode_tensor_blob(s.tensor).pieces, s.options.compression,
                                 s.variable, s.state);
      self.table(TableKind::updater).push_back(std::move(row));
    }
    self.has_updater = !staged.updater_states.empty();
    for (const auto& e : staged.entries) {
      Content c;
      c.pieces = {e.contents};
      c.size = e.contents.size();
      c.compression = e.compression;
      self.others.emplace_back(e.relative_name, std::move(c));
    }
  }

 private:
  // A tag with graph.fb must be a consistent graph checkpoint (GRAPH.md
  // section 4), as Archive::verify checks it: the staged-tag validator sees
  // the new tensors' types and, for shared values, those of the blobs they
  // share (their headers only). `decoded_graph` and `decoded_training_config`:
  // what the entry validators returned (StagedTag).
  void check_graph_checkpoint(const TagPlan& self, const NewTag::Contents& staged,
                              std::any decoded_graph, std::any decoded_training_config) {
    const StagedTagValidator validate = entry_validators().staged_tag_validator();
    if (!validate) return;
    StagedTag tag{.tag = self.name,
                  .decoded_graph = std::move(decoded_graph),
                  .decoded_training_config = std::move(decoded_training_config)};
    for (const auto& e : staged.entries) {
      const auto kind = entry_kind_of(self.name + "/" + e.relative_name);
      if (kind == EntryKind::graph) tag.graph = &e.contents;
      if (kind == EntryKind::training_config) tag.training_config = &e.contents;
    }
    if (!tag.graph) return;
    std::deque<Shape> shapes;  // of shared blobs, referenced by the values
    auto shared = [&](TableKind kind, std::string_view name, std::string_view state,
                      const BlobRef& ref) {
      StoredValue v{name, state};
      if (ref.format != BlobFormat::tensor) {
        v.tensor = false;
        return v;
      }
      format::BlobHeader h = header_of(kind, ref);
      v.dtype = h.dtype;
      v.shape = &shapes.emplace_back(std::move(h.shape));
      return v;
    };
    std::vector<StoredValue> params, states;
    for (const auto& p : staged.params) {
      switch (p.source) {
        case NewTag::Contents::Param::Source::tensor:
          params.push_back({p.name, {}, p.tensor.dtype(), &p.tensor.shape()});
          break;
        case NewTag::Contents::Param::Source::embedding:
          params.push_back({.name = p.name, .tensor = false});
          break;
        case NewTag::Contents::Param::Source::shared:
          params.push_back(
              shared(TableKind::params, p.name, {},
                     resolve_share(self, TableKind::params, p.from_tag, p.from_param, {})));
          break;
      }
    }
    for (const auto& s : staged.updater_states)
      states.push_back(
          s.shared
              ? shared(TableKind::updater, s.variable, s.state,
                       resolve_share(self, TableKind::updater, s.from_tag, s.variable, s.state))
              : StoredValue{s.variable, s.state, s.tensor.dtype(), &s.tensor.shape()});
    tag.params = params;
    tag.states = states;
    validate(tag, Limits{});
  }

  // The header of the tensor blob `ref` (of the old archive or staged).
  format::BlobHeader header_of(TableKind kind, const BlobRef& ref) const {
    const std::string entry = format::blob_entry_name(ref, ref.tag, kind);
    const Content* found = nullptr;
    if (const TagPlan* owner = plan_.find(ref.tag)) {
      auto it = owner->blobs.find(BlobKey{kind, ref.index, ref.format});
      if (it != owner->blobs.end()) found = &it->second;
    }
    if (!found)
      throw Error(ErrorCode::corrupt, "the shared blob does not exist",
                  ErrorContext{.entry = entry, .tag = ref.tag});
    const Content& c = *found;
    auto prefix = [&](std::uint64_t n) -> Bytes {
      if (c.old) return old_->reader.read_prefix(*c.old, n);
      return c.pieces.empty() ? Bytes() : c.pieces.front();  // encode_tensor_blob's header
    };
    try {
      Bytes p = prefix(4);
      if (p.size() < 4) throw Error(ErrorCode::corrupt, "a tensor blob shorter than 4 bytes");
      const std::uint64_t size = format::blob_header_size(p.span(), c.size, Limits{});
      p = prefix(size);
      if (p.size() < size) throw Error(ErrorCode::corrupt, "the tensor blob's header is cut short");
      return format::read_blob_header(p.span(), c.size, Limits{});
    } catch (const Error& err) {
      throw err.with_context(ErrorContext{.entry = entry, .tag = ref.tag});
    }
  }

  // The blob that row (first[, second]) of tag `from_tag` refers to.
  BlobRef resolve_share(const TagPlan& self, TableKind kind, const std::string& from_tag,
                        std::string_view first, std::string_view second) {
    const TagPlan* source = plan_.find(from_tag);
    if (!source || source == &self)
      throw Error(ErrorCode::not_found, "cannot share from tag '" + from_tag + "': no such tag",
                  ErrorContext{.tag = self.name});
    if (const BlobRow* row = row_of(*source, kind, first, second))
      return BlobRef{row->ref.tag.empty() ? source->name : row->ref.tag, row->ref.index,
                     row->ref.format};
    const std::string shown = kind == TableKind::params
                                  ? std::string(first)
                                  : std::string(first) + "/" + std::string(second);
    throw Error(ErrorCode::not_found,
                "cannot share '" + shown + "': tag '" + source->name + "' has no such " +
                    (kind == TableKind::params ? "parameter" : "updater state"),
                ErrorContext{.tag = self.name});
  }

  // The row of `source`'s `kind` table with keys `first` (params: the
  // name; updater: the variable) and `second` (updater: the state), or
  // null. Rows are indexed by format::row_key_hash, as the reader indexes
  // them, once per source table and add(): n lookups cost O(n).
  const BlobRow* row_of(const TagPlan& source, TableKind kind, std::string_view first,
                        std::string_view second) {
    const auto& rows = const_cast<TagPlan&>(source).table(kind);
    auto [cached, fresh] = row_index_.try_emplace({source.name, static_cast<int>(kind)});
    if (fresh) {
      cached->second = detail::PositionIndex(rows.size());
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const auto& k = rows[r].keys;
        const std::string_view f = k[0], s = k.size() > 1 ? std::string_view(k[1]) : "";
        cached->second.insert(format::row_key_hash(kind, f, s), r, [&](std::size_t p) {
          return format::row_has_keys(rows[p], kind, f, s);
        });
      }
    }
    const std::size_t at = cached->second.find(
        format::row_key_hash(kind, first, second),
        [&](std::size_t p) { return format::row_has_keys(rows[p], kind, first, second); });
    return at == detail::PositionIndex::npos ? nullptr : &rows[at];
  }

  // The blob that row (first[, second]) of the newest tag before `self`
  // refers to, if it has that format and compression and lives uncompressed
  // in memory or the old archive: the likely duplicate when a checkpoint
  // repeats the previous one's unchanged tensors.
  std::optional<std::pair<BlobRef, const Content*>> namesake(const TagPlan& self, TableKind kind,
                                                             BlobFormat fmt,
                                                             Compression compression,
                                                             std::string_view first,
                                                             std::string_view second) {
    if (plan_.tags.size() < 2 || &plan_.tags.back() != &self) return std::nullopt;
    const TagPlan& prev = plan_.tags[plan_.tags.size() - 2];
    const BlobRow* row = row_of(prev, kind, first, second);
    if (!row || row->ref.format != fmt) return std::nullopt;
    const TagPlan* owner = row->ref.tag.empty() ? &prev : plan_.find(row->ref.tag);
    if (!owner) return std::nullopt;
    auto it = owner->blobs.find(BlobKey{kind, row->ref.index, fmt});
    if (it == owner->blobs.end() || it->second.compression != compression) return std::nullopt;
    if (it->second.old && !it->second.old->stored()) return std::nullopt;  // CRC path first
    return std::make_pair(BlobRef{owner->name, row->ref.index, fmt}, &it->second);
  }

  // Adds a blob to `self`, or with dedup returns the existing blob with the
  // same bytes and the same compression (see DedupIndex). Unchanged tensors of a new checkpoint
  // usually equal their namesake in the previous tag: that one is compared first (a changed tensor
  // differs early, an unchanged one costs one comparison pass and no hashing); otherwise the blob
  // is hashed and compared with every blob of the same size and CRC-32 (stored CRCs of the old
  // archive are reused).
  BlobRef store(TagPlan& self, TableKind kind, BlobFormat fmt, std::vector<Bytes> pieces,
                Compression compression, std::string_view first, std::string_view second) {
    Content c;
    c.size = pieces_size(pieces);
    c.compression = compression;
    if (dedup_) {
      scan_.start();
      if (auto hit = namesake(self, kind, fmt, compression, first, second);
          hit && hit->second->size == c.size &&
          same_bytes(pieces, content_bytes(*hit->second), &scan_)) {
        ++stats_.blobs_deduplicated;
        return hit->first;
      }
      c.crc = pieces_crc(pieces, &scan_);
      auto hash_key = std::make_tuple(static_cast<int>(kind) * 2 + static_cast<int>(fmt),
                                      compression, c.size, *c.crc);
      for (const auto& [owner, key] : index_.by_hash[hash_key]) {
        TagPlan* t = plan_.find(owner);
        const Content& other = t->blobs.at(key);
        if (same_bytes(pieces, content_bytes(other))) {
          ++stats_.blobs_deduplicated;
          return BlobRef{t == &self ? std::string() : t->name, key.index, key.format};
        }
      }
      BlobKey key{kind, self.next_index[static_cast<int>(kind)], fmt};
      index_.by_hash[hash_key].emplace_back(self.name, key);
    }
    BlobKey key{kind, self.next_index[static_cast<int>(kind)]++, fmt};
    c.pieces = std::move(pieces);
    self.blobs.emplace(key, std::move(c));
    ++stats_.blobs_written;
    return BlobRef{"", key.index, key.format};
  }

  std::vector<Bytes> content_bytes(const Content& c) const {
    if (!c.old) return c.pieces;
    return {old_->reader.read(*c.old, false)};
  }

  void build_index() {
    index_.by_hash.clear();
    for (auto& t : plan_.tags)
      for (auto& [key, c] : t.blobs) {
        if (!c.crc) c.crc = pieces_crc(c.pieces);
        int kind = static_cast<int>(key.kind) * 2 + static_cast<int>(key.format);
        index_.by_hash[std::make_tuple(kind, c.compression, c.size, *c.crc)].emplace_back(t.name,
                                                                                          key);
      }
  }

  Plan& plan_;
  const Archive::Impl* old_;
  bool dedup_;
  Writer::Stats& stats_;
  ScanProgress scan_;
  DedupIndex index_;
  // (source tag, table kind) -> its rows by keys, for row_of.
  std::map<std::pair<std::string, int>, detail::PositionIndex> row_index_;
};

struct AddOp {
  std::string tag;
  NewTag contents;
  bool replace = false;  // replace_tag: remove the tag of that name first, if any
};
struct RemoveOp {
  std::string tag;
};
struct KeepLastOp {
  std::size_t count;
};
struct GcOp {};

// Drops every blob that no table row references.
void drop_unreferenced_blobs(Plan& plan, Writer::Stats& stats) {
  std::set<std::pair<std::string, BlobKey>> used;
  for (auto& t : plan.tags)
    for (TableKind kind : {TableKind::params, TableKind::updater})
      for (const auto& row : t.table(kind))
        used.emplace(row.ref.tag.empty() ? t.name : row.ref.tag,
                     BlobKey{kind, row.ref.index, row.ref.format});
  for (auto& t : plan.tags)
    std::erase_if(t.blobs, [&](const auto& blob) {
      if (used.count({t.name, blob.first})) return false;
      ++stats.blobs_collected;
      stats.bytes_collected += blob.second.size;
      return true;
    });
}

// Bytes to be written for `c`.
std::uint64_t content_size(const Content& c) {
  return c.old ? c.old->compressed_size : c.size;
}

// Whether the planned entry `name` holding `c` is the old archive's entry of
// that name, which an in-place commit keeps where it is.
bool in_place(const std::string& name, const Content& c) {
  return c.old && c.old->name == name;
}

// Whether an in-place commit keeps the old tag's params.txt and updater.txt.
bool tables_in_place(const TagPlan& t) {
  return t.old_tables[0] && !t.tables_changed;
}

// Writes the entries of the plan but tags.txt: everything (rewrite), or
// with `changes_only` (in-place commits) those that are not in the old
// archive at their place: new tags, changed tables, blobs that moved. With
// `keep_old` (s3:// uploads), old entries are declared kept in the sink
// (copied server-side) instead of copied through this process.
void emit_tags(zip::StreamZipWriter& zw, const Plan& plan, const Archive::Impl* old_impl,
               bool changes_only, bool keep_old = false) {
  auto put = [&](const std::string& name, const Content& c) {
    if (changes_only && in_place(name, c)) return;
    if (c.old && keep_old)
      zw.add_kept(name, *c.old, old_impl->reader.file().span());
    else if (c.old)
      zw.add_raw(name, *c.old,
                 old_impl->reader.file().slice(c.old->data_offset, c.old->compressed_size));
    else {
      detail::wait_filled(c.pieces);  // new bytes, maybe still arriving (FillGate)
      if (c.compression == Compression::deflate)
        zw.add_deflated(name, c.pieces);
      else
        zw.add_stored(name, c.pieces, c.crc ? c.crc : zip::known_crc_of(c.pieces));
    }
  };
  auto text = [](const std::string& s) { return std::vector<Bytes>{Bytes::copy_of(s)}; };
  if (!changes_only) {
    zw.add_stored(std::string(format::kMetadataEntry), text(format::write_metadata(plan.metadata)));
    for (const auto& [name, c] : plan.root_others) put(name, c);
  }
  for (const auto& t : plan.tags) {
    if (!changes_only || !tables_in_place(t)) {
      zw.add_stored(t.name + "/params.txt",
                    text(format::write_blob_table(t.rows[0], TableKind::params)));
      if (t.has_updater || !t.rows[1].empty())
        zw.add_stored(t.name + "/updater.txt",
                      text(format::write_blob_table(t.rows[1], TableKind::updater)));
    }
    for (const auto& [rel, c] : t.others) put(t.name + "/" + rel, c);
    for (const auto& [key, c] : t.blobs) put(t.entry_name(key), c);
  }
}

// A complete archive: every entry, then tags.txt last (the tail that the
// next append overwrites, FORMAT.md section 8.1).
void emit_all(zip::StreamZipWriter& zw, const Plan& plan, const Archive::Impl* old_impl,
              bool keep_old = false) {
  zw.set_comment(plan.comment);
  emit_tags(zw, plan, old_impl, false, keep_old);
  std::vector<std::string> names;
  for (const auto& t : plan.tags) names.push_back(t.name);
  zw.add_stored(std::string(format::kTagsEntry), {Bytes::copy_of(format::write_tags_file(names))});
}

// Bytes of entry data that emit_tags writes for the tags (the tables aside).
std::uint64_t expected_bytes(const Plan& plan, bool changes_only) {
  std::uint64_t n = 0;
  for (const auto& t : plan.tags) {
    for (const auto& [key, c] : t.blobs)
      if (!changes_only || !in_place(t.entry_name(key), c)) n += content_size(c);
    for (const auto& [rel, c] : t.others)
      if (!changes_only || !in_place(t.name + "/" + rel, c)) n += content_size(c);
  }
  return n;
}

// The old entries that an in-place commit of `plan` keeps where they are.
std::set<const zip::EntryInfo*> kept_in_place(const Plan& plan, const Archive::Impl& old) {
  std::set<const zip::EntryInfo*> kept;
  if (const zip::EntryInfo* m = old.directory.find(format::kMetadataEntry)) kept.insert(m);
  auto keep = [&](const std::string& name, const Content& c) {
    if (in_place(name, c)) kept.insert(c.old);
  };
  for (const auto& [name, c] : plan.root_others) keep(name, c);
  for (const auto& t : plan.tags) {
    if (tables_in_place(t))
      for (const zip::EntryInfo* e : t.old_tables)
        if (e) kept.insert(e);
    for (const auto& [rel, c] : t.others) keep(t.name + "/" + rel, c);
    for (const auto& [key, c] : t.blobs) keep(t.entry_name(key), c);
  }
  return kept;
}

// An upper bound of where an in-place commit of `plan` ends, for
// AppendSession::protect: the old tail's bytes (its entries' directory
// records and end records are in the new tail again, or fewer of them),
// then per entry emit_tags(changes_only) writes its local header (with a
// ZIP64 field and the largest padding), its data (deflated: at most 1/256 +
// 1 KiB more than the input) and its directory record, the new tags.txt's
// added lines, and slack for the ZIP64 end records.
std::uint64_t append_end_bound(const Plan& plan, std::uint64_t old_size) {
  constexpr std::uint64_t kLocal = 30 + 20 + 67, kCentral = 46 + 28 + 67;
  std::uint64_t end = old_size + 4096;
  auto entry = [&](const std::string& name, std::uint64_t size, bool deflated) {
    end += kLocal + kCentral + 2 * name.size() + size + (deflated ? size / 256 + 1024 : 0);
  };
  auto content = [&](const std::string& name, const Content& c) {
    if (!in_place(name, c))
      entry(name, content_size(c), !c.old && c.compression == Compression::deflate);
  };
  for (const auto& t : plan.tags) {
    end += t.name.size() + 1;
    if (!tables_in_place(t)) {
      entry(t.name + "/params.txt", format::write_blob_table(t.rows[0], TableKind::params).size(),
            false);
      entry(t.name + "/updater.txt", format::write_blob_table(t.rows[1], TableKind::updater).size(),
            false);
    }
    for (const auto& [rel, c] : t.others) content(t.name + "/" + rel, c);
    for (const auto& [key, c] : t.blobs) content(t.entry_name(key), c);
  }
  return end;
}

// Throws when `plan` keeps a tag whose tables could not be read: rewriting
// it would lose what its unreadable tables held.
void check_undamaged_plan(const Plan& plan, const std::string& archive) {
  for (const auto& t : plan.tags)
    if (t.damage)
      throw Error(t.damage->code(),
                  "the tag's tables are damaged (" + t.damage->message() +
                      "); remove the tag (rm-tag, Writer::remove_tag) before changing the archive",
                  ErrorContext{.archive = archive,
                               .entry = t.damage->context().entry,
                               .tag = t.name,
                               .line = t.damage->context().line});
}

}  // namespace

class Writer::Impl {
 public:
  // The archive: `path` is where its file is (symbolic links followed once,
  // at open: io::resolve_archive_path), `shown` what the caller named, which
  // every error names.
  std::filesystem::path path;
  std::filesystem::path shown;
  // The archive's descriptor while commit() holds the writer lock; -1 when
  // there was no archive.
  int archive_fd = -1;
  WriterOptions options;
  std::vector<std::variant<AddOp, RemoveOp, KeepLastOp, GcOp>> ops;
  // Staged metadata changes, applied in order at commit to the metadata the
  // archive has then (read under the lock).
  std::vector<std::function<void(Metadata&)>> metadata_edits;
  std::vector<std::string> current_tags;  // as of open / last commit
  Stats last_stats;                       // of the last commit
  // The archive as parsed by open(), with the identity the file had then:
  // commit() reuses it if the file is still the same, instead of parsing it
  // again (it keeps the file mapped until then). Kept only when the read
  // itself found no valid append journal before and after it
  // (zip::SnapshotFile::identity): while one is there, open() reads the
  // previous archive (the journal's), and the removal that commits the
  // append leaves the file's identity as it was. Checks of the journal made
  // around Archive::open would not do: an append may start after such a
  // check and have set its new size before the read begins.
  struct Snapshot {
    Archive archive;
    io::FileIdentity identity;
  };
  std::optional<Snapshot> snapshot;

  void refresh() {
    current_tags.clear();
    snapshot.reset();
    if (!io::identity_of(path)) return;
    Archive archive = Archive::open(path);
    current_tags = archive.tags();
    const std::optional<io::FileIdentity> read = Archive::Impl::of(archive).snapshot_file.identity;
    if (read && io::identity_of(path) == read)
      snapshot.emplace(Snapshot{std::move(archive), *read});
  }

  // The archive as it is now (under the lock), or nullopt if there is none.
  std::optional<Archive> current_archive() {
    const std::optional<io::FileIdentity> now = io::identity_of(path);
    std::optional<Archive> out;
    if (now && snapshot && snapshot->identity == *now)
      out.emplace(std::move(snapshot->archive));
    else if (now)
      out.emplace(Archive::open(path));
    snapshot.reset();
    return out;
  }

  std::vector<std::string> staged_tags() const {
    std::vector<std::string> tags = current_tags;
    auto remove = [&](std::string_view tag) {
      std::erase_if(tags, [&](const std::string& t) { return format::same_tag(t, tag); });
    };
    for (const auto& op : ops) {
      if (auto* add = std::get_if<AddOp>(&op)) {
        if (add->replace) remove(add->tag);
        tags.push_back(add->tag);
      }
      if (auto* rm = std::get_if<RemoveOp>(&op)) remove(rm->tag);
      if (auto* keep = std::get_if<KeepLastOp>(&op); keep && tags.size() > keep->count)
        tags.erase(tags.begin(), tags.end() - static_cast<std::ptrdiff_t>(keep->count));
    }
    return tags;
  }

  ErrorContext context() const { return ErrorContext{.archive = shown.string()}; }
  // The tag the staged changes add (add_tag or replace_tag) if they add
  // one (in any letter case); "" otherwise.
  std::string added_tag() const {
    std::string added;
    for (const auto& op : ops)
      if (const auto* add = std::get_if<AddOp>(&op)) {
        if (!added.empty() && !format::same_tag(added, add->tag)) return {};
        added = add->tag;
      }
    return added;
  }
  // `e` naming the archive as the caller did (not its resolved target or
  // temporary file).
  Error as_shown(const Error& e) const {
    ErrorContext c = e.context();
    c.archive = shown.string();
    return e.reworded(e.message(), std::move(c));
  }

  // commit() runs these phases in order.
  void commit();
  // Throws Error(cancelled) once cancel_requested().
  void check_cancel() const;
  // Nothing to write: the stats and tags of `archive` as it is.
  void keep_unchanged(const Archive& archive);
  // Under the lock: the archive after removing stale temporary files and
  // rolling back an interrupted append, or nullopt if there is none.
  std::optional<Archive> recovered_archive();
  // The archive's plan after the staged operations, and the stats so far.
  struct StagedPlan {
    Plan plan;
    Stats stats;
  };
  StagedPlan plan_staged(const Archive::Impl* old_impl) const;
  // The progress of dedup's compare stage (none without dedup or callback).
  std::optional<detail::ProgressTracker> compare_tracker() const;
  // Throws when the plan keeps a tag whose tables could not be read.
  void check_undamaged(const Plan& plan) const;
  // Whether the staged operations only add and remove tags.
  bool only_tag_changes() const;
  // Writes the plan (in place or by rewriting) and consumes the staged
  // operations once the new archive is visible.
  void write_staged(StagedPlan& staged, const Archive::Impl* old_impl);
  // plan_staged, check_undamaged and write_staged from the archive as it
  // is now (nullptr: none).
  void plan_and_write(const Archive::Impl* old_impl);
  bool appendable(const Archive::Impl& old) const;

  // s3://BUCKET/KEY archives (remote/s3_upload_sink.hpp): one object,
  // replaced by a multipart upload completed on condition that the object
  // is still the version planned from (If-Match), or still absent
  // (If-None-Match).
  bool s3 = false;
  using S3Old = checkpoint::S3OldArchive;
  std::optional<S3Old> s3_old;  // during commit()
  std::optional<S3Old> open_s3() const;
  // The commit's upload, created (and stale ones cleaned up) while
  // open_s3() reads the old object; upload() takes it over. During commit().
  std::shared_ptr<remote::S3UploadStart> s3_start;
  std::shared_ptr<remote::S3UploadStart> start_s3_upload() const;
  void refresh_s3();
  // Uploads the result of `plan`: an append (every old entry kept, only
  // tags added) copies the old object's bytes before its tail server-side
  // and uploads the new entries and the tail; anything else uploads the
  // whole archive.
  void upload(const Plan& plan, const Archive::Impl* old_impl,
              const std::optional<std::set<const zip::EntryInfo*>>& kept, Stats& stats,
              bool* visible);
  // Whether an in-place commit of `plan` would leave more freed bytes than
  // live ones (then it rewrites, which drops them).
  bool mostly_free(const std::set<const zip::EntryInfo*>& kept, const Plan& plan,
                   const Archive::Impl& old) const;
  // Both set `*visible` once the new archive is what readers see; if they
  // throw after that, the commit happened but may not be durable.
  void rewrite(const Plan& plan, const Archive::Impl* old_impl, Stats& stats, bool* visible);
  // `kept`: the old entries that stay where they are (kept_in_place).
  void append_to(const Plan& plan, const Archive::Impl& old,
                 const std::set<const zip::EntryInfo*>& kept, Stats& stats, bool* visible);
  // After an in-place commit: formats the freed ranges before the old tail
  // (the bytes that no kept entry covers) as free entries.
  void mark_free_ranges(const std::set<const zip::EntryInfo*>& kept, const Archive::Impl& old,
                        std::uint64_t tail_start, Stats& stats);
};

void Writer::Impl::commit() {
  check_cancel();
  if (s3) {
    if (ops.empty() && metadata_edits.empty()) {
      last_stats = {};
      return;
    }
    struct Done {
      Impl& impl;
      ~Done() {
        impl.s3_old.reset();
        impl.s3_start.reset();  // not taken (a failed commit): aborted
      }
    } done{*this};
    // A commit refused because another writer's commit came first (its
    // upload aborted, nothing of it visible) is planned again against the
    // object as it is now, as a caller's retry would, at most kS3Replans
    // times: the staged changes name tags, parameters and edits, not the
    // version they were staged on. A conflict they cannot resolve is
    // reported by the new plan (a tag another writer added is there).
    for (int replans = 0;; ++replans) {
      try {
        s3_start = start_s3_upload();
        s3_old = open_s3();
        plan_and_write(s3_old ? s3_old->archive.get() : nullptr);
        return;
      } catch (const Error& e) {
        if (!remote::refused_for_another_writer(e) || replans == remote::kS3Replans ||
            (ops.empty() && metadata_edits.empty()))
          throw;
        // Progress reports start again from 0: say why.
        if (options.on_notice) options.on_notice(remote::planned_again_notice(e, replans + 1));
      }
      s3_start.reset();  // aborted
      s3_old.reset();
      check_cancel();
    }
  }
  // Nothing staged and no interrupted append to recover: the archive stays
  // as it is, so no lock is needed, nor permission to write it.
  if (ops.empty() && metadata_edits.empty() &&
      !std::filesystem::exists(io::append_journal_path(path))) {
    if (std::optional<Archive> old = current_archive()) return keep_unchanged(*old);
  }
  // A signal that interrupts the wait for another writer's lock asks the
  // progress callback (0 of 0 bytes) whether to go on waiting: Python's
  // Ctrl-C is only seen there (WriterOptions::progress).
  io::FileLock lock(path, options.on_wait,
                    [this] { return !options.progress || options.progress(Progress{}); });
  check_cancel();
  archive_fd = lock.archive_fd();
  struct ForgetFd {
    int& fd;
    ~ForgetFd() { fd = -1; }
  } forget{archive_fd};
  std::optional<Archive> old = recovered_archive();
  if (old && ops.empty() && metadata_edits.empty()) return keep_unchanged(*old);
  plan_and_write(old ? &Archive::Impl::of(*old) : nullptr);
}

void Writer::Impl::plan_and_write(const Archive::Impl* old_impl) {
  StagedPlan staged = plan_staged(old_impl);
  check_undamaged(staged.plan);
  write_staged(staged, old_impl);
}

void Writer::Impl::check_cancel() const {
  if (cancel_requested())
    throw Error(ErrorCode::cancelled, "save cancelled (interrupted)", context());
}

void Writer::Impl::keep_unchanged(const Archive& archive) {
  last_stats = {};
  current_tags = archive.tags();
}

std::optional<Archive> Writer::Impl::recovered_archive() {
  io::remove_stale_temp_files(path);
  try {
    if (auto rolled_back = zip::recover_append(path, true); rolled_back && options.on_notice)
      options.on_notice(zip::rollback_notice(*rolled_back));
  } catch (const Error& e) {
    throw e.with_context(context());
  }
  return current_archive();
}

std::optional<detail::ProgressTracker> Writer::Impl::compare_tracker() const {
  std::optional<detail::ProgressTracker> comparing;
  if (!options.dedup || !options.progress) return comparing;
  comparing.emplace(options.progress, "save", context(), Progress::Stage::compare);
  for (const auto& op : ops)
    if (const auto* add = std::get_if<AddOp>(&op)) {
      for (const auto& p : NewTag::Contents::of(add->contents).params) {
        if (p.source == NewTag::Contents::Param::Source::tensor)
          comparing->add_to_total(p.tensor.values().size());
        else if (p.source == NewTag::Contents::Param::Source::embedding)
          comparing->add_to_total(p.file.size());
      }
      for (const auto& u : NewTag::Contents::of(add->contents).updater_states)
        if (!u.shared) comparing->add_to_total(u.tensor.values().size());
    }
  return comparing;
}

Writer::Impl::StagedPlan Writer::Impl::plan_staged(const Archive::Impl* old_impl) const {
  StagedPlan staged{plan_from(old_impl), {}};
  Plan& plan = staged.plan;
  for (const auto& edit : metadata_edits) edit(plan.metadata);
  plan.metadata.writer = "modelzip " MODELZIP_VERSION;
  format::check_metadata(plan.metadata);  // refused before anything is written
  // Dedup reads every new tensor (and the blobs it may equal) before
  // anything is written: a stage of its own, over the new tensors' bytes.
  std::optional<detail::ProgressTracker> comparing = compare_tracker();
  AddContext adder(plan, old_impl, options.dedup, staged.stats, comparing ? &*comparing : nullptr);
  for (const auto& op : ops) {
    if (const auto* add = std::get_if<AddOp>(&op)) {
      if (const TagPlan* replaced = add->replace ? plan.find(add->tag) : nullptr)
        remove_from_plan(plan, replaced->name);
      adder.add(add->tag, add->contents);
    } else if (const auto* keep = std::get_if<KeepLastOp>(&op)) {
      while (plan.tags.size() > keep->count) remove_from_plan(plan, plan.tags.front().name);
    } else if (std::holds_alternative<GcOp>(op)) {
      drop_unreferenced_blobs(plan, staged.stats);
    } else {
      const auto& rm = std::get<RemoveOp>(op);
      TagPlan* t = plan.find(rm.tag);
      if (!t)
        throw Error(ErrorCode::not_found, "no such tag to remove",
                    ErrorContext{.archive = shown.string(), .tag = rm.tag});
      remove_from_plan(plan, t->name);
    }
  }
  if (comparing) comparing->finish();
  return staged;
}

void Writer::Impl::check_undamaged(const Plan& plan) const {
  check_undamaged_plan(plan, path.string());
}

bool Writer::Impl::only_tag_changes() const {
  return metadata_edits.empty() && std::none_of(ops.begin(), ops.end(), [](const auto& op) {
           return std::holds_alternative<GcOp>(op);
         });
}

void Writer::Impl::write_staged(StagedPlan& staged, const Archive::Impl* old_impl) {
  const Plan& plan = staged.plan;
  // Once the new archive is visible, the staged changes are done, even if
  // making them durable failed afterwards: a retry must not repeat them.
  bool visible = false;
  auto consume_staged = [&] {
    std::vector<std::string> tag_names;
    for (const auto& t : plan.tags) tag_names.push_back(t.name);
    last_stats = staged.stats;
    ops.clear();
    metadata_edits.clear();
    current_tags = tag_names;
  };
  try {
    std::optional<std::set<const zip::EntryInfo*>> kept;
    if (options.append && old_impl && only_tag_changes() && appendable(*old_impl))
      kept = kept_in_place(plan, *old_impl);
    if (s3)
      upload(plan, old_impl, kept, staged.stats, &visible);
    else if (kept && !mostly_free(*kept, plan, *old_impl))
      append_to(plan, *old_impl, *kept, staged.stats, &visible);
    else
      rewrite(plan, old_impl, staged.stats, &visible);
  } catch (...) {
    if (visible) consume_staged();
    throw;
  }
  consume_staged();
}

// Appending in place needs an archive in the layout modelzip writes:
// tags.txt last, no unused bytes, nothing after the end record. Others
// (written by modelzip 0.1.0, or by other tools) are rewritten once, which
// puts them in that layout.
bool Writer::Impl::appendable(const Archive::Impl& old) const {
  return zip::appendable_in_place(old.directory, old.reader.file().span(), format::kTagsEntry);
}

void Writer::Impl::rewrite(const Plan& plan, const Archive::Impl* old_impl, Stats& stats,
                           bool* visible) {
  io::TempFile temp = io::TempFile::beside(path);
  try {
    io::OutputFile out(temp);
    if (archive_fd >= 0) io::keep_attributes(archive_fd, out.fd(), path);
    // Errors name the archive the user asked for, not the temporary file.
    zip::StreamZipWriter zw(out.fd(), path.string(), 0, expected_bytes(plan, false),
                            options.progress);
    if (options.durable && io::use_direct_writes(path, expected_bytes(plan, false)))
      zw.write_large_data_directly();
    emit_all(zw, plan, old_impl);
    stats.bytes_written = zw.finish();
    out.close();
    temp.commit(options.durable);
  } catch (const Error& e) {
    *visible = temp.committed();
    throw e.with_context(context());
  }
}

bool Writer::Impl::mostly_free(const std::set<const zip::EntryInfo*>& kept, const Plan& plan,
                               const Archive::Impl& old) const {
  std::uint64_t live = expected_bytes(plan, true);
  std::uint64_t freed = zip::unused_bytes(old.directory, old.reader.file().span());
  for (const auto& e : old.directory.entries) {
    const std::uint64_t n = zip::entry_extent(e).size;
    if (kept.count(&e))
      live += n;
    else if (e.name != format::kTagsEntry)
      freed += n;
  }
  return freed > live;
}

void Writer::Impl::append_to(const Plan& plan, const Archive::Impl& old,
                             const std::set<const zip::EntryInfo*>& kept, Stats& stats,
                             bool* visible) {
  // The tags this commit saves (new to the archive), for the journal.
  std::vector<std::string> saved;
  for (const auto& t : plan.tags)
    if (!t.old_tables[0]) saved.push_back(t.name);
  std::vector<std::string> names;
  for (const auto& t : plan.tags) names.push_back(t.name);
  std::uint64_t tail_start = 0;
  try {
    // Unless commit() returns, the session's destructor puts the old tail
    // back (or leaves the journal for the next writer).
    zip::AppendSession session(
        path, old.directory, old.reader.file(), std::string(format::kTagsEntry),
        {.durable = options.durable,
         .expected_bytes = expected_bytes(plan, true),
         .progress = options.progress,
         .direct_data = options.durable && io::use_direct_writes(path, expected_bytes(plan, true)),
         .keep_entry = [&](const zip::EntryInfo& e) { return kept.count(&e) > 0; },
         .tags = saved});
    tail_start = session.start_offset();
    // Until the new end records are in place, the file stays an ordinary
    // zip of the old archive (FORMAT.md section 8.1).
    session.protect(append_end_bound(plan, session.old_size()));
    emit_tags(session.writer(), plan, &old, true);
    try {
      stats.bytes_written =
          session.commit({Bytes::copy_of(format::write_tags_file(names))}) - session.start_offset();
    } catch (...) {
      *visible = session.committed();
      throw;
    }
    *visible = true;
  } catch (const Error& e) {
    if (*visible)
      throw e
          .reworded(
              "the change is visible, but finishing it in place failed (it may not survive "
              "a power loss): " +
                  e.message(),
              e.context())
          .with_context(context());
    throw e.with_context(context());
  }
  stats.appended = true;
  for (const auto& e : old.directory.entries)
    if (!kept.count(&e) && e.name != format::kTagsEntry)
      stats.bytes_freed += zip::entry_extent(e).size;
  mark_free_ranges(kept, old, tail_start, stats);
}

void Writer::Impl::mark_free_ranges(const std::set<const zip::EntryInfo*>& kept,
                                    const Archive::Impl& old, std::uint64_t tail_start,
                                    Stats& stats) {
  std::vector<zip::ByteRange> covered;
  covered.reserve(kept.size());
  for (const zip::EntryInfo* e : kept) covered.push_back(zip::entry_extent(*e));
  const std::vector<zip::ByteRange> gaps = zip::gaps_between(std::move(covered), tail_start);
  if (gaps.empty()) return;
  try {
    // The gaps lie before the old tail, which the commit did not change:
    // the old archive's mapping shows their bytes.
    const std::uint64_t written =
        zip::format_free_ranges(archive_fd, path.string(), old.reader.file().span(), gaps);
    if (written > 0 && options.durable && io::sys::fsync(archive_fd) != 0)
      io::throw_errno(path, "fsync failed");
    stats.bytes_written += written;
  } catch (const Error& e) {
    throw e
        .reworded(
            "the change is committed, but marking the removed entries' bytes as free entries "
            "failed (streaming zip readers may stop there; the next commit retries): " +
                e.message(),
            e.context())
        .with_context(context());
  }
}

// ---- s3:// archives ---------------------------------------------------------

#if MODELZIP_CAN_UPLOAD
std::shared_ptr<remote::S3UploadStart> Writer::Impl::start_s3_upload() const {
  return std::make_shared<remote::S3UploadStart>(
      std::make_shared<remote::S3Multipart>(path.string(), RemoteOptions{}),
      remote::stale_upload_age(path.string()));
}

std::optional<Writer::Impl::S3Old> Writer::Impl::open_s3() const {
  try {
    return checkpoint::open_s3_old(path.string());
  } catch (const Error& e) {
    // An interrupt stopped the read: the progress callback is asked first
    // (as by the upload's fetches), so that a caller that noticed the
    // interrupt itself (Python) stops in its own terms.
    if (e.code() == ErrorCode::cancelled && options.progress) options.progress(Progress{});
    throw;
  }
}

void Writer::Impl::refresh_s3() {
  // Only the tags: what a commit needs besides them is read by open_s3().
  current_tags.clear();
  try {
    // A 404 is expected (a new archive): no request asks S3 why.
    current_tags =
        Archive::Impl::open_url(path.string(), OpenOptions{}, remote::MissingObject::expected)
            .tags();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::not_found) throw;  // else a new archive
  }
}

void Writer::Impl::upload(const Plan& plan, const Archive::Impl* old_impl,
                          const std::optional<std::set<const zip::EntryInfo*>>& kept, Stats& stats,
                          bool* visible) {
  auto client = std::make_shared<remote::S3Multipart>(path.string(), RemoteOptions{});
  remote::S3UploadOptions upload_options;
  if (auto size = remote::env_size("MODELZIP_S3_PART_SIZE", path.string()))
    upload_options.part_size = *size;
  if (auto parts = remote::env_size("MODELZIP_S3_PARTS_IN_FLIGHT", path.string()))
    upload_options.parallel = static_cast<int>(std::min<std::uint64_t>(*parts, 1000));
  if (s3_old) {
    upload_options.condition.if_match = s3_old->opened.etag;
    upload_options.old_key = client->endpoint().key;
    upload_options.old_etag = s3_old->opened.etag;
    upload_options.old_file = s3_old->opened.file;
    upload_options.old_source = s3_old->opened.source;
  } else {
    upload_options.condition.if_none_match = true;
  }
  upload_options.started = std::move(s3_start);
  // Before server-side copies start and while the commit waits for parts
  // in flight, the progress callback is asked again with what it saw last,
  // or with {0, 0} before any report (it may cancel, e.g. on Ctrl-C in
  // Python, which only a callback notices).
  ProgressCallback progress = options.progress;
  if (progress) {
    auto last = std::make_shared<std::optional<Progress>>();
    progress = [inner = options.progress, last](const Progress& p) {
      *last = p;
      return inner(p);
    };
    upload_options.keep_going = [inner = options.progress, last] {
      return inner(last->value_or(Progress{}));
    };
  }
  remote::S3UploadSink sink(std::move(client), std::move(upload_options));
  if (old_impl && kept && !mostly_free(*kept, plan, *old_impl)) {
    // In place, as append_to does locally: the old entries the plan keeps
    // stay where they are, copied server-side with everything before the
    // old tail; removed entries' ranges become free entries (their new
    // local header uploaded, their bytes copied as the free entry's data);
    // the new entries and the new tail are uploaded after them.
    const zip::Directory& directory = old_impl->directory;
    const std::uint64_t tail = zip::tail_start(directory, format::kTagsEntry);
    checkpoint::keep_in_place(sink, *s3_old, *kept, tail);
    zip::StreamZipWriter zw(sink, path.string(), tail, expected_bytes(plan, true), progress);
    zw.set_comment(directory.comment);
    for (const auto& e : directory.entries)
      if (kept->count(&e)) zw.keep(e);
    emit_tags(zw, plan, old_impl, true, true);
    std::vector<std::string> names;
    for (const auto& t : plan.tags) names.push_back(t.name);
    zw.add_stored(std::string(format::kTagsEntry),
                  {Bytes::copy_of(format::write_tags_file(names))});
    zw.finish();
    stats.appended = true;
    for (const auto& e : directory.entries)
      if (!kept->count(&e) && e.name != format::kTagsEntry)
        stats.bytes_freed += zip::entry_extent(e).size;
  } else {
    // A rewrite: old entries the plan keeps are copied server-side where
    // they keep their local header (moved by a multiple of 64 bytes), else
    // their data is.
    zip::StreamZipWriter zw(sink, path.string(), 0, expected_bytes(plan, false), progress);
    emit_all(zw, plan, old_impl, old_impl != nullptr);
    zw.finish();
  }
  stats.bytes_written = sink.uploaded_bytes();
  check_cancel();  // the last point where an interrupt aborts the upload
  sink.commit();
  *visible = true;
}
#else
// Built without libcurl: Writer::open refuses s3:// URLs (remote::can_upload).
std::shared_ptr<remote::S3UploadStart> Writer::Impl::start_s3_upload() const {
  remote::refuse_write(path.native());
  return nullptr;
}
std::optional<Writer::Impl::S3Old> Writer::Impl::open_s3() const {
  remote::refuse_write(path.native());
  return std::nullopt;
}
void Writer::Impl::refresh_s3() {
  remote::refuse_write(path.native());
}
void Writer::Impl::upload(const Plan&, const Archive::Impl*,
                          const std::optional<std::set<const zip::EntryInfo*>>&, Stats&, bool*) {
  remote::refuse_write(path.native());
}
#endif

// ---- Writer ----------------------------------------------------------------

Writer::Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Writer::~Writer() = default;
Writer::Writer(Writer&&) noexcept = default;
Writer& Writer::operator=(Writer&&) noexcept = default;

Writer Writer::open(const std::filesystem::path& path, WriterOptions options) {
  // An empty path would be staged and written before its rename failed.
  if (path.empty())
    throw Error(ErrorCode::invalid_argument, "the archive path is empty: name the archive file");
  auto impl = std::make_unique<Impl>();
  impl->shown = path;
  impl->options = std::move(options);
  if (remote::can_upload(path.native())) {
    impl->s3 = true;
    impl->path = path;
    impl->refresh_s3();
    return Writer(std::move(impl));
  }
  remote::refuse_write(path.native());
  try {
    impl->path = io::resolve_archive_path(path);
    io::remove_stale_temp_files(impl->path);
    impl->refresh();
  } catch (const Error& e) {
    throw impl->as_shown(e);
  }
  return Writer(std::move(impl));
}

namespace {

// The state of a Writer that was not moved from; Error(invalid_argument)
// for one that was (moving leaves no archive behind).
Writer::Impl& live(const std::unique_ptr<Writer::Impl>& impl) {
  if (!impl)
    throw Error(ErrorCode::invalid_argument,
                "this Writer was moved from: it has no archive (use the Writer it was moved to, "
                "or Writer::open)");
  return *impl;
}

}  // namespace

void Writer::add_tag(std::string tag, NewTag contents) {
  format::check_tag(tag);
  Impl& impl = live(impl_);
  for (const auto& t : impl.staged_tags())
    if (format::same_tag(t, tag)) {
      ErrorContext context{.archive = impl.shown.string(), .tag = tag};
      // A tag in the list after an add of this name is that add's: a
      // removal or keep_last in between would have dropped the older one.
      const bool staged_here = std::any_of(impl.ops.begin(), impl.ops.end(), [&](const auto& op) {
        const auto* add = std::get_if<AddOp>(&op);
        return add && format::same_tag(add->tag, tag);
      });
      throw staged_here ? format::tag_staged(t, std::move(context))
                        : format::tag_exists(t, std::move(context));
    }
  impl.ops.emplace_back(AddOp{std::move(tag), std::move(contents)});
}

void Writer::replace_tag(std::string tag, NewTag contents) {
  format::check_tag(tag);
  live(impl_).ops.emplace_back(AddOp{std::move(tag), std::move(contents), true});
}

void Writer::keep_last(std::size_t n) {
  Impl& impl = live(impl_);
  format::check_keep_last(n, ErrorContext{.archive = impl.shown.string()});
  impl.ops.emplace_back(KeepLastOp{n});
}

void Writer::remove_tag(std::string_view tag) {
  Impl& impl = live(impl_);
  auto tags = impl.staged_tags();
  auto it = std::find_if(tags.begin(), tags.end(),
                         [&](const std::string& t) { return format::same_tag(t, tag); });
  if (it == tags.end())
    throw Error(ErrorCode::not_found, "no such tag to remove" + detail::did_you_mean(tag, tags),
                ErrorContext{.archive = impl.shown.string(), .tag = std::string(tag)});
  impl.ops.emplace_back(RemoveOp{*it});
}

void Writer::update_metadata(std::function<void(Metadata&)> edit) {
  live(impl_).metadata_edits.push_back(std::move(edit));
}

void Writer::collect_garbage() {
  live(impl_).ops.emplace_back(GcOp{});
}

void Writer::discard() {
  Impl& impl = live(impl_);
  impl.ops.clear();
  impl.metadata_edits.clear();
}

std::vector<std::string> Writer::tags() const {
  return live(impl_).staged_tags();
}

void Writer::commit() {
  Impl& impl = live(impl_);
  try {
    impl.commit();
  } catch (const Error& e) {
    // A cancelled commit that adds one tag names it (the progress
    // callback's "save cancelled" knows only the archive).
    if (e.code() == ErrorCode::cancelled)
      throw impl.as_shown(e.with_context({.tag = impl.added_tag()}));
    throw impl.as_shown(e);
  }
}

const Writer::Stats& Writer::last_stats() const& noexcept {
  static const Stats none;
  return impl_ ? impl_->last_stats : none;
}
Writer::Stats Writer::last_stats() const&& noexcept {
  return impl_ ? impl_->last_stats : Stats{};
}
// 0.1.0's unqualified form (core/kept_symbol.hpp).
MODELZIP_KEEP_SYMBOL(_ZNK8modelzip6Writer10last_statsEv, _ZNKR8modelzip6Writer10last_statsEv);

// ---- checkpoint::plan_rotation ------------------------------------------------

namespace checkpoint {

Rotation plan_rotation(const Archive& old, const RotationInput& in) {
  const Archive::Impl& old_impl = Archive::Impl::of(old);
  Plan plan = plan_from(&old_impl);
  const std::size_t old_count = plan.tags.size();
  TagPlan added;
  added.name = in.tag;
  added.rows[0] = in.params;
  added.rows[1] = in.updater;
  added.has_updater = in.has_updater;
  added.next_index[0] = in.new_blobs[0];
  added.next_index[1] = in.new_blobs[1];
  plan.tags.push_back(std::move(added));
  Rotation out;
  // The replaced tag goes first (Writer::replace_tag), then the oldest
  // beyond keep_last (Writer::keep_last staged after the tag). An old tag
  // comes before the new one, so removing by name finds the old one.
  if (in.replace)
    for (std::size_t i = 0; i < old_count; ++i)
      if (format::same_tag(plan.tags[i].name, in.tag)) {
        remove_from_plan(plan, plan.tags[i].name);
        out.removes = true;
        break;
      }
  if (in.keep_last)
    while (plan.tags.size() > *in.keep_last) {
      remove_from_plan(plan, plan.tags.front().name);
      out.removes = true;
    }
  if (out.removes) check_undamaged_plan(plan, old.name());
  const TagPlan& self = plan.tags.back();
  out.params = self.rows[0];
  out.updater = self.rows[1];
  out.kept = kept_in_place(plan, old_impl);
  for (const auto& t : plan.tags) {
    out.tags.push_back(t.name);
    if (&t != &self && !tables_in_place(t)) {
      out.tables.emplace_back(t.name + "/params.txt",
                              format::write_blob_table(t.rows[0], TableKind::params));
      if (t.has_updater || !t.rows[1].empty())
        out.tables.emplace_back(t.name + "/updater.txt",
                                format::write_blob_table(t.rows[1], TableKind::updater));
    }
    // Other entries of kept tags never move; blobs move only into a tag
    // (remove_from_plan), each an old entry (the new tag's own blobs are
    // not in the plan).
    for (const auto& [key, c] : t.blobs)
      if (!in_place(t.entry_name(key), c)) out.moved.push_back({c.old, t.entry_name(key)});
  }
  return out;
}

}  // namespace checkpoint

}  // namespace modelzip
