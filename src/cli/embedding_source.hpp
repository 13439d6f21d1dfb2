// Where the embedding commands (embed, similar, analogy) get embeddings from:
// ARCHIVE PARAM [--tag T], a standalone finalfusion file, or a standalone
// file in another embedding format (fastText .bin/.ftz, word2vec .bin, text
// .txt/.vec), read through the converters (--format, --utf8 as for import).
#pragma once

#include <string>
#include <vector>

#include "cli/args.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/finalfusion.hpp"

namespace modelzip::cli {

// Opens the embeddings the positionals name. Consumes 1 positional for a
// standalone embedding file, 2 (ARCHIVE PARAM) for an archive; returns how
// many via `used`. A file that starts like a zip (or is empty, or is not a
// regular file) is taken as an archive; a .fifu file or archive entry is
// memory-mapped (zero-copy); other embedding files are converted in memory
// (a note on stderr counts words changed by --utf8 lossy/escape). Anything
// else: Error(unsupported, "unknown format ...").
finalfusion::Embeddings open_embeddings(const Args& args, std::size_t& used);

}  // namespace modelzip::cli
