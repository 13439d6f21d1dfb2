// The plan of a commit: the entries of the new archive, by tag, as entries
// of the old archive (copied without decoding) or new pieces, with each
// tag's tables. Writer::commit makes it from the old archive (plan_from),
// applies the staged operations to it (tag_adder.hpp adds a tag) and
// writes it (plan_entries.hpp); plan_rotation (rotation.hpp) resolves a
// collective commit's rotation with the same plan.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/archive_impl.hpp"
#include "format/blob_table.hpp"
#include "format/tag_name.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "zip/zip_directory.hpp"

namespace modelzip::checkpoint {

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
  format::TableKind kind;
  std::uint64_t index;
  format::BlobFormat format;
  auto operator<=>(const BlobKey&) const = default;
};

struct TagPlan {
  std::string name;
  std::vector<format::BlobRow> rows[2];  // by format::TableKind
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

  std::vector<format::BlobRow>& table(format::TableKind k) { return rows[static_cast<int>(k)]; }
  std::string entry_name(const BlobKey& key) const {
    return format::blob_entry_name(format::BlobRef{"", key.index, key.format}, name, key.kind);
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

// Bytes of the concatenation of `pieces`.
inline std::uint64_t pieces_size(const std::vector<Bytes>& pieces) {
  std::uint64_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

// The plan of the archive `old` as it is; empty for nullptr (no archive).
// Entries of a tag folder that are no blob and no table are the tag's
// `others`; root entries but modelzip.toml and tags.txt are `root_others`.
Plan plan_from(const Archive::Impl* old);

// Removes `tag`, moving blobs that other tags reference into the oldest such
// tag and rewriting every reference to them.
void remove_from_plan(Plan& plan, const std::string& tag);

// Drops every blob that no table row references, counting them in `stats`
// (blobs_collected, bytes_collected).
void drop_unreferenced_blobs(Plan& plan, Writer::Stats& stats);

// Throws when `plan` keeps a tag whose tables could not be read: rewriting
// it would lose what its unreadable tables held. The error names `archive`.
void check_undamaged_plan(const Plan& plan, const std::string& archive);

}  // namespace modelzip::checkpoint
