#include "checkpoint/archive_plan.hpp"

#include <algorithm>
#include <set>

#include "format/archive_metadata.hpp"
#include "format/tags_file.hpp"

namespace modelzip::checkpoint {

using format::BlobRef;
using format::TableKind;

namespace {

// The blob that the tag folder file `rest` is, or nullopt (an other file).
std::optional<BlobKey> blob_key_of(std::string_view rest) {
  if (auto f = format::blob_file_of(rest)) return BlobKey{f->kind, f->index, f->format};
  return std::nullopt;
}

}  // namespace

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

}  // namespace modelzip::checkpoint
