#include "cli/man_page.hpp"

#include <string_view>
#include <vector>

#include "cli/command.hpp"

namespace modelzip::cli {
namespace {

// One line of text escaped for roff. `-` becomes `\-` (a real minus, so that
// options can be searched and copied), `\` becomes `\e`, and a leading `.` or
// `'` is protected with `\&` so it is not read as a request.
std::string escape(std::string_view line) {
  std::string out;
  if (!line.empty() && (line[0] == '.' || line[0] == '\'')) out += "\\&";
  for (char c : line) {
    if (c == '\\')
      out += "\\e";
    else if (c == '-')
      out += "\\-";
    else
      out += c;
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return lines;
}

std::size_t indent_of(std::string_view line) {
  std::size_t i = line.find_first_not_of(' ');
  return i == std::string_view::npos ? line.size() : i;
}

// Paragraph text: lines as they are (roff fills them); blank lines separate
// paragraphs.
void render_text(std::string& out, std::string_view text) {
  for (std::string_view line : split_lines(text)) {
    if (line.empty())
      out += ".PP\n";
    else
      out += escape(line.substr(indent_of(line))) + "\n";
  }
}

// A command's help text: prose, then "Options:" (lines "  --opt ARG   what",
// deeper-indented lines continue the description) and "Example:"/"Examples:"
// (one command per indented line).
void render_help(std::string& out, std::string_view help) {
  enum class Section { prose, options, examples } section = Section::prose;
  for (std::string_view line : split_lines(help)) {
    if (line == "Options:") {
      section = Section::options;
      out += ".PP\nOptions:\n";
      continue;
    }
    if (line == "Example:" || line == "Examples:") {
      section = Section::examples;
      out += ".PP\n" + std::string(line) + "\n.RS\n.nf\n";
      continue;
    }
    if (line.empty()) {
      if (section == Section::examples) out += ".fi\n.RE\n";
      section = Section::prose;
      out += ".PP\n";
      continue;
    }
    std::size_t indent = indent_of(line);
    std::string_view body = line.substr(indent);
    switch (section) {
      case Section::prose:
        out += escape(body) + "\n";
        break;
      case Section::examples:
        out += escape(body) + "\n";
        break;
      case Section::options: {
        if (indent > 2 || body.empty() || body[0] != '-') {  // continues a description
          out += escape(body) + "\n";
          break;
        }
        std::size_t gap = body.find("  ");
        std::string_view option = body.substr(0, gap);
        std::string_view what =
            gap == std::string_view::npos ? std::string_view() : body.substr(gap);
        what.remove_prefix(indent_of(what));
        out += ".TP\n.B " + escape(option) + "\n" + escape(what) + "\n";
        break;
      }
    }
  }
  if (section == Section::examples) out += ".fi\n.RE\n";
}

}  // namespace

std::string man_page() {
  std::string out;
  out += ".TH MODELZIP 1 \"\" \"modelzip " MODELZIP_VERSION "\" \"User Commands\"\n";
  out += ".SH NAME\nmodelzip \\- " + escape(kTagline) + "\n";
  out += ".SH SYNOPSIS\n.B modelzip\n.I COMMAND\n.RI [ ARGS ...]\n.br\n";
  out += ".B modelzip\n.I COMMAND\n.B \\-\\-help\n.br\n";
  out += ".B modelzip \\-\\-help\n.br\n.B modelzip \\-\\-version\n";
  out +=
      ".SH DESCRIPTION\n.B modelzip\nlists, reads, converts, edits and checks modelzip archives: " +
      escape(kTagline) + ".\nThe commands:\n";
  for (const Command* c : all_commands())
    out += ".TP\n.B " + escape(c->name) + "\n" + escape(c->summary) + "\n";
  out += ".SH COMMANDS\n";
  for (const Command* c : all_commands()) {
    out += ".SS " + escape(c->name) + "\n";
    out += ".B " + escape(c->usage) + "\n.PP\n" + escape(c->summary) + ".\n";
    if (!c->help.empty()) {
      out += ".PP\n";
      render_help(out, c->help);
    }
  }
  out += ".SH ARGUMENTS\n";
  render_text(out, kDoubleDash);
  out += ".SH EXIT STATUS\n";
  render_text(out, kExitStatus);
  out += ".SH ENVIRONMENT\n";
  render_text(out, kEnvironment);
  out += ".SH SEE ALSO\n.BR unzip (1),\n.BR zipinfo (1)\n";
  return out;
}

}  // namespace modelzip::cli
