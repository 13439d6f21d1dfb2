#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/embedding_source.hpp"
#include "cli/json.hpp"
#include "cli/terminal.hpp"

namespace modelzip::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag", "--format", "--utf8"}, {"--json"});
  std::size_t used = 0;
  finalfusion::Embeddings emb = open_embeddings(args, used);
  std::vector<std::string> words(args.positional().begin() + static_cast<std::ptrdiff_t>(used),
                                 args.positional().end());
  for (auto& w : words) w = query_word(emb, w);
  if (words.empty()) throw UsageError("missing WORD");
  const bool json = args.flag("--json");
  int missing = 0;
  if (json) std::cout << "{";
  for (std::size_t i = 0; i < words.size(); ++i) {
    auto v = emb.unit_embedding(words[i]);
    if (json) {
      std::cout << (i ? ",\n " : "") << json_string(words[i]) << ": ";
      if (!v) {
        std::cout << "null";
      } else {
        std::cout << "[";
        for (std::size_t d = 0; d < v->size(); ++d)
          std::cout << (d ? ", " : "") << json_number((*v)[d]);
        std::cout << "]";
      }
      continue;
    }
    if (!v) {
      std::cerr << "modelzip: "
                << printable_message(no_embedding(args, used, emb, {words[i]}).what()) << "\n";
      ++missing;
      continue;
    }
    std::cout << printable(words[i]);
    for (float x : *v) std::cout << " " << float_text(x);
    std::cout << "\n";
  }
  if (json) std::cout << "}\n";
  return missing ? 1 : 0;
}

}  // namespace

extern const Command kEmbedCommand{
    "embed", "Print the embeddings of words (unknown words through their subwords)",
    "modelzip embed (ARCHIVE PARAM | FILE) WORD... [--tag T] [--format F] [--utf8 P] [--json]",
    "Prints unit vectors (the directions similar and analogy compare; export writes\n"
    "the original vectors): a known word's row normalized as import normalizes it,\n"
    "so the same vectors print the same from a .fifu, a word2vec or text file and an\n"
    "archive (imported with or without --no-normalize); unknown words the normalized\n"
    "sum of their subword n-gram rows (floret: their mean) when the vocabulary has\n"
    "subwords. Text output: one line per word, the word then its components, as a\n"
    "text embedding file holds them (the shortest decimal that reads back as the\n"
    "float32); exit status 1 if a word has no embedding.\n" MODELZIP_EMBEDDING_SOURCE_HELP
    "Options:\n" MODELZIP_EMBEDDING_SOURCE_OPTIONS
    "  --json      an object: word -> list of floats, or null when there is none\n"
    "\nExamples:\n  modelzip embed model.zip words berlin paris\n"
    "  modelzip embed vectors.fifu berlin --json\n",
    run};

}  // namespace modelzip::cli
