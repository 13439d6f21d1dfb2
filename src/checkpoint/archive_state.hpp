// ArchiveState: the narrow internal interface through which the layers above
// checkpoint (graph, convert, dist) read an open archive's parsed state: its
// limits, tags, table rows (and a row's namesake in another tag), the info of
// a row's blob, and the zip directory and entry reader. Archive::Impl itself
// stays private to src/checkpoint.
//
// An ArchiveState borrows the Archive it was made from, which must outlive
// it. Like Archive, it is immutable and safe to use from several threads.
// Lookups that fail throw modelzip::Error (not_found, or the tag's damage).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "format/blob_table.hpp"
#include "modelzip/archive.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"

namespace modelzip::checkpoint {

class ArchiveState {
 public:
  explicit ArchiveState(const Archive& archive) noexcept;

  const Limits& limits() const noexcept;
  const zip::Directory& directory() const noexcept;
  const zip::EntryReader& reader() const noexcept;
  // The directory entry named `entry`; throws not_found.
  const zip::EntryInfo& entry(std::string_view entry) const;

  // Tags, oldest first (positions index them).
  const std::vector<std::string>& tags() const noexcept;
  // Position of `tag` (empty: the newest), matched without regard to case;
  // throws not_found.
  std::size_t tag_position(std::string_view tag) const;
  // The same, for reading the tag's tables: also throws the tag's damage.
  std::size_t usable_tag(std::string_view tag) const;

  // The rows of a tag's params.txt or updater.txt.
  const std::vector<format::BlobRow>& rows(std::size_t tag_pos, format::TableKind kind) const;
  // The row of parameter `name` (updater: with state `state`) in the tag at
  // `tag_pos`, or nullptr: the namesake of a tensor staged under that name.
  const format::BlobRow* namesake(std::size_t tag_pos, format::TableKind kind,
                                  std::string_view name, std::string_view state = {}) const;
  // The same, throwing not_found (with a suggestion) when there is none.
  const format::BlobRow& row(std::size_t tag_pos, format::TableKind kind, std::string_view name,
                             std::string_view state = {}) const;
  // What the row's blob holds (reads its header).
  ParamInfo info(std::size_t tag_pos, const format::BlobRow& row, format::TableKind kind) const;

 private:
  const Archive::Impl& impl_;
};

}  // namespace modelzip::checkpoint
