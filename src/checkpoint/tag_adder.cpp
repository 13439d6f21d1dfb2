#include "checkpoint/tag_adder.hpp"
#include "core/printable.hpp"

#include <algorithm>
#include <any>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <variant>

#include "checkpoint/dedup_index.hpp"
#include "checkpoint/entry_validators.hpp"
#include "checkpoint/fill_gate.hpp"
#include "checkpoint/new_tag_contents.hpp"
#include "core/crc32.hpp"
#include "core/position_index.hpp"
#include "format/tensor_blob.hpp"
#include "zip/crc_queue.hpp"
#include "zip/known_crcs.hpp"

namespace modelzip::checkpoint {

using format::BlobFormat;
using format::BlobRef;
using format::BlobRow;
using format::TableKind;

namespace {

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
// Blobs from this size are checksummed by the workers of a zip::CrcQueue
// and the calling thread, in ranges of kCrcRange, reported to the progress
// in steps of kCrcStep; smaller ones on the calling thread.
constexpr std::uint64_t kParallelCrcFrom = 2u << 20;
constexpr std::uint64_t kCrcRange = 512u << 10;
constexpr std::uint64_t kCrcStep = 16u << 20;

// CRC-32 of the concatenation of `pieces`, reporting to `scan` if given;
// taken from the calling thread's KnownCrcs (a background save's snapshot)
// where it knows the pieces. With `queue` (empty), large blobs are spread
// over its workers; the queue is empty again when this returns or throws.
std::uint32_t pieces_crc(const std::vector<Bytes>& pieces, ScanProgress* scan = nullptr,
                         zip::CrcQueue* queue = nullptr) {
  detail::wait_filled(pieces);  // bytes still arriving (FillGate): before reading them
  if (const std::optional<std::uint32_t> known = zip::known_crc_of(pieces)) {
    if (scan) scan->reached(pieces_size(pieces));
    return *known;
  }
  std::uint32_t crc = 0;
  std::uint64_t offset = 0;
  if (queue && pieces_size(pieces) >= kParallelCrcFrom) {
    // Every range queued at once, one slot per step; then each step's CRC
    // in order (the calling thread computing what no worker took yet).
    std::vector<std::uint64_t> step_size;
    for (const auto& p : pieces)
      for (std::uint64_t at = 0; at < p.size(); at += kCrcRange) {
        if (step_size.empty() || step_size.back() >= kCrcStep) {
          queue->new_slot();
          step_size.push_back(0);
        }
        const std::uint64_t n = std::min<std::uint64_t>(kCrcRange, p.size() - at);
        queue->push(step_size.size() - 1, p.slice(at, n));
        step_size.back() += n;
      }
    try {
      for (std::size_t slot = 0; slot < step_size.size(); ++slot) {
        const std::uint32_t step = queue->result(slot);
        crc = slot == 0 ? step : detail::crc32_concat(crc, step, step_size[slot]);
        offset += step_size[slot];
        if (scan) scan->reached(offset);  // may throw: cancelled
      }
    } catch (...) {
      queue->forget();  // no worker reads the pieces any more
      throw;
    }
    queue->forget();
    return crc;
  }
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

// Blobs of the plan by what a duplicate shares (DedupIndex); a
// blob's tag is its position in Plan::tags. Dedup matches only blobs stored
// with the compression the new one asks for: sharing a deflated blob would
// take zero-copy reads away from a parameter added as stored, and sharing a
// stored one would leave a parameter asked to be deflated uncompressed.
using PlanDedupIndex = DedupIndex<std::monostate>;

}  // namespace

class TagAdder::Impl {
 public:
  // `comparing` (may be null) hears of the bytes the dedup comparison reads.
  Impl(Plan& plan, const Archive::Impl* old, bool dedup, Writer::Stats& stats,
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
              throw e.reworded("embedding parameter " + modelzip::detail::quote_name(p.name) +
                                   ": " + e.message(),
                               context);
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
      throw Error(
          ErrorCode::not_found,
          "cannot share from tag " + modelzip::detail::quote_name(from_tag) + ": no such tag",
          ErrorContext{.tag = self.name});
    if (const BlobRow* row = row_of(*source, kind, first, second))
      return BlobRef{row->ref.tag.empty() ? source->name : row->ref.tag, row->ref.index,
                     row->ref.format};
    const std::string shown = kind == TableKind::params
                                  ? std::string(first)
                                  : std::string(first) + "/" + std::string(second);
    throw Error(ErrorCode::not_found,
                "cannot share " + modelzip::detail::quote_name(shown) + ": tag " +
                    modelzip::detail::quote_name(source->name) + " has no such " +
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
  // same bytes and the same compression (see PlanDedupIndex). Unchanged tensors of a new checkpoint
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
      c.crc = pieces_crc(pieces, &scan_, &crcs_);
      const PlanDedupIndex::Key hash_key{kind, fmt, compression, c.size, *c.crc};
      if (const auto hit = index_.first_same(hash_key, [&](const PlanDedupIndex::Blob& blob) {
            return same_bytes(
                pieces,
                content_bytes(plan_.tags[blob.tag].blobs.at(BlobKey{kind, blob.index, fmt})));
          })) {
        const TagPlan& t = plan_.tags[hit->tag];
        ++stats_.blobs_deduplicated;
        return BlobRef{&t == &self ? std::string() : t.name, hit->index, fmt};
      }
      index_.add(hash_key, {static_cast<std::size_t>(&self - plan_.tags.data()),
                            self.next_index[static_cast<int>(kind)],
                            {}});
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
    index_.clear();
    for (std::size_t tag = 0; tag < plan_.tags.size(); ++tag)
      for (auto& [key, c] : plan_.tags[tag].blobs) {
        if (!c.crc) c.crc = pieces_crc(c.pieces, nullptr, &crcs_);
        index_.add({key.kind, key.format, c.compression, c.size, *c.crc}, {tag, key.index, {}});
      }
  }

  Plan& plan_;
  const Archive::Impl* old_;
  bool dedup_;
  Writer::Stats& stats_;
  ScanProgress scan_;
  PlanDedupIndex index_;
  zip::CrcQueue crcs_;  // its workers checksum large blobs
  // (source tag, table kind) -> its rows by keys, for row_of.
  std::map<std::pair<std::string, int>, detail::PositionIndex> row_index_;
};

TagAdder::TagAdder(Plan& plan, const Archive::Impl* old, bool dedup, Writer::Stats& stats,
                   detail::ProgressTracker* comparing)
    : impl_(std::make_unique<Impl>(plan, old, dedup, stats, comparing)) {}

TagAdder::~TagAdder() = default;

void TagAdder::add(const std::string& tag, const NewTag& contents) {
  impl_->add(tag, contents);
}

}  // namespace modelzip::checkpoint
