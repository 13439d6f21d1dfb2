#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/open_archive.hpp"
#include "cli/progress_bar.hpp"
#include "cli/terminal.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"

namespace modelzip::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {}, {"--quiet"});
  args.expect_positionals(1, 1, {"ARCHIVE"});
  const std::string& path = args.path_at(0, "ARCHIVE");
  std::vector<Problem> problems;
  try {
    Archive archive = open_archive(path);
    ProgressBar bar("verifying");
    problems = archive.verify(bar.callback());
  } catch (const Error& e) {
    if (e.code() == ErrorCode::io) throw;
    std::cout << printable_message(e.what()) << "\n";  // names the archive, entry and line itself
    problems.push_back(Problem{e.context().entry, e.message()});
    if (!args.flag("--quiet")) std::cout << printable(path) << ": cannot be opened\n";
    return 1;
  }
  const bool colour = colour_enabled(1);
  for (const auto& p : problems)
    std::cout << printable(path) << (p.entry.empty() ? "" : ": entry " + quoted_name(p.entry))
              << ": " << paint(printable_message(p.message), Colour::red, colour) << "\n";
  if (!args.flag("--quiet"))  // the result, with the problems on standard output
    std::cout << printable(path) << ": "
              << (problems.empty() ? paint("OK", Colour::green, colour)
                                   : paint(std::to_string(problems_found(problems)) + " problem(s)",
                                           Colour::red, colour))
              << "\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace

extern const Command kVerifyCommand{
    "verify", "Check everything: structure, every CRC, blob, FlatBuffer and reference",
    "modelzip verify ARCHIVE [--quiet]",
    "Prints one line per problem, then the result (\"ARCHIVE: OK\" or \"ARCHIVE: N\n"
    "problem(s)\"), on standard output; diagnostics go to standard error. Exits 0\n"
    "only if there is no problem. In a tag with graph.fb it also checks that the\n"
    "parameters and updater state match the graph and training config (what\n"
    "loading the checkpoint checks), naming each mismatch under params.txt,\n"
    "updater.txt or trainingConfig.fb. Every problem found is printed (every bad\n"
    "line of a damaged params.txt or updater.txt, every broken rule of a graph.fb\n"
    "or trainingConfig.fb), at most 20 per entry, then \"... and N more problems\n"
    "in this entry\"; N problem(s) counts those too.\n"
    "Options:\n  --quiet   print the problems only, not the result line\n"
    "\nExample:\n  modelzip verify model.zip && echo intact\n",
    run};

}  // namespace modelzip::cli
