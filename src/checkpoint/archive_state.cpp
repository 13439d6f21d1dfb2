#include "checkpoint/archive_state.hpp"

#include "checkpoint/archive_impl.hpp"

namespace modelzip::checkpoint {

ArchiveState::ArchiveState(const Archive& archive) noexcept : impl_(Archive::Impl::of(archive)) {}

const Limits& ArchiveState::limits() const noexcept {
  return impl_.limits;
}

const zip::Directory& ArchiveState::directory() const noexcept {
  return impl_.directory;
}

const zip::EntryReader& ArchiveState::reader() const noexcept {
  return impl_.reader;
}

const zip::EntryInfo& ArchiveState::entry(std::string_view entry) const {
  return impl_.entry_or_throw(entry);
}

const std::vector<std::string>& ArchiveState::tags() const noexcept {
  return impl_.tags;
}

std::size_t ArchiveState::tag_position(std::string_view tag) const {
  return impl_.tag_position(tag);
}

std::size_t ArchiveState::usable_tag(std::string_view tag) const {
  return impl_.usable_tag(tag);
}

const std::vector<format::BlobRow>& ArchiveState::rows(std::size_t tag_pos,
                                                       format::TableKind kind) const {
  return impl_.tables.at(tag_pos).rows(kind);
}

const format::BlobRow* ArchiveState::namesake(std::size_t tag_pos, format::TableKind kind,
                                              std::string_view name, std::string_view state) const {
  return impl_.find_row(tag_pos, kind, name, state);
}

const format::BlobRow& ArchiveState::row(std::size_t tag_pos, format::TableKind kind,
                                         std::string_view name, std::string_view state) const {
  if (kind == format::TableKind::params) return impl_.row(tag_pos, kind, name);
  std::string key(name);
  key += '\0';
  key += state;
  return impl_.row(tag_pos, kind, key);
}

ParamInfo ArchiveState::info(std::size_t tag_pos, const format::BlobRow& row,
                             format::TableKind kind) const {
  return impl_.info(tag_pos, row, kind);
}

}  // namespace modelzip::checkpoint
