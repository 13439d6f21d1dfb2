#include <cstdio>

#include "cli/command.hpp"

namespace modelzip::cli {

extern const Command kTagsCommand, kLsCommand, kCatCommand, kImportCommand, kExportCommand,
    kRmTagCommand, kVerifyCommand, kDiffCommand, kExtractCommand, kGcCommand, kEmbedCommand,
    kSimilarCommand, kAnalogyCommand, kGraphCommand, kInfoCommand, kMetaCommand;

const std::vector<const Command*>& all_commands() {
  static const std::vector<const Command*> commands = {
      &kTagsCommand,  &kLsCommand,    &kInfoCommand,    &kMetaCommand,
      &kGraphCommand, &kCatCommand,   &kImportCommand,  &kExportCommand,
      &kRmTagCommand, &kDiffCommand,  &kVerifyCommand,  &kExtractCommand,
      &kGcCommand,    &kEmbedCommand, &kSimilarCommand, &kAnalogyCommand,
  };
  return commands;
}

const std::string_view kTagline = "tagged machine-learning checkpoints in one zip archive";
const std::string_view kExitStatus =
    "0 on success; 1 on error, with one line on standard error that names the archive,\n"
    "entry and line or offset; 2 for wrong usage, with the command's usage.\n"
    "diff exits 1 when the tags differ and 2 on errors, like diff(1).\n";
const std::string_view kDoubleDash =
    "Options may come anywhere; put -- before tags, words or names that start with -\n"
    "(e.g. modelzip similar model.zip words -- -Mozilla).\n";
const std::string_view kEnvironment =
    "Colour and progress bars are written only to a terminal. NO_COLOR, when set and\n"
    "not empty, turns colour off; so does TERM=dumb.\n";

std::string human_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace modelzip::cli
