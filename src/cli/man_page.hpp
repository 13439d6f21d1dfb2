// The modelzip(1) manual page in roff (man macros), rendered from the same
// Command table and overview text as `modelzip --help`, so the two cannot
// drift apart. Built into modelzip.1 at build time by `modelzip --man`.
#pragma once

#include <string>

namespace modelzip::cli {

// The whole page. Every command gets a subsection with its synopsis, summary,
// description, options (one .TP each) and examples (unfilled). Text is escaped
// for roff: backslashes, hyphens, and lines that begin with '.' or '\''.
std::string man_page();

}  // namespace modelzip::cli
