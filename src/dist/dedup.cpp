#include "dist/dedup.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "checkpoint/archive_state.hpp"
#include "checkpoint/new_tag_contents.hpp"
#include "dist/blocks.hpp"
#include "format/blob_table.hpp"

namespace modelzip::dist {

using format::BlobFormat;
using format::BlobRef;

namespace {

// The blob of old holding exactly the encoded text `text` of `item`, found
// as Writer's dedup finds it (checkpoint/writer.cpp), so that the tag is
// the one a single writer commits: first the namesake in the newest tag,
// then every stored tensor blob of the same table, size and CRC-32 (the
// directory's), oldest tag first and by index, confirmed byte for byte.
std::optional<BlobRef> same_text_blob(const Item& item, const Archive& old) {
  if (old.tags().empty()) return std::nullopt;
  const checkpoint::ArchiveState parsed(old);
  const std::vector<std::string>& tags = parsed.tags();
  auto same = [&](const zip::EntryInfo& e) {
    return e.stored() && e.uncompressed_size == item.text.size() &&
           parsed.reader().read(e, false).as_string_view() == item.text;
  };
  const std::size_t prev = tags.size() - 1;
  const format::BlobRow* namesake = parsed.namesake(prev, item.table, item.name, item.state);
  if (namesake && namesake->ref.format == BlobFormat::tensor) {
    BlobRef ref = namesake->ref;
    if (ref.tag.empty()) ref.tag = tags[prev];
    if (same(parsed.entry(format::blob_entry_name(ref, ref.tag, item.table)))) return ref;
  }
  std::vector<std::tuple<std::size_t, std::uint64_t, const zip::EntryInfo*>> candidates;
  for (const zip::EntryInfo& e : parsed.directory().entries) {
    if (!e.stored() || e.uncompressed_size != item.text.size() || e.crc32 != item.text_crc)
      continue;
    const std::size_t slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    const auto tag = std::find(tags.begin(), tags.end(), e.name.substr(0, slash));
    const auto file = format::blob_file_of(std::string_view(e.name).substr(slash + 1));
    if (tag == tags.end() || !file || file->kind != item.table ||
        file->format != BlobFormat::tensor)
      continue;
    candidates.emplace_back(static_cast<std::size_t>(tag - tags.begin()), file->index, &e);
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& [tag, index, entry] : candidates)
    if (same(*entry)) return BlobRef{tags[tag], index, BlobFormat::tensor};
  return std::nullopt;
}

}  // namespace

std::vector<Record> records_with_dedup(const std::vector<Item>& items, const NewTag& entries,
                                       int rank, const Archive* old) {
  std::vector<Record> out;
  for (const auto& item : items) {
    Record r;
    r.rank = rank;
    r.name = item.name;
    r.kind = item.kind;
    r.dtype = item.tensor.dtype();
    r.global = item.global;
    r.block = item.block;
    r.from_tag = item.from_tag;
    r.from_param = item.from_param;
    r.table = item.table;
    r.state = item.state;
    if (item.kind == Kind::text) {  // the root compares sizes and CRCs (dist/commit_plan.hpp)
      r.dtype = DType::utf8;
      r.text_size = item.text.size();
      r.text_crc = item.text_crc;
      if (old) r.same_blob = same_text_blob(item, *old);
      out.push_back(std::move(r));
      continue;
    }
    if (old && item.kind != Kind::shared && !old->tags().empty()) {
      const checkpoint::ArchiveState parsed(*old);
      const std::size_t prev = parsed.tags().size() - 1;
      const format::BlobRow* namesake = parsed.namesake(prev, item.table, item.name, item.state);
      if (namesake && namesake->ref.format == BlobFormat::tensor) {
        const ParamInfo info = parsed.info(prev, *namesake, item.table);
        if (!info.compressed && info.layout == Layout::dense && info.dtype == r.dtype &&
            info.shape == r.global) {
          const Tensor before =
              item.table == TableKind::params
                  ? old->tensor(item.name, parsed.tags()[prev], ReadMode::zero_copy)
                  : old->updater_state(item.name, item.state, parsed.tags()[prev],
                                       ReadMode::zero_copy);
          const std::uint64_t esize = dtype_size(r.dtype);
          const std::byte* mine = item.tensor.values().data();
          const std::byte* theirs = before.values().data();
          bool same = true;
          dist::for_each_run(r.global, r.block,
                             [&](std::uint64_t b, std::uint64_t g, std::uint64_t n) {
                               if (same)
                                 same = std::memcmp(mine + b * esize, theirs + g * esize,
                                                    static_cast<std::size_t>(n * esize)) == 0;
                             });
          r.equals_namesake = same;
        }
      }
    }
    out.push_back(std::move(r));
  }
  for (const auto& e : NewTag::Contents::of(entries).entries) {
    Record r;
    r.rank = rank;
    r.name = e.relative_name;
    r.kind = Kind::entry;
    r.content = std::string(e.contents.as_string_view());
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace modelzip::dist
