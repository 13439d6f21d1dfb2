#include "dist/dedup.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <tuple>

#include "checkpoint/archive_state.hpp"
#include "checkpoint/dedup_index.hpp"
#include "checkpoint/new_tag_contents.hpp"
#include "dist/blocks.hpp"
#include "format/blob_table.hpp"

namespace modelzip::dist {

using format::BlobFormat;
using format::BlobRef;

namespace {

std::atomic<std::uint64_t> g_entries_examined{0};

// The stored tensor blobs of old's tags, by what a duplicate shares
// (checkpoint::DedupIndex: the directory's size and CRC-32), each with its
// entry. Made by one pass over the directory, once per commit, so that each
// text looks only at the blobs of its own size and CRC.
using TextBlobIndex = checkpoint::DedupIndex<const zip::EntryInfo*>;

TextBlobIndex text_blob_index(const checkpoint::ArchiveState& parsed) {
  TextBlobIndex index;
  const std::vector<std::string>& tags = parsed.tags();
  std::map<std::string_view, std::size_t> position;
  for (std::size_t i = 0; i < tags.size(); ++i) position.emplace(tags[i], i);
  for (const zip::EntryInfo& e : parsed.directory().entries) {
    ++g_entries_examined;
    if (!e.stored()) continue;
    const std::size_t slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    const auto tag = position.find(std::string_view(e.name).substr(0, slash));
    const auto file = format::blob_file_of(std::string_view(e.name).substr(slash + 1));
    if (tag == position.end() || !file || file->format != BlobFormat::tensor) continue;
    index.add({file->kind, BlobFormat::tensor, Compression::store, e.uncompressed_size, e.crc32},
              {tag->second, file->index, &e});
  }
  return index;
}

// The blob of old holding exactly the encoded text `text` of `item`, found
// as Writer's dedup finds it (checkpoint/tag_adder.cpp), so that the tag is
// the one a single writer commits: first the namesake in the newest tag,
// then every stored tensor blob of the same table, size and CRC-32
// (`index`), oldest tag first and by index, confirmed byte for byte.
std::optional<BlobRef> same_text_blob(const Item& item, const checkpoint::ArchiveState& parsed,
                                      const TextBlobIndex& index) {
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
  const auto hit = index.first_same(
      {item.table, BlobFormat::tensor, Compression::store, item.text.size(), item.text_crc},
      [&](const TextBlobIndex::Blob& blob) { return same(*blob.where); });
  if (!hit) return std::nullopt;
  return BlobRef{tags[hit->tag], hit->index, BlobFormat::tensor};
}

}  // namespace

std::vector<Record> records_with_dedup(const std::vector<Item>& items, const NewTag& entries,
                                       int rank, const Archive* old) {
  std::vector<Record> out;
  std::optional<checkpoint::ArchiveState> parsed;
  if (old && !old->tags().empty()) parsed.emplace(*old);
  std::optional<TextBlobIndex> text_index;  // made for the first text
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
      if (parsed) {
        if (!text_index) text_index = text_blob_index(*parsed);
        r.same_blob = same_text_blob(item, *parsed, *text_index);
      }
      out.push_back(std::move(r));
      continue;
    }
    if (parsed && item.kind != Kind::shared) {
      const std::size_t prev = parsed->tags().size() - 1;
      const format::BlobRow* namesake = parsed->namesake(prev, item.table, item.name, item.state);
      if (namesake && namesake->ref.format == BlobFormat::tensor) {
        const ParamInfo info = parsed->info(prev, *namesake, item.table);
        if (!info.compressed && info.layout == Layout::dense && info.dtype == r.dtype &&
            info.shape == r.global) {
          const Tensor before =
              item.table == TableKind::params
                  ? old->tensor(item.name, parsed->tags()[prev], ReadMode::zero_copy)
                  : old->updater_state(item.name, item.state, parsed->tags()[prev],
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

std::uint64_t text_dedup_entries_examined() noexcept {
  return g_entries_examined.load();
}

}  // namespace modelzip::dist
