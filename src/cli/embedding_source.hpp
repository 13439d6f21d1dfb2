// Where the embedding commands (embed, similar, analogy) get embeddings from:
// either ARCHIVE PARAM [--tag T] or a standalone finalfusion file.
#pragma once

#include <string>
#include <vector>

#include "cli/args.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/finalfusion.hpp"

namespace modelzip::cli {

// True when `path` names a standalone finalfusion file (it starts with the
// magic "FiFu"), false for anything else (an archive).
bool is_finalfusion_file(const std::string& path);

// Opens the embeddings the positionals name. Consumes 1 positional for a
// .fifu file, 2 (ARCHIVE PARAM) otherwise; returns how many via `used`.
// Zero-copy in both cases: the archive entry or file is memory-mapped.
finalfusion::Embeddings open_embeddings(const Args& args, std::size_t& used);

}  // namespace modelzip::cli
