#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/embedding_source.hpp"
#include "modelzip/error.hpp"

namespace modelzip::cli {

void print_similarities(const std::vector<finalfusion::WordSimilarity>& results, bool json);

namespace {

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--tag", "--format", "--utf8", "-k"}, {"--json"});
  std::size_t used = 0;
  finalfusion::Embeddings emb = open_embeddings(args, used);
  args.expect_positionals(used + 3, used + 3,
                          used == 2
                              ? std::vector<std::string_view>{"ARCHIVE", "PARAM", "A", "B", "C"}
                              : std::vector<std::string_view>{"FILE", "A", "B", "C"});
  auto k = static_cast<std::size_t>(args.number_or("-k", 10, 1, 1000000));
  const std::string a = query_word(emb, args.at(used, "A")),
                    b = query_word(emb, args.at(used + 1, "B")),
                    c = query_word(emb, args.at(used + 2, "C"));
  auto results = emb.analogy(a, b, c, k);
  if (!results) throw no_embedding(args, used, emb, {a, b, c});
  print_similarities(*results, args.flag("--json"));
  return 0;
}

}  // namespace

extern const Command kAnalogyCommand{
    "analogy", "Solve 'A is to B as C is to ?' with embeddings",
    "modelzip analogy (ARCHIVE PARAM | FILE) A B C [-k N] [--tag T] [--format F] [--utf8 P] "
    "[--json]",
    "Ranks words by cosine similarity to B - A + C; the three query words are\n"
    "excluded. Text output as for similar: word, tab, similarity.\n" MODELZIP_EMBEDDING_SOURCE_HELP
    "Options:\n"
    "  -k N        how many (default 10)\n" MODELZIP_EMBEDDING_SOURCE_OPTIONS
    "  --json      a list of {\"word\", \"similarity\"}, best first\n"
    "\nExample:\n  modelzip analogy model.zip words berlin germany paris\n",
    run};

}  // namespace modelzip::cli
