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
  args.expect_positionals(1, 1);
  const std::string& path = args.at(0, "ARCHIVE");
  std::vector<Problem> problems;
  try {
    Archive archive = open_archive(path);
    ProgressBar bar("verifying");
    problems = archive.verify(bar.callback());
  } catch (const Error& e) {
    if (e.code() == ErrorCode::io) throw;
    std::cout << printable(e.what()) << "\n";  // names the archive, entry and line itself
    problems.push_back(Problem{e.context().entry, e.message()});
    if (!args.flag("--quiet")) std::cerr << printable(path) << ": cannot be opened\n";
    return 1;
  }
  const bool colour_out = colour_enabled(1), colour_err = colour_enabled(2);
  for (const auto& p : problems)
    std::cout << printable(p.entry.empty() ? path : path + ": entry '" + p.entry + "'") << ": "
              << paint(printable(p.message), Colour::red, colour_out) << "\n";
  if (!args.flag("--quiet"))
    std::cerr << printable(path) << ": "
              << (problems.empty() ? paint("OK", Colour::green, colour_err)
                                   : paint(std::to_string(problems.size()) + " problem(s)",
                                           Colour::red, colour_err))
              << "\n";
  return problems.empty() ? 0 : 1;
}

}  // namespace

extern const Command kVerifyCommand{
    "verify", "Check everything: structure, every CRC, blob, FlatBuffer and reference",
    "modelzip verify ARCHIVE [--quiet]",
    "Prints one line per problem on standard output and exits 0 only if there is none.\n"
    "Options:\n  --quiet   do not print the summary line on standard error\n"
    "\nExample:\n  modelzip verify model.zip && echo intact\n",
    run};

}  // namespace modelzip::cli
