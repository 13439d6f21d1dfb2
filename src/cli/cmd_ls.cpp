#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/json.hpp"
#include "modelzip/archive.hpp"

namespace modelzip::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag"}, {"--json", "--updater"});
  args.expect_positionals(1, 1);
  Archive archive = Archive::open(args.at(0, "ARCHIVE"));
  std::string tag = args.value_or("--tag", "");
  bool updater = args.flag("--updater");
  // An archive without tags lists nothing (FORMAT.md section 4.1).
  auto params = archive.tags().empty() && tag.empty() ? std::vector<ParamInfo>()
                : updater                             ? archive.updater_states(tag)
                                                      : archive.params(tag);
  if (args.flag("--json")) {
    std::cout << "[";
    for (std::size_t i = 0; i < params.size(); ++i) {
      const ParamInfo& p = params[i];
      std::cout << (i ? ",\n " : "") << "{\"name\": " << json_string(p.name);
      if (updater) std::cout << ", \"state\": " << json_string(p.state);
      std::cout << ", \"kind\": "
                << json_string(p.kind == BlobKind::tensor ? "tensor" : "embedding")
                << ", \"dtype\": " << json_string(dtype_name(p.dtype)) << ", \"shape\": [" <<
          [&] {
            std::string s;
            for (std::size_t d = 0; d < p.shape.size(); ++d)
              s += (d ? ", " : "") + std::to_string(p.shape[d]);
            return s;
          }()
                << "], \"layout\": " << json_string(layout_name(p.layout))
                << ", \"nbytes\": " << p.nbytes << ", \"blob\": " << json_string(p.blob)
                << ", \"shared\": " << json_bool(p.shared)
                << ", \"compressed\": " << json_bool(p.compressed) << "}";
    }
    std::cout << "]\n";
    return 0;
  }
  for (const ParamInfo& p : params) {
    std::cout << p.name;
    if (updater) std::cout << " [" << p.state << "]";
    std::cout << "\t"
              << (p.kind == BlobKind::embedding ? "embedding" : std::string(dtype_name(p.dtype)))
              << "\t" << shape_text(p.shape) << "\t" << human_bytes(p.nbytes) << "\t" << p.blob;
    if (p.layout == Layout::sparse_coo) std::cout << "\tsparse";
    if (p.shared) std::cout << "\tshared";
    if (p.compressed) std::cout << "\tdeflated";
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

extern const Command kLsCommand{
    "ls", "List the parameters of a tag (dtype, shape, size, blob)",
    "modelzip ls ARCHIVE [--tag T] [--updater] [--json]",
    "Options:\n"
    "  --tag T     the tag (default: the newest)\n"
    "  --updater   list the optimizer state (updater.txt) instead of the parameters\n"
    "  --json      print a JSON array of objects with keys name, kind, dtype, shape,\n"
    "              layout, nbytes, blob, shared, compressed (and state with --updater)\n"
    "\nExamples:\n  modelzip ls model.zip\n  modelzip ls model.zip --tag step-100 --json\n",
    run};

}  // namespace modelzip::cli
