// Where the embedding commands (embed, similar, analogy) get embeddings from:
// ARCHIVE PARAM [--tag T], a standalone finalfusion file, or a standalone
// file in another embedding format (fastText .bin/.ftz, word2vec .bin, text
// .txt/.vec), read through the converters (--format, --utf8 as for import).
#pragma once

#include <string>
#include <vector>

#include "cli/args.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::cli {

// Opens the embeddings the positionals name. Consumes 1 positional for a
// standalone embedding file, 2 (ARCHIVE PARAM) for an archive; returns how
// many via `used`. A file that starts like a zip (or is empty, or is not a
// regular file) is taken as an archive; a .fifu file or archive entry is
// memory-mapped (zero-copy); other embedding files are converted in memory
// (a note on stderr counts words changed by --utf8 lossy/escape). Anything
// else: Error(unsupported, "unknown format ..."). An option that does not
// apply to the source (--tag to a FILE, --format or --utf8 to an ARCHIVE)
// is a UsageError rather than ignored. A URL (http, https, s3) is read only
// as an ARCHIVE: one whose path ends in an embedding file's extension, given
// with --format, or whose content is not a zip is refused with
// Error(unsupported, "a URL: embedding files are read from local paths ...").
finalfusion::Embeddings open_embeddings(const Args& args, std::size_t& used);

// A query word as the vocabulary spells it: for embeddings whose words are
// in the --utf8 escape form, a word that is not valid UTF-8 (raw bytes typed
// in, e.g., a Latin-1 terminal) is escaped the same way; otherwise unchanged.
std::string query_word(const finalfusion::Embeddings& embeddings, const std::string& word);

// Error(not_found, "no embedding for 'W1', 'W2' in parameter 'P'") naming
// the `words` that `embeddings` has none for and the source (ARCHIVE and
// --tag, or FILE): the first `used` positionals (open_embeddings).
Error no_embedding(const Args& args, std::size_t used, const finalfusion::Embeddings& embeddings,
                   const std::vector<std::string>& words);

// The text form of a similarity or a vector component in human-readable output:
// the shortest decimal that reads back as the same float32, without exponent
// ("NaN", "inf", "-inf" for non-finite values), as finalfusion-utils prints them
// (Rust's f32 Display) and as export writes text files. --json prints the same
// floats exactly as doubles.
std::string float_text(float value);

// The --utf8 policy (strict by default); UsageError for an unknown name.
finalfusion::Utf8Policy utf8_policy(const Args& args);
// One line on stderr per kind of change a conversion of `path` made (words
// replaced by --utf8 lossy, words escaped by --utf8 escape); nothing if none.
void report_conversion(const std::string& path, const finalfusion::ConvertReport& report);

}  // namespace modelzip::cli

// Help text of embed, similar and analogy for the FILE source and for the
// options open_embeddings reads (macros: they concatenate with the
// commands' own string literals).
#define MODELZIP_EMBEDDING_SOURCE_HELP                                                  \
  "FILE: a standalone .fifu, fastText .bin/.ftz, word2vec .bin or text .txt/.vec\n"     \
  "file; other than .fifu it is converted in memory as import converts it (import it\n" \
  "once to query it often).\n"
#define MODELZIP_EMBEDDING_SOURCE_OPTIONS                                          \
  "  --tag T     the tag (default: the newest)\n"                                  \
  "  --format F  FILE's embedding format when content and extension do not tell\n" \
  "  --utf8 P    strict (default), lossy or escape: invalid UTF-8 in a converted FILE\n"
