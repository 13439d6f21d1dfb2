#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <string_view>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/interrupt.hpp"
#include "cli/json.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "core/utf8.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/tag_metadata.hpp"
#include "modelzip/writer.hpp"

namespace modelzip::cli {
namespace {

// The metadata fields a user may set, with their option and key names.
struct Field {
  const char* option;    // "--name"
  const char* key;       // "name" (for --clear and the printed list)
  const char* json_key;  // "model_name": as info --json and the library name it
  std::optional<std::string> Metadata::*member;
};
constexpr Field kFields[] = {
    {"--name", "name", "model_name", &Metadata::model_name},
    {"--version", "version", "model_version", &Metadata::model_version},
    {"--quantization", "quantization", "quantization", &Metadata::quantization},
    {"--description", "description", "description", &Metadata::description},
};

void print(const Metadata& m, bool json) {
  if (json) {
    const auto value = [&m](const Field& f) {
      return (m.*f.member) ? json_string(*(m.*f.member)) : std::string("null");
    };
    std::cout << "{\"format_version\": " << m.format_version
              << ", \"writer\": " << json_string(m.writer);
    for (const Field& f : kFields) std::cout << ", " << json_string(f.json_key) << ": " << value(f);
    // Deprecated in 0.2, gone in 0.3 (docs/cli.md, "Changes in 0.2"): the
    // keys of 0.1, for scripts that read them.
    for (const Field& f : kFields)
      if (std::string_view(f.key) != f.json_key)
        std::cout << ", " << json_string(f.key) << ": " << value(f);
    std::cout << "}\n";
    return;
  }
  for (const Field& f : kFields) {
    std::string label = f.key;
    label.resize(14, ' ');
    const auto& v = m.*f.member;
    std::cout << label << (v ? printable(*v) : "(not set)") << "\n";
  }
  std::cout << "writer        " << printable(m.writer) << "\nformat        version "
            << m.format_version << "\n";
}

// The free-form metadata of a tag (modelzip/tag_metadata.hpp): "KEY = VALUE"
// lines in key order (control characters escaped), or a JSON object.
void print_tag_metadata(const std::map<std::string, std::string>& pairs, bool json) {
  if (json) {
    std::cout << "{";
    const char* separator = "";
    for (const auto& [key, value] : pairs) {
      std::cout << separator << json_string(key) << ": " << json_string(value);
      separator = ", ";
    }
    std::cout << "}\n";
    return;
  }
  for (const auto& [key, value] : pairs)
    std::cout << printable(key) << " = " << printable(value) << "\n";
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--name", "--version", "--quantization", "--description", "--clear", "--tag"},
            {"--json"});
  args.expect_positionals(1, 1, {"ARCHIVE"});
  const std::string& path = args.path_at(0, "ARCHIVE");
  if (auto tag = args.value("--tag")) {
    for (const char* option : {"--name", "--version", "--quantization", "--description"})
      if (args.value(option))
        throw UsageError(std::string("--tag shows a tag's metadata; ") + option +
                         " sets the archive's (give one or the other)");
    if (!args.values("--clear").empty())
      throw UsageError("--tag shows a tag's metadata; --clear changes the archive's");
    print_tag_metadata(tag_metadata(open_archive(path), *tag), args.flag("--json"));
    return 0;
  }
  // Changes: a value to set, or nullopt to clear; fields not named stay.
  std::vector<std::pair<const Field*, std::optional<std::string>>> changes;
  for (const std::string& key : args.values("--clear")) {
    const Field* found = nullptr;
    for (const Field& f : kFields)
      if (key == f.key) found = &f;
    if (!found)
      throw UsageError("--clear takes name, version, quantization or description, not " +
                       quoted_name(key));
    changes.emplace_back(found, std::nullopt);
  }
  for (const Field& f : kFields)
    if (auto v = args.value(f.option)) {
      if (!detail::utf8_valid(*v)) throw UsageError(std::string(f.option) + " is not UTF-8 text");
      changes.emplace_back(&f, *v);
    }
  if (changes.empty()) {  // read-only: the archive may be a URL
    print(open_archive(path).metadata(), args.flag("--json"));
    return 0;
  }
  require_existing_archive(path);  // the Writer would create it
  // A change rewrites the archive: SIGINT and SIGTERM roll it back, as for
  // the other commands that change an archive (a read alone keeps the default
  // action, so that Ctrl-C ends it at once).
  install_interrupt_handlers();
  Writer writer = Writer::open(path, writer_options(path));
  writer.update_metadata([&changes](Metadata& m) {
    for (const auto& [field, value] : changes) m.*(field->member) = value;
  });
  writer.commit();
  print(Archive::open(path).metadata(), args.flag("--json"));
  return 0;
}

}  // namespace

extern const Command kMetaCommand{
    "meta", "Show or set the archive's metadata (model name, version, ...)",
    "modelzip meta ARCHIVE [--name N] [--version V] [--quantization Q] [--description D] "
    "[--clear KEY]... [--tag T] [--json]",
    "Without options, prints the metadata (modelzip.toml). With options, changes only\n"
    "the fields given and keeps the others, then prints the result. The archive is\n"
    "replaced atomically; tags and data are not touched.\n"
    "With --tag, prints the tag's free-form metadata instead (string pairs, as\n"
    "safetensors' __metadata__: given at save, or kept by import), one KEY = VALUE\n"
    "line per pair in key order; nothing when it has none.\n"
    "Options:\n"
    "  --tag T             show tag T's free-form metadata (read only)\n"
    "  --name N            the model's name\n"
    "  --version V         the model's version\n"
    "  --quantization Q    how the weights are quantized (e.g. none, int8-per-channel)\n"
    "  --description D     free text\n"
    "  --clear KEY         remove a field: name, version, quantization or description\n"
    "                      (repeatable)\n"
    "  --json              print an object with format_version, writer, model_name,\n"
    "                      model_version, quantization, description (null when not\n"
    "                      set), as info --json's metadata; name and version repeat\n"
    "                      model_name and model_version (deprecated, gone in 0.3);\n"
    "                      with --tag, an object of the tag's pairs\n"
    "\nExamples:\n  modelzip meta model.zip\n"
    "  modelzip meta model.zip --name resnet18 --version 2 --description 'ImageNet, 90 epochs'\n"
    "  modelzip meta model.zip --clear quantization\n"
    "  modelzip meta model.zip --tag step-1 --json\n",
    run};

}  // namespace modelzip::cli
