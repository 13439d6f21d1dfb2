#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/json.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "modelzip/archive.hpp"

namespace modelzip::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {}, {"--json"});
  args.expect_positionals(1, 1, {"ARCHIVE"});
  Archive archive = open_archive(args.path_at(0, "ARCHIVE"));
  if (args.flag("--json")) {
    std::cout << "[";
    for (std::size_t i = 0; i < archive.tags().size(); ++i)
      std::cout << (i ? ", " : "") << json_string(archive.tags()[i]);
    std::cout << "]\n";
  } else {
    for (const auto& t : archive.tags()) std::cout << printable(t) << "\n";
  }
  report_damage(archive);
  return 0;
}

}  // namespace

extern const Command kTagsCommand{
    "tags", "List the tags of an archive, oldest first", "modelzip tags ARCHIVE [--json]",
    "A tag whose params.txt or updater.txt is damaged is listed too, and named on\n"
    "standard error with the damage; the other tags stay readable (ls --tag,\n"
    "extract --tag), and rm-tag removes the damaged one.\n"
    "Options:\n  --json   print a JSON array of strings\n\nExample:\n  modelzip tags model.zip\n",
    run};

}  // namespace modelzip::cli
