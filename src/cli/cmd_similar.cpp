#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/embedding_source.hpp"
#include "cli/json.hpp"
#include "cli/terminal.hpp"
#include "modelzip/error.hpp"

namespace modelzip::cli {

// Prints {word, similarity} results (shared by similar and analogy).
void print_similarities(const std::vector<finalfusion::WordSimilarity>& results, bool json) {
  if (json) {
    std::cout << "[";
    for (std::size_t i = 0; i < results.size(); ++i)
      std::cout << (i ? ",\n " : "") << "{\"word\": " << json_string(results[i].word)
                << ", \"similarity\": " << json_number(results[i].similarity) << "}";
    std::cout << "]\n";
    return;
  }
  for (const auto& r : results)
    std::cout << printable(r.word) << "\t" << float_text(r.similarity) << "\n";
}

namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag", "--format", "--utf8", "-k"}, {"--json"});
  std::size_t used = 0;
  finalfusion::Embeddings emb = open_embeddings(args, used);
  args.expect_positionals(used + 1, used + 1,
                          used == 2 ? std::vector<std::string_view>{"ARCHIVE", "PARAM", "WORD"}
                                    : std::vector<std::string_view>{"FILE", "WORD"});
  const std::string word = query_word(emb, args.at(used, "WORD"));
  auto k = static_cast<std::size_t>(args.number_or("-k", 10, 1, 1000000));
  auto results = emb.similar(word, k);
  if (!results) throw no_embedding(args, used, emb, {word});
  print_similarities(*results, args.flag("--json"));
  return 0;
}

}  // namespace

extern const Command kSimilarCommand{
    "similar", "Nearest neighbours of a word by cosine similarity",
    "modelzip similar (ARCHIVE PARAM | FILE) WORD [-k N] [--tag T] [--format F] [--utf8 P] "
    "[--json]",
    "The query word itself is excluded. Text output: a line per word, the word, a tab\n"
    "and its similarity (the shortest decimal that reads back as the float32, as\n"
    "finalfusion-utils prints it).\n" MODELZIP_EMBEDDING_SOURCE_HELP
    "Options:\n"
    "  -k N        how many (default 10)\n" MODELZIP_EMBEDDING_SOURCE_OPTIONS
    "  --json      a list of {\"word\", \"similarity\"}, best first\n"
    "\nExample:\n  modelzip similar model.zip words berlin -k 5\n",
    run};

}  // namespace modelzip::cli
