#include "cli/embedding_source.hpp"

#include <cstdio>

#include "modelzip/error.hpp"

namespace modelzip::cli {

bool is_finalfusion_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  bool yes = std::fread(magic, 1, 4, f) == 4 && std::string_view(magic, 4) == "FiFu";
  std::fclose(f);
  return yes;
}

finalfusion::Embeddings open_embeddings(const Args& args, std::size_t& used) {
  const std::string& first = args.at(0, "ARCHIVE or FILE.fifu");
  if (is_finalfusion_file(first)) {
    used = 1;
    return finalfusion::Embeddings::open(first, true);
  }
  used = 2;
  Archive archive = Archive::open(first);
  const std::string& param = args.at(1, "PARAM");
  std::string tag = args.value_or("--tag", "");
  try {
    return finalfusion::Embeddings::read(archive.embedding_file(param, tag), param);
  } catch (const Error& e) {
    throw e.with_context({.archive = archive.name(), .tag = tag});
  }
}

}  // namespace modelzip::cli
