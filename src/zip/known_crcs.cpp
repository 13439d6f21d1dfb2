#include "zip/known_crcs.hpp"

#include "core/crc32.hpp"

namespace modelzip::zip {

namespace {
thread_local const KnownCrcs* current = nullptr;
}  // namespace

void KnownCrcs::record(std::span<const std::byte> range, std::uint32_t crc) {
  crcs_[{range.data(), range.size()}] = crc;
}

std::optional<std::uint32_t> KnownCrcs::find(std::span<const std::byte> range) const {
  const auto it = crcs_.find({range.data(), range.size()});
  if (it == crcs_.end()) return std::nullopt;
  return it->second;
}

KnownCrcs::Scope::Scope(std::shared_ptr<const KnownCrcs> table) noexcept
    : table_(std::move(table)), outer_(current) {
  current = table_.get();
}

KnownCrcs::Scope::~Scope() {
  current = outer_;
}

std::optional<std::uint32_t> known_crc_of(const std::vector<Bytes>& pieces) {
  if (!current) return std::nullopt;
  bool any_known = false;
  for (const Bytes& p : pieces) {
    if (p.size() <= kSmallPiece) continue;
    if (!current->find(p.span())) return std::nullopt;
    any_known = true;
  }
  if (!any_known) return std::nullopt;
  std::uint32_t crc = 0;
  for (const Bytes& p : pieces) {
    if (p.empty()) continue;
    if (p.size() <= kSmallPiece)
      crc = detail::crc32_update(crc, p.span());
    else
      crc = detail::crc32_concat(crc, *current->find(p.span()), p.size());
  }
  return crc;
}

}  // namespace modelzip::zip
