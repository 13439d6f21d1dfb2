#include "checkpoint/plan_entries.hpp"

#include "checkpoint/fill_gate.hpp"
#include "format/archive_metadata.hpp"
#include "format/tags_file.hpp"
#include "zip/known_crcs.hpp"

namespace modelzip::checkpoint {

using format::TableKind;

std::uint64_t content_size(const Content& c) {
  return c.old ? c.old->compressed_size : c.size;
}

bool in_place(const std::string& name, const Content& c) {
  return c.old && c.old->name == name;
}

bool tables_in_place(const TagPlan& t) {
  return t.old_tables[0] && !t.tables_changed;
}

void emit_tags(zip::StreamZipWriter& zw, const Plan& plan, const Archive::Impl* old_impl,
               bool changes_only, bool keep_old) {
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

void emit_all(zip::StreamZipWriter& zw, const Plan& plan, const Archive::Impl* old_impl,
              bool keep_old) {
  zw.set_comment(plan.comment);
  emit_tags(zw, plan, old_impl, false, keep_old);
  std::vector<std::string> names;
  for (const auto& t : plan.tags) names.push_back(t.name);
  zw.add_stored(std::string(format::kTagsEntry), {Bytes::copy_of(format::write_tags_file(names))});
}

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

}  // namespace modelzip::checkpoint
