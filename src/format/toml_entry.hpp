// The TOML entries of the format (modelzip.toml, <tag>/metadata.toml):
// parsing with the rules they share and writing them the one way readers
// get back exactly (FORMAT.md sections 3 and 3.1).
//
// Thread safety: pure functions.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>

#include "modelzip/limits.hpp"

namespace modelzip::format {

// The table of `text`. Throws Error(limit_exceeded) "<what> is too large"
// over limits.max_text_entry_bytes, Error(corrupt) at line 1 for a UTF-8
// byte-order mark and with the line for a TOML syntax error.
toml::table parse_toml_entry(std::string_view text, const Limits& limits, std::string_view what);

// The text of `root`: basic strings with escapes only (toml++'s default
// formatter writes a value with a newline as a multi-line literal string,
// and TOML drops a newline right after the opening delimiter, so "\nx" would
// read back "x"), ending in a newline.
std::string write_toml_entry(const toml::table& root);

// `text` as a TOML basic string ("...", with escapes), as write_toml_entry
// writes string values.
std::string toml_basic_string(std::string_view text);

// `key` as a TOML key: bare when it is one or more of A-Z a-z 0-9 _ -, else
// quoted (a basic string). toml++'s formatter cannot be used for keys of
// arbitrary text: it writes a key with a single quote (a'b) bare, which no
// TOML parser reads back.
std::string toml_key(std::string_view key);

}  // namespace modelzip::format
