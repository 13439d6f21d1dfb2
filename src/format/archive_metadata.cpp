#include "format/archive_metadata.hpp"

#include <optional>
#include <string>
#include <string_view>

#include "core/utf8.hpp"
#include "format/toml_entry.hpp"
#include "modelzip/error.hpp"

namespace modelzip::format {
namespace {

std::optional<std::string> optional_string(const toml::table& table, std::string_view key,
                                           std::string_view where) {
  const toml::node* node = table.get(key);
  if (!node) return std::nullopt;
  if (auto s = node->value<std::string>()) return *s;
  throw Error(ErrorCode::corrupt, std::string(where) + std::string(key) + " must be a string",
              ErrorContext{.line = node->source().begin.line});
}

}  // namespace

Metadata parse_metadata(std::string_view text, const Limits& limits) {
  const toml::table root = parse_toml_entry(text, limits, "metadata entry");
  Metadata m;
  const toml::node* version = root.get("format_version");
  if (!version) throw Error(ErrorCode::corrupt, "format_version is missing");
  // Exact: a float (1.0) or a boolean is not an integer.
  auto v = version->value_exact<std::int64_t>();
  if (!v || *v < 1)
    throw Error(ErrorCode::corrupt, "format_version must be a positive integer",
                ErrorContext{.line = version->source().begin.line});
  if (*v > static_cast<std::int64_t>(kFormatVersion))
    throw Error(ErrorCode::unsupported, "format version " + std::to_string(*v) +
                                            " is newer than this reader (" +
                                            std::to_string(kFormatVersion) + ")");
  m.format_version = static_cast<std::uint32_t>(*v);
  if (auto w = optional_string(root, "writer", "")) m.writer = *w;
  if (const toml::node* model = root.get("model")) {
    const toml::table* t = model->as_table();
    if (!t)
      throw Error(ErrorCode::corrupt, "model must be a table",
                  ErrorContext{.line = model->source().begin.line});
    m.model_name = optional_string(*t, "name", "model.");
    m.model_version = optional_string(*t, "version", "model.");
    m.quantization = optional_string(*t, "quantization", "model.");
    m.description = optional_string(*t, "description", "model.");
  }
  return m;
}

void check_metadata(const Metadata& m) {
  auto check = [](std::string_view key, const std::string& value) {
    if (auto at = detail::utf8_invalid_at(value))
      throw Error(ErrorCode::invalid_argument,
                  "metadata " + std::string(key) + " is not UTF-8 text (invalid byte at index " +
                      std::to_string(*at) + ")",
                  ErrorContext{.entry = std::string(kMetadataEntry)});
  };
  check("writer", m.writer);
  if (m.model_name) check("model.name", *m.model_name);
  if (m.model_version) check("model.version", *m.model_version);
  if (m.quantization) check("model.quantization", *m.quantization);
  if (m.description) check("model.description", *m.description);
}

std::string write_metadata(const Metadata& m) {
  check_metadata(m);
  toml::table root;
  root.insert("format_version", static_cast<std::int64_t>(m.format_version));
  root.insert("writer", m.writer);
  toml::table model;
  if (m.model_name) model.insert("name", *m.model_name);
  if (m.model_version) model.insert("version", *m.model_version);
  if (m.quantization) model.insert("quantization", *m.quantization);
  if (m.description) model.insert("description", *m.description);
  if (!model.empty()) root.insert("model", std::move(model));
  return write_toml_entry(root);
}

}  // namespace modelzip::format
