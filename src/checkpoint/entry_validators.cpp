#include "checkpoint/entry_validators.hpp"

#include "format/blob_table.hpp"
#include "format/tag_metadata.hpp"
#include "graph/entry_validation.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip {
namespace {

void validate_fifu(const Bytes& contents, const Limits&) {
  (void)finalfusion::Embeddings::read(contents, "embedding");
}

void validate_tag_metadata(const Bytes& contents, const Limits& limits) {
  (void)format::parse_tag_metadata(contents.as_string_view(), limits);
}

// "<tag>/<rest>" -> "<rest>", or "" for root entries.
std::string_view in_tag(std::string_view entry) {
  auto slash = entry.find('/');
  return slash == std::string_view::npos ? std::string_view() : entry.substr(slash + 1);
}

}  // namespace

EntryValidator find_entry_validator(std::string_view entry_name) {
  std::string_view rest = in_tag(entry_name);
  if (rest == "graph.fb") return &graph::validate_graph_entry;
  if (rest == "trainingConfig.fb") return &graph::validate_training_config_entry;
  if (rest == format::kTagMetadataFile) return &validate_tag_metadata;
  if (auto blob = format::blob_file_of(rest); blob && blob->format == format::BlobFormat::fifu)
    return &validate_fifu;
  return nullptr;
}

}  // namespace modelzip
