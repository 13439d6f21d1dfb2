#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "graph/render.hpp"

namespace modelzip::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag"}, {"--json"});
  args.expect_positionals(1, 1, {"ARCHIVE"});
  Archive archive = open_archive(args.path_at(0, "ARCHIVE"));
  std::string tag = args.value_or("--tag", "");
  std::cout << (args.flag("--json")
                    ? graph::tag_summary_json(archive, tag)
                    : printable_message(graph::tag_summary_text(archive, tag), true));
  return 0;
}

}  // namespace

extern const Command kInfoCommand{
    "info", "Summarize a tag: counts, bytes, metadata, graph, training config, updater",
    "modelzip info ARCHIVE [--tag T] [--json]",
    "The safetensors __metadata__ that import kept with the tag (export writes it\n"
    "back) is listed key by key (--json: \"file_metadata\").\n"
    "Options:\n  --tag T   the tag (default: the newest)\n"
    "  --json    the summary as a JSON object: archive, tag, position (from 1,\n"
    "            oldest first), tags (how many), newest (true or false),\n"
    "            metadata {format_version, writer, model_name, model_version,\n"
    "            quantization, description}, params {count, shared, compressed,\n"
    "            bytes (every parameter's tensor bytes), own_bytes (those in the\n"
    "            tag's own folder), dtypes {DTYPE: count}, quantized {\"STORAGE\n"
    "            SCHEME\": count}}, embeddings {NAME: as ls --json's \"embedding\"},\n"
    "            file_metadata ({\"safetensors\": {KEY: VALUE}}, {error} or null),\n"
    "            updater (as params, with variables: how many have state, and\n"
    "            states: the state names; or null), graph ({variables, kinds, ops,\n"
    "            op_types, outputs, loss_variables} or null), training ({updater,\n"
    "            learning_rate_schedule, regularization, minimize, feature_mapping,\n"
    "            label_mapping, feature_mask_mapping, label_mask_mapping,\n"
    "            loss_variables, iteration_count, epoch_count, properties} or null)\n"
    "\nExample:\n  modelzip info model.zip --tag step-100\n",
    run};

}  // namespace modelzip::cli
