#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "graph/render.hpp"
#include "modelzip/graph/checkpoint.hpp"

namespace modelzip::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag"}, {"--json", "--dot"});
  args.expect_positionals(1, 1, {"ARCHIVE"});
  if (args.flag("--json") && args.flag("--dot")) throw UsageError("choose one of --json and --dot");
  Archive archive = open_archive(args.path_at(0, "ARCHIVE"));
  graph::Graph g = load_graph(archive, args.value_or("--tag", ""));
  if (args.flag("--dot")) {
    std::cout << graph::graph_dot(g);
  } else if (args.flag("--json")) {
    std::cout << graph::graph_json(g);
  } else {
    std::cout << "variables: " << g.variables.size() << "\n";
    for (const auto& v : g.variables) {
      std::cout << "  " << printable(v.name) << "\t" << graph::variable_kind_name(v.kind) << "\t"
                << dtype_name(v.dtype) << "\t[";
      for (std::size_t i = 0; v.shape && i < v.shape->size(); ++i)
        std::cout << (i ? ", " : "")
                  << ((*v.shape)[i] < 0 ? std::string("?") : std::to_string((*v.shape)[i]));
      std::cout << (v.shape ? "]" : "unknown rank]") << "\n";
    }
    std::cout << "ops: " << g.ops.size() << "\n";
    for (const auto& op : g.ops) {
      std::cout << "  " << printable(op.name) << " = " << printable(op.type) << "(";
      for (std::size_t i = 0; i < op.inputs.size(); ++i)
        std::cout << (i ? ", " : "") << printable(op.inputs[i]);
      std::cout << ") -> ";
      for (std::size_t i = 0; i < op.outputs.size(); ++i)
        std::cout << (i ? ", " : "") << printable(op.outputs[i]);
      std::cout << "\n";
    }
  }
  return 0;
}

}  // namespace

extern const Command kGraphCommand{
    "graph", "Show a tag's model graph (text, JSON, or Graphviz DOT)",
    "modelzip graph ARCHIVE [--tag T] [--json | --dot]",
    "Options:\n  --tag T   the tag (default: the newest)\n"
    "  --json    an object with keys variables ({name, kind, dtype, shape}), ops\n"
    "            ({name, type, inputs, outputs, control_deps, i_args, t_args, b_args,\n"
    "            d_args, s_args}), outputs, loss_variables\n"
    "  --dot     Graphviz: variables as ellipses, ops as boxes\n"
    "\nExamples:\n  modelzip graph model.zip --dot | dot -Tpng > model.png\n"
    "  modelzip graph model.zip --tag step-10 --json\n",
    run};

}  // namespace modelzip::cli
