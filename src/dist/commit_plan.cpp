#include "dist/commit_plan.hpp"

#include <algorithm>
#include <any>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>

#include "checkpoint/archive_state.hpp"
#include "checkpoint/entry_validators.hpp"
#include "checkpoint/rotation.hpp"
#include "core/shape_text.hpp"
#include "dist/blocks.hpp"
#include "format/blob_table.hpp"
#include "format/tensor_blob.hpp"
#include "io/durable_file.hpp"
#include "io/shared_file_writer.hpp"

namespace modelzip::dist {

using detail::shape_text;
using format::BlobFormat;
using format::BlobRef;
using format::BlobRow;

namespace {

std::string rank_of(const Record* r) {
  return "rank " + std::to_string(r->rank);
}

// The record of the rank that writes a text: the root if it staged it, else
// the lowest rank that did (`pieces` are in rank order).
const Record* text_writer(const std::vector<const Record*>& pieces, int root) {
  for (const Record* r : pieces)
    if (r->rank == root) return r;
  return pieces.front();
}

// The ranks' verdicts of TextChecks by claim (rank and key), for lookups in
// constant time: the checks hold a claim per text compared, and a tag may
// hold many texts.
class Verdicts {
 public:
  explicit Verdicts(const TextChecks& checked) {
    for (const TextCheck& c : checked.checks)
      for (const TextCheck::Claim& claim : c.claims)
        by_claim_[claim_key(claim.rank, claim.key)].push_back({c.key, claim.equal});
  }
  // Whether the check of the text `source_key` found the text `key` of
  // `rank` equal; nullopt when there is no such claim.
  std::optional<bool> equal(std::string_view source_key, int rank, std::string_view key) const {
    if (const auto* sources = of(rank, key))
      for (const Source& s : *sources)
        if (s.key == source_key) return s.equal;
    return std::nullopt;
  }
  // The texts (their keys) found equal to the text `key` of `rank`, in no
  // particular order.
  template <class F>
  void for_each_equal(int rank, std::string_view key, F&& fn) const {
    if (const auto* sources = of(rank, key))
      for (const Source& s : *sources)
        if (s.equal) fn(s.key);
  }

 private:
  struct Source {
    std::string_view key;  // into the TextChecks
    bool equal;
  };
  static std::string claim_key(int rank, std::string_view key) {
    return std::to_string(rank) + "\n" + std::string(key);  // digits, then the key
  }
  const std::vector<Source>* of(int rank, std::string_view key) const {
    const auto it = by_claim_.find(claim_key(rank, key));
    return it == by_claim_.end() ? nullptr : &it->second;
  }
  std::unordered_map<std::string, std::vector<Source>> by_claim_;
};

// The records sorted out: parameters and updater states (by key_of) in
// order of first appearance (rank order, then staging order), each with
// its records (one per rank that staged a block); tag-level entries
// likewise, checked for duplicates and by their validators.
struct Grouped {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Record*>> by_name;
  std::vector<const Record*> tag_entries;
  // What the validators of graph.fb and trainingConfig.fb returned (StagedTag).
  std::any decoded_graph, decoded_training_config;
};

Grouped group_records(const std::vector<std::vector<Record>>& all, const std::string& tag) {
  Grouped g;
  for (const auto& rank_records : all)
    for (const auto& r : rank_records) {
      if (r.kind == Kind::entry) {
        for (const Record* e : g.tag_entries)
          if (e->name == r.name)
            throw Error(ErrorCode::invalid_argument,
                        "entry '" + r.name + "' is staged twice (by " + rank_of(e) + " and " +
                            rank_of(&r) + ")",
                        ErrorContext{.tag = tag});
        const auto kind = entry_kind_of(tag + "/" + r.name);
        if (auto validate = kind ? find_entry_validator(*kind) : nullptr) {
          try {
            std::any decoded =
                validate(Bytes::borrow(std::as_bytes(std::span(r.content)), nullptr), Limits{});
            if (kind == EntryKind::graph) g.decoded_graph = std::move(decoded);
            if (kind == EntryKind::training_config) g.decoded_training_config = std::move(decoded);
          } catch (const Error& e) {
            throw e.with_context({.entry = tag + "/" + r.name, .tag = tag});
          }
        }
        g.tag_entries.push_back(&r);
        continue;
      }
      const std::string key = key_of(r.table, r.name, r.state);
      auto& v = g.by_name[key];
      if (v.empty()) g.order.push_back(key);
      v.push_back(&r);
    }
  return g;
}

// A parameter or updater state of the new tag: a new blob, a dedup
// reference to the newest tag's blob, or a share of another tag's.
struct Param {
  const Record* first;
  bool new_blob = false;
  BlobRef ref;
  // Text equal to an earlier new blob of the tag: its position in the params.
  std::optional<std::size_t> same_as{};
};

struct Params {
  std::vector<Param> params;
  std::uint64_t deduplicated = 0;
};

[[noreturn]] void invalid(const std::string& tag, const std::string& label,
                          const std::string& what) {
  throw Error(ErrorCode::invalid_argument, label + ": " + what, ErrorContext{.tag = tag});
}

// The blob a share() names: `first->from_param` of tag `first->from_tag`.
BlobRef shared_blob(const Record* first, const std::string& tag, const Archive* old) {
  if (!old || !old->find_tag(first->from_tag))
    throw Error(
        ErrorCode::not_found,
        "cannot share '" + first->name + "' from tag '" + first->from_tag + "': no such tag",
        ErrorContext{.tag = tag});
  const checkpoint::ArchiveState parsed(*old);
  const std::size_t pos = parsed.tag_position(first->from_tag);
  BlobRef ref = parsed.row(pos, TableKind::params, first->from_param).ref;
  if (ref.tag.empty()) ref.tag = parsed.tags()[pos];
  return ref;
}

// Checks that the ranks' blocks of one tensor agree on dtype and global
// shape, lie inside it, do not overlap and cover it; returns whether every
// block equals its namesake (dedup).
bool check_blocks(const std::vector<const Record*>& pieces, const std::string& label,
                  const std::string& tag) {
  const Record* first = pieces.front();
  std::uint64_t covered = 0;
  bool all_equal = true;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Record* p = pieces[i];
    if (p->dtype != first->dtype)
      invalid(tag, label,
              rank_of(first) + " and " + rank_of(p) + " disagree on the dtype (" +
                  std::string(dtype_name(first->dtype)) + " vs " +
                  std::string(dtype_name(p->dtype)) + ")");
    if (p->global != first->global)
      invalid(tag, label,
              rank_of(first) + " and " + rank_of(p) + " disagree on the global shape (" +
                  shape_text(first->global) + " vs " + shape_text(p->global) + ")");
    check_block(p->global, p->block, label);
    for (std::size_t k = 0; k < i; ++k)
      if (blocks_overlap(pieces[k]->block, p->block))
        invalid(tag, label,
                "the blocks of " + rank_of(pieces[k]) + " " + block_text(pieces[k]->block) +
                    " and " + rank_of(p) + " " + block_text(p->block) + " overlap");
    covered += block_numel(p->block);
    all_equal = all_equal && p->equals_namesake;
  }
  const std::uint64_t numel = shape_numel(first->global);
  if (covered != numel)
    invalid(tag, label,
            "the blocks staged by " + std::to_string(pieces.size()) + " rank(s) cover " +
                std::to_string(covered) + " of its " + std::to_string(numel) +
                " elements (global shape " + shape_text(first->global) + "): blocks are missing");
  return all_equal;
}

// What a record stages, for messages.
std::string what_of(const Record* r) {
  switch (r->kind) {
    case Kind::text:
      return "text";
    case Kind::shard:
      return "a block of a tensor";
    case Kind::shared:
      return "a share of tag '" + r->from_tag + "'";
    default:
      return "a tensor";
  }
}

// Checks the records of a name that some rank staged text for: text on
// every rank that staged it, the same text everywhere (it is stored once:
// the same shape, size and CRC-32 of its encoded blob, and the same old
// blob found equal). With `dedup`, the reference of the old blob of the
// same bytes the ranks found (dist/dedup.hpp), checked against `old`.
std::optional<BlobRef> check_text(const std::vector<const Record*>& pieces,
                                  const std::string& label, const std::string& tag,
                                  const Archive* old, bool dedup, int root,
                                  const Verdicts& checked) {
  const Record* text = *std::find_if(pieces.begin(), pieces.end(),
                                     [](const Record* p) { return p->kind == Kind::text; });
  for (const Record* p : pieces)
    if (p->kind != Kind::text)
      invalid(tag, label,
              rank_of(text) + " stages text, " + rank_of(p) + " " + what_of(p) +
                  " (every rank that stages a name as text stages the same text)");
  const Record* first = pieces.front();
  for (const Record* p : pieces)
    if (p->global != first->global || p->text_size != first->text_size ||
        p->text_crc != first->text_crc || p->same_blob != first->same_blob)
      invalid(tag, label,
              rank_of(first) + " and " + rank_of(p) +
                  " stage different text (text staged by several ranks is stored once: it must "
                  "be equal)");
  // Byte for byte, by the ranks (text_checks).
  const Record* writer = text_writer(pieces, root);
  const std::string key = key_of(first->table, first->name, first->state);
  for (const Record* p : pieces)
    if (p != writer && checked.equal(key, p->rank, key) == false) {
      const auto [low, high] = std::minmax(writer->rank, p->rank);
      invalid(tag, label,
              "rank " + std::to_string(low) + " and rank " + std::to_string(high) +
                  " stage different text (text staged by several ranks is stored once: it must "
                  "be equal)");
    }
  if (!old || !dedup || !first->same_blob) return std::nullopt;
  // The rank read it there: a reference to anything else is a malformed message.
  const BlobRef& ref = *first->same_blob;
  const checkpoint::ArchiveState parsed(*old);
  const auto& tags = parsed.tags();
  const zip::EntryInfo* entry =
      std::find(tags.begin(), tags.end(), ref.tag) == tags.end()
          ? nullptr
          : parsed.directory().find(format::blob_entry_name(ref, ref.tag, first->table));
  if (!entry || !entry->stored() || entry->uncompressed_size != first->text_size ||
      entry->crc32 != first->text_crc)
    throw Error(ErrorCode::corrupt,
                "malformed collective message from " + rank_of(first) + " (" + label + ")",
                ErrorContext{.tag = tag});
  return ref;
}

// Checks each parameter's records together and decides its blob.
Params resolve_params(const Grouped& g, const std::string& tag, const Archive* old, bool dedup,
                      int root, const Verdicts& checked) {
  Params out;
  // The new text blobs so far: their key (key_of) and position in out.params.
  std::unordered_map<std::string_view, std::size_t> new_texts;
  for (const auto& key : g.order) {
    const auto& pieces = g.by_name.at(key);
    const Record* first = pieces.front();
    const std::string& name = first->name;
    const std::string label = label_of(first->table, name, first->state);
    if (std::any_of(pieces.begin(), pieces.end(),
                    [](const Record* p) { return p->kind == Kind::text; })) {
      Param param{first};
      if (auto same = check_text(pieces, label, tag, old, dedup, root, checked)) {
        param.ref = *same;
        ++out.deduplicated;
      } else {
        // The first earlier new text of the tag that the ranks found equal
        // (Writer's dedup within a tag), else a blob of its own.
        const int writer = text_writer(pieces, root)->rank;
        if (dedup)
          checked.for_each_equal(writer, key, [&](std::string_view source) {
            const auto it = new_texts.find(source);
            if (it != new_texts.end() && (!param.same_as || it->second < *param.same_as))
              param.same_as = it->second;
          });
        if (param.same_as) {
          ++out.deduplicated;
        } else {
          param.new_blob = true;
          new_texts.emplace(key, out.params.size());
        }
      }
      out.params.push_back(param);
      continue;
    }
    for (const Record* p : pieces)
      if (p != first && (p->kind != Kind::shard || first->kind != Kind::shard))
        invalid(tag, label, "staged twice (by " + rank_of(first) + " and " + rank_of(p) + ")");
    Param param{first};
    if (first->kind == Kind::shared) {
      param.ref = shared_blob(first, tag, old);
    } else if (check_blocks(pieces, label, tag) && old && dedup) {
      const checkpoint::ArchiveState parsed(*old);
      const std::size_t prev = parsed.tags().size() - 1;
      param.ref = parsed.row(prev, first->table, name, first->state).ref;
      if (param.ref.tag.empty()) param.ref.tag = parsed.tags()[prev];
      ++out.deduplicated;
    } else {
      param.new_blob = true;
    }
    out.params.push_back(param);
  }
  return out;
}

// A tag with graph.fb must be a consistent graph checkpoint (GRAPH.md
// section 4), as Archive::verify checks it: the staged-tag validator sees
// each value's dtype and full shape (shards: the global shape; dedup
// references: the records', equal to their namesakes'; shares: the header
// of the old blob they share). Takes the decoded entries from `g`.
void check_graph_checkpoint(Grouped& g, const Params& resolved, const std::string& tag,
                            const Archive* old) {
  const StagedTagValidator validate = entry_validators().staged_tag_validator();
  if (!validate) return;
  std::optional<Bytes> graph, training_config;
  for (const Record* e : g.tag_entries) {
    const auto kind = entry_kind_of(tag + "/" + e->name);
    Bytes content = Bytes::borrow(std::as_bytes(std::span(e->content)), nullptr);
    if (kind == EntryKind::graph) graph = std::move(content);
    if (kind == EntryKind::training_config) training_config = std::move(content);
  }
  if (!graph) return;
  std::deque<ParamInfo> shared;  // the blobs shares refer to, referenced by the values
  std::vector<StoredValue> params, states;
  for (const Param& p : resolved.params) {
    const Record* r = p.first;
    StoredValue v{r->name, r->state, r->dtype, &r->global};
    if (r->kind == Kind::shared) {
      const ParamInfo& info = shared.emplace_back(old->param(r->from_param, r->from_tag));
      v.dtype = info.dtype;
      v.shape = &info.shape;
      v.tensor = info.kind == BlobKind::tensor;
    }
    (r->table == TableKind::params ? params : states).push_back(v);
  }
  StagedTag staged{.tag = tag,
                   .graph = &*graph,
                   .training_config = training_config ? &*training_config : nullptr,
                   .decoded_graph = std::move(g.decoded_graph),
                   .decoded_training_config = std::move(g.decoded_training_config),
                   .params = params,
                   .states = states};
  validate(staged, Limits{});
}

// The rows of params.txt and updater.txt: new blobs numbered in order.
struct Tables {
  std::vector<BlobRow> params, updater;
};

Tables blob_tables(std::vector<Param>& params) {
  Tables t;
  std::vector<BlobRow>& rows = t.params;
  std::vector<BlobRow>& updater_rows = t.updater;
  std::uint64_t next_index[2] = {0, 0};
  for (auto& p : params) {
    const TableKind table = p.first->table;
    if (p.new_blob) p.ref = BlobRef{"", next_index[static_cast<int>(table)]++, BlobFormat::tensor};
    if (p.same_as) p.ref = params[*p.same_as].ref;  // an earlier one: numbered
    if (table == TableKind::params)
      rows.push_back(BlobRow{{p.first->name}, p.ref, 0});
    else
      updater_rows.push_back(BlobRow{{p.first->name, p.first->state}, p.ref, 0});
  }

  return t;
}

}  // namespace

// Until the new end records are in place, the file stays an ordinary zip
// of the old archive (FORMAT.md section 8.1): a copy of the old tail goes
// beyond everything this commit writes. The new tail is at most the old
// one plus a directory record per new entry, the tag's line in tags.txt, a
// larger padding and the ZIP64 end records. Then the blocks of the new
// entries [start, end) are allocated before any rank writes, so that the
// ranks' writes (io::SharedFileWriter) run in parallel, none of them
// extending the file or allocating. An interrupted commit cuts the file
// back (journal) or removes it (temporary file).
void prepare_file(CommitTarget& target, const CommitPlan& out, const std::string& tag) {
  const std::uint64_t start = out.start, end = out.end;
  std::uint64_t tail = 4096 + tag.size();
  for (const auto& e : out.plan.entries) tail += 46 + 28 + 67 + e.entry.size();
  for (const auto& e : out.root_entries) tail += 46 + 28 + 67 + e.entry.entry.size();
  const std::uint64_t old_tail =
      target.old() ? checkpoint::ArchiveState(*target.old()).reader().file().size() - start : 0;
  target.protect(detail::checked_add(end, tail + old_tail, "archive"));
  io::AppendFile file(out.plan.file);
  io::preallocate(file.fd(), start, end - start);
}

TextChecks text_checks(const std::vector<std::vector<Record>>& all, bool dedup, int root,
                       std::size_t chunk) {
  TextChecks out;
  out.chunk = chunk;
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Record*>> by_key;
  for (const auto& rank_records : all)
    for (const Record& r : rank_records) {
      if (r.kind == Kind::entry) continue;
      const std::string key = key_of(r.table, r.name, r.state);
      auto& v = by_key[key];
      if (v.empty()) order.push_back(key);
      v.push_back(&r);
    }
  std::unordered_map<std::string_view, std::size_t> check_index;  // key -> out.checks[i]
  auto check_of = [&](const Record* source, const std::string& key) -> TextCheck& {
    const auto [it, added] = check_index.try_emplace(key, out.checks.size());
    if (added) out.checks.push_back(TextCheck{source->rank, key, source->text_size, {}});
    return out.checks[it->second];
  };
  struct Text {
    const std::string* key;
    const Record* writer;
  };
  // The new tag's texts found in no old blob, in order, by table, size and
  // CRC-32 (the texts that may be equal).
  std::unordered_map<std::string, std::vector<Text>> stored;
  for (const std::string& key : order) {
    const std::vector<const Record*>& pieces = by_key.at(key);
    const Record* first = pieces.front();
    if (std::any_of(pieces.begin(), pieces.end(), [&](const Record* p) {
          return p->kind != Kind::text || p->global != first->global ||
                 p->text_size != first->text_size || p->text_crc != first->text_crc ||
                 p->same_blob != first->same_blob;
        }))
      continue;  // plan_commit refuses it
    const Record* writer = text_writer(pieces, root);
    if (first->same_blob) continue;  // equal to that blob on every rank that staged it
    for (const Record* p : pieces)
      if (p != writer) check_of(writer, key).claims.push_back({p->rank, key});
    if (!dedup) continue;
    std::vector<Text>& alike =
        stored[std::to_string(static_cast<int>(writer->table)) + ":" +
               std::to_string(writer->text_size) + ":" + std::to_string(writer->text_crc)];
    for (const Text& earlier : alike)
      check_of(earlier.writer, *earlier.key).claims.push_back({writer->rank, key});
    alike.push_back(Text{&key, writer});
  }
  return out;
}

CommitPlan plan_commit(const std::vector<std::vector<Record>>& all, const std::string& tag,
                       const Archive* old, const Begin& begin, bool dedup, int root,
                       const TextChecks& checked, const RotateRequest& rotate) {
  Grouped g = group_records(all, tag);
  Params resolved = resolve_params(g, tag, old, dedup, root, Verdicts(checked));
  check_graph_checkpoint(g, resolved, tag, old);  // before the target begins
  std::vector<Param>& params = resolved.params;
  Tables tables = blob_tables(params);
  CommitPlan out;
  out.blobs_deduplicated = resolved.deduplicated;
  if (old) out.tags = old->tags();
  out.tags.push_back(tag);
  std::optional<checkpoint::Rotation> rotation;
  if (old && (rotate.replace || rotate.keep_last)) {
    checkpoint::RotationInput in{tag, tables.params, tables.updater, !tables.updater.empty()};
    for (const auto& p : params)
      if (p.new_blob) in.new_blobs[static_cast<int>(p.first->table)]++;
    in.replace = rotate.replace;
    in.keep_last = rotate.keep_last;
    try {
      rotation = checkpoint::plan_rotation(*old, in);
    } catch (const Error& e) {
      throw e.with_context({.tag = tag});
    }
    tables.params = rotation->params;
    tables.updater = rotation->updater;
    out.tags = rotation->tags;
    if (rotation->removes) out.kept = rotation->kept;  // else the append keeps every entry
  }

  // params.txt, updater.txt (when there is updater state), the tag-level
  // entries and the blob entries (parameters, then updater states), placed
  // one after another in the single writer's order.
  const std::string params_txt = format::write_blob_table(tables.params, TableKind::params);
  const std::vector<BlobRow>& updater_rows = tables.updater;
  const CommitTarget::Start start = begin(out.kept ? &*out.kept : nullptr);
  out.plan.file = start.file;
  out.plan.nonce = start.nonce;
  std::uint64_t cursor = start.offset;
  auto place = [&](const std::string& param, const std::string& entry, std::uint64_t size,
                   std::uint64_t values_offset, int header_rank) {
    PlannedEntry e{param, entry, cursor, 0, values_offset, size, header_rank};
    e.data_offset = e.zip_plan().data_offset;
    cursor = detail::checked_add(e.data_offset, size, "archive");
    return e;
  };
  auto root_text = [&](const std::string& entry, const std::string& text) {
    out.root_entries.push_back(
        RootEntry{place("", entry, text.size(), 0, root), Bytes::copy_of(text)});
  };
  root_text(tag + "/params.txt", params_txt);
  if (!updater_rows.empty())
    root_text(tag + "/updater.txt", format::write_blob_table(updater_rows, TableKind::updater));
  for (const Record* e : g.tag_entries) root_text(tag + "/" + e->name, e->content);
  if (rotation) {
    // Kept tags' rewritten tables, then the blobs that move: copies of the
    // old entries (a deflated one stored, decompressed), by the root.
    for (const auto& [entry, text] : rotation->tables) root_text(entry, text);
    const zip::EntryReader& reader = checkpoint::ArchiveState(*old).reader();
    for (const auto& m : rotation->moved) {
      // A stored blob is viewed, not read (RootEntry::content): an S3
      // commit copies most of it server-side.
      Bytes bytes = m.from->stored()
                        ? reader.file().slice(reader.data_offset(*m.from), m.from->compressed_size)
                        : reader.read(*m.from, false);
      const std::uint64_t size = bytes.size();
      out.root_entries.push_back(RootEntry{place("", m.entry, size, 0, root), std::move(bytes),
                                           m.from->crc32, m.from->stored() ? m.from : nullptr});
    }
  }
  for (TableKind table : {TableKind::params, TableKind::updater})
    for (const auto& p : params) {
      if (!p.new_blob || p.first->table != table) continue;
      const std::string key = key_of(table, p.first->name, p.first->state);
      if (p.first->kind == Kind::text) {
        // Written whole, in its place among the blobs, by the root if it
        // staged it, else by the lowest rank that did: its bytes never travel.
        const int writer = text_writer(g.by_name.at(key), root)->rank;
        out.plan.entries.push_back(
            place(key, format::blob_entry_name(p.ref, tag, table), p.first->text_size, 0, writer));
        ++out.blobs_written;
        continue;
      }
      const auto layout = format::dense_blob_layout(p.first->dtype, p.first->global);
      // The blob header goes with the block that holds the first element (for an
      // empty tensor: the first rank that staged it).
      int header_rank = p.first->rank;
      for (const Record* r : g.by_name.at(key))
        if (block_numel(r->block) > 0 && std::all_of(r->block.offset.begin(), r->block.offset.end(),
                                                     [](std::int64_t o) { return o == 0; }))
          header_rank = r->rank;
      out.plan.entries.push_back(place(key, format::blob_entry_name(p.ref, tag, table), layout.size,
                                       layout.values_offset, header_rank));
      ++out.blobs_written;
    }
  out.start = start.offset;
  out.end = cursor;
  return out;
}

}  // namespace modelzip::dist
