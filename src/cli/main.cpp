// modelzip: command-line front end. Exit codes (kExitStatus): 0 success, 1
// error (one line on stderr naming archive/entry/line), 2 wrong usage, 128 +
// the signal when SIGINT or SIGTERM stopped the command.
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/interrupt.hpp"
#include "cli/man_page.hpp"
#include "cli/terminal.hpp"
#include "core/suggestions.hpp"
#include "modelzip/error.hpp"
#include "modelzip/version.hpp"

using namespace modelzip;
using namespace modelzip::cli;

namespace {

// The overview of `modelzip --help` (standard output), or, called without
// arguments, as the usage error it is (standard error).
void print_overview(std::ostream& out) {
  out << "modelzip " MODELZIP_VERSION ": " << kTagline
      << "\n\n"
         "Usage: modelzip COMMAND [ARGS...]   (modelzip COMMAND --help for details)\n"
         "       modelzip --help | --version\n\n"
         "Commands:\n";
  for (const Command* c : all_commands()) {
    std::string name(c->name);
    name.resize(10, ' ');
    out << "  " << name << " " << c->summary << "\n";
  }
  out << "\nExamples:\n  modelzip ls model.zip\n  modelzip import --help\n"
      << "\nArguments:\n"
      << kDoubleDash << "\nExit status:\n"
      << kExitStatus << "\nEnvironment:\n"
      << kEnvironment;
}

// `prefix` ("modelzip:") in red when standard error may have colour.
std::string error_prefix(std::string_view prefix = "modelzip:") {
  return paint(prefix, Colour::red, colour_enabled(2));
}

void print_help(const Command& c) {
  std::cout << "Usage: " << c.usage << "\n\n" << c.summary << "\n";
  if (!c.help.empty()) std::cout << "\n" << c.help;
  std::cout << "\n" << kDoubleDash;
}

// "unknown command" (or, for `name` starting with '-', "unknown option") on
// stderr, with a suggestion; the exit status (2).
int unknown_command(const std::string& name) {
  if (name.starts_with("-")) {
    std::cerr << error_prefix() << " unknown option " << printable(name)
              << " (see modelzip --help)\n";
    return 2;
  }
  std::vector<std::string_view> names;
  for (const Command* c : all_commands()) names.push_back(c->name);
  const std::string suggestion = detail::did_you_mean(name, names);
  std::cerr << error_prefix() << " unknown command " << quoted_name(name)
            << (suggestion.empty() ? " (see modelzip --help)" : suggestion) << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() >= 2 && args[1] != "help" && args[1] != "--help" && args[1] != "-h") {
      for (const Command* c : all_commands())
        if (c->name == args[1]) {
          print_help(*c);
          return 0;
        }
      return unknown_command(args[1]);
    }
    print_overview(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--man") {  // not listed: renders modelzip.1 at build time
    std::cout << man_page();
    return 0;
  }
  if (args[0] == "--version") {
    std::cout << "modelzip " << version() << "\n";  // the library it runs with
    return 0;
  }
  for (const Command* c : all_commands()) {
    if (c->name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const auto& a : rest) {
      if (a == "--") break;
      if (a == "--help" || a == "-h") {
        print_help(*c);
        return 0;
      }
    }
    if (c->changes_archive) install_interrupt_handlers();
    try {
      int rc = c->run(rest);
      std::cout.flush();
      if (!std::cout) {
        std::cerr << error_prefix() << " cannot write to standard output\n";
        return c->error_status;
      }
      return rc;
    } catch (const UsageError& e) {
      std::cerr << error_prefix("modelzip " + std::string(c->name) + ":") << " "
                << printable_message(e.what()) << "\nUsage: " << c->usage << "\n"
                << kDoubleDash;
      return 2;
    } catch (const std::exception& e) {  // modelzip::Error and anything else
      if (const int sig = interrupt_signal()) {
        std::cerr << error_prefix() << " interrupted by " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
                  << (c->keeps_work_on_interrupt ? ": " : ", nothing changed: ")
                  << printable_message(e.what()) << "\n";
        return 128 + sig;
      }
      std::cerr << error_prefix() << " " << printable_message(e.what()) << "\n";
      return c->error_status;
    }
  }
  return unknown_command(args[0]);
}
