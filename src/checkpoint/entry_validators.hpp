// Validators for entry types that other modules own (finalfusion files,
// graph and training-config FlatBuffers, a tag's metadata.toml).
// Archive::verify and Writer::commit call the validator whose name pattern
// matches an entry.
//
// Each validator throws modelzip::Error for invalid content. Thread-safe:
// the table is fixed at compile time.
#pragma once

#include <functional>
#include <string_view>

#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"

namespace modelzip {

using EntryValidator = void (*)(const Bytes& contents, const Limits& limits);

// The validator for `entry_name` ("<tag>/params/<n>.fifu", "<tag>/graph.fb",
// ...), or nullptr when the entry type has none.
EntryValidator find_entry_validator(std::string_view entry_name);

}  // namespace modelzip
