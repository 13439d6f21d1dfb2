// The modelzip CLI's commands: one file per command (cmd_<name>.cpp), each
// defining one Command. Errors: commands throw modelzip::Error (exit 1, the
// message on stderr) or UsageError (exit 2, with the command's usage).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/shape_text.hpp"
#include "modelzip/archive.hpp"

namespace modelzip::cli {

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `modelzip --help`
  std::string_view usage;    // synopsis
  std::string_view help;     // options and examples for `modelzip CMD --help`
  int (*run)(const std::vector<std::string>& args);
  // Exit status for an error (modelzip::Error): 1, or 2 for commands whose
  // status 1 means something else (diff: "the tags differ").
  int error_status = 1;
  // Changes an archive: SIGINT and SIGTERM roll the change back and exit
  // with 128 + the signal (cli/interrupt.hpp). A command that changes an
  // archive only with some arguments (meta) installs the handlers itself.
  bool changes_archive = false;
  // Keeps what it finished when SIGINT or SIGTERM stops it (extract: the
  // files written; its error says so), so main() does not report "nothing
  // changed". The command installs the handlers itself.
  bool keeps_work_on_interrupt = false;
};

const std::vector<const Command*>& all_commands();

// The text of `modelzip --help` around the command list; the man page renders
// the same strings.
extern const std::string_view kTagline;      // "tagged ... archive"
extern const std::string_view kExitStatus;   // one paragraph
extern const std::string_view kEnvironment;  // one paragraph
// How to pass arguments that start with '-': shown with every command's usage
// (help and usage errors) and in the man page.
extern const std::string_view kDoubleDash;

// Names every tag of `archive` whose tables are damaged on standard error,
// one line each, with the damage and how to salvage; returns how many.
std::size_t report_damage(const Archive& archive);

// Throws Error(invalid_argument) naming the commands to use when parameter
// `name` of `tag` is an embedding, which tensor commands cannot read.
void require_tensor(const Archive& archive, const std::string& name, const std::string& tag);

// "1.5 MiB"-style size.
std::string human_bytes(std::uint64_t bytes);
using modelzip::detail::shape_text;

}  // namespace modelzip::cli
