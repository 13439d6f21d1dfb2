// Archive-level metadata, stored as TOML in the entry `modelzip.toml`:
// the format version and optional compatibility metadata. String values are
// UTF-8 text (writers refuse other bytes: Writer::update_metadata).
//
// Thread safety: a plain value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "modelzip/export.hpp"

namespace modelzip {

inline constexpr std::uint32_t kFormatVersion = 1;

struct MODELZIP_API Metadata {
  std::uint32_t format_version = kFormatVersion;
  std::optional<std::string> model_name{};
  std::optional<std::string> model_version{};
  std::optional<std::string> quantization{};  // e.g. "none", "int8-per-channel"
  std::optional<std::string> description{};
  std::string writer = "modelzip";  // the software that wrote the archive last
  bool operator==(const Metadata&) const = default;
};

}  // namespace modelzip
