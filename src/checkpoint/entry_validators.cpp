#include "checkpoint/entry_validators.hpp"

#include "format/blob_table.hpp"
#include "format/tag_metadata.hpp"

namespace modelzip {
namespace {

std::any validate_tag_metadata(const Bytes& contents, const Limits& limits) {
  (void)format::parse_tag_metadata(contents.as_string_view(), limits);
  return {};
}

// "<tag>/<rest>" -> "<rest>", or "" for root entries.
std::string_view in_tag(std::string_view entry) {
  auto slash = entry.find('/');
  return slash == std::string_view::npos ? std::string_view() : entry.substr(slash + 1);
}

}  // namespace

std::optional<EntryKind> entry_kind_of(std::string_view entry_name) {
  std::string_view rest = in_tag(entry_name);
  if (rest == "graph.fb") return EntryKind::graph;
  if (rest == "trainingConfig.fb") return EntryKind::training_config;
  if (rest == format::kTagMetadataFile) return EntryKind::tag_metadata;
  if (auto blob = format::blob_file_of(rest); blob && blob->format == format::BlobFormat::fifu)
    return EntryKind::embedding;
  return std::nullopt;
}

const EntryValidators& entry_validators() {
  static const EntryValidators registry = [] {
    EntryValidators r;
    r.add(EntryKind::tag_metadata, &validate_tag_metadata);
    register_upper_entry_validators(r);
    return r;
  }();
  return registry;
}

EntryValidator find_entry_validator(EntryKind kind) {
  return entry_validators().of(kind);
}

EntryValidator find_entry_validator(std::string_view entry_name) {
  auto kind = entry_kind_of(entry_name);
  return kind ? find_entry_validator(*kind) : nullptr;
}

EntryChecker find_entry_checker(std::string_view entry_name) {
  auto kind = entry_kind_of(entry_name);
  return kind ? entry_validators().checker_of(*kind) : nullptr;
}

}  // namespace modelzip
