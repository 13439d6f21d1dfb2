#include "cli/embedding_source.hpp"
#include "cli/terminal.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/open_archive.hpp"
#include "core/suggestions.hpp"
#include "core/utf8.hpp"
#include "finalfusion/convert/embedding_builder.hpp"
#include "finalfusion/embeddings_state.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/convert.hpp"

namespace modelzip::cli {
namespace {

// The first bytes of `path` (up to 4 KiB), or nullopt when it is not a
// readable, non-empty regular file (then Archive::open explains).
std::optional<std::string> file_head(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (head.empty()) return std::nullopt;
  return head;
}

// Whether the path of `url` (without its ?query and #fragment) ends in an
// extension of an embedding file: .fifu, fastText .bin/.ftz, word2vec .bin,
// text .txt/.vec/.w2v (ASCII case ignored).
bool embedding_file_url(const std::string& url) {
  std::string path = url.substr(0, url.find_first_of("?#"));
  path = path.substr(path.find("://") == std::string::npos ? 0 : path.find("://") + 3);
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return false;  // a host without a path
  std::string ext = std::filesystem::path(path.substr(slash + 1)).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* known : {".fifu", ".bin", ".ftz", ".vec", ".txt", ".w2v"})
    if (ext == known) return true;
  return false;
}

// The archive at `url`. A URL that names an embedding file (by extension or
// --format), or whose content is not a zip archive, is refused with the
// message of finalfusion::detail::refuse_url: embedding files are only read
// from local paths.
Archive open_remote_archive(const Args& args, const std::string& url) {
  if (args.value("--format") || embedding_file_url(url)) finalfusion::detail::refuse_url(url);
  try {
    return open_archive(url);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::corrupt && e.message().starts_with("not a zip archive"))
      finalfusion::detail::refuse_url(url);
    throw;
  }
}

finalfusion::Embeddings convert_file(const Args& args, const std::string& path,
                                     finalfusion::EmbeddingFormat format) {
  finalfusion::ConvertReport report;
  auto embeddings = finalfusion::load(
      path, format, finalfusion::ConvertOptions{.utf8 = utf8_policy(args), .report = &report});
  report_conversion(path, report);
  return embeddings;
}

}  // namespace

std::string float_text(float value) {
  std::string text;
  finalfusion::detail::append_float(text, value);
  return text;
}

std::string query_word(const finalfusion::Embeddings& embeddings, const std::string& word) {
  if (modelzip::detail::utf8_valid(word) || !finalfusion::words_escaped(embeddings)) return word;
  return modelzip::detail::utf8_escape(word);
}

finalfusion::Utf8Policy utf8_policy(const Args& args) {
  const std::string name = args.value_or("--utf8", "strict");
  auto policy = finalfusion::utf8_policy_from_name(name);
  if (!policy)
    throw UsageError("unknown --utf8 policy " + quoted_name(name) + " (strict, lossy, escape)");
  return *policy;
}

void report_conversion(const std::string& path, const finalfusion::ConvertReport& report) {
  if (report.words_replaced)
    std::cerr << path << ": " << report.words_replaced
              << " word(s) had invalid UTF-8 replaced by U+FFFD (--utf8 lossy)\n";
  if (report.words_escaped)
    std::cerr << path << ": " << report.words_escaped
              << " word(s) stored in the escaped form (--utf8 escape: \\\\ and \\xNN; "
                 "export restores the original bytes)\n";
}

finalfusion::Embeddings open_embeddings(const Args& args, std::size_t& used) {
  const std::string& first = args.path_at(0, "ARCHIVE or FILE");
  utf8_policy(args);  // an unknown --utf8 is a usage error whatever the source
  const auto head = file_head(first);
  const bool zip = head && (head->starts_with("PK\x03\x04") || head->starts_with("PK\x05\x06"));
  if (head && !zip) {
    used = 1;
    if (args.value("--tag"))
      throw UsageError("--tag selects a tag of an ARCHIVE; " + quoted_name(first) +
                       " is a standalone embedding file");
    std::optional<finalfusion::EmbeddingFormat> format;
    if (auto forced = args.value("--format")) {
      format = finalfusion::embedding_format_from_name(*forced);
      if (!format) throw UsageError("unknown --format " + quoted_name(*forced));
    } else {
      format = finalfusion::detect_embedding_format(first, *head);
    }
    if (!format)
      throw Error(ErrorCode::unsupported,
                  "unknown format: " + quoted_name(first) +
                      " is neither a modelzip archive nor an embedding file (.fifu, fastText "
                      ".bin/.ftz, word2vec .bin, .txt, .vec; or give --format)");
    if (*format == finalfusion::EmbeddingFormat::finalfusion)
      return finalfusion::Embeddings::open(first);
    return convert_file(args, first, *format);
  }
  used = 2;
  Archive archive =
      Archive::is_remote_url(first) ? open_remote_archive(args, first) : open_archive(first);
  if (args.value("--format") || args.value("--utf8"))
    throw UsageError("--format and --utf8 apply to a standalone FILE that is converted; " +
                     quoted_name(first) + " is an archive (import converted the embeddings)");
  const std::string& param = args.at(1, "PARAM");
  std::string tag = args.value_or("--tag", "");
  try {
    return finalfusion::Embeddings::read(archive.embedding_file(param, tag), param);
  } catch (const Error& e) {
    throw e.with_context({.archive = archive.name(), .tag = tag});
  }
}

namespace {

// " (did you mean 'Berlin'?)" for a word close to vocabulary words, also one
// that differs from them only in ASCII letter case (which did_you_mean takes
// for an exact match); "" when none is close or the vocabulary is too large
// to search on an error path.
std::string word_suggestion(const finalfusion::Embeddings& embeddings, std::string_view word) {
  const auto vocabulary = embeddings.vocab().words();
  if (std::string close = modelzip::detail::did_you_mean(word, vocabulary); !close.empty())
    return close;
  if (vocabulary.size() > modelzip::detail::kMaxSuggestionCandidates) return "";
  std::vector<std::string_view> same;
  for (const auto& candidate : vocabulary)
    if (candidate.size() == word.size() &&
        std::equal(candidate.begin(), candidate.end(), word.begin(),
                   [](char a, char b) {
                     return std::tolower(static_cast<unsigned char>(a)) ==
                            std::tolower(static_cast<unsigned char>(b));
                   }) &&
        same.size() < 3)
      same.push_back(candidate);
  if (same.empty()) return "";
  std::string text = " (did you mean ";
  for (std::size_t i = 0; i < same.size(); ++i)
    text += (i == 0 ? "" : i + 1 == same.size() ? " or " : ", ") + quoted_name(same[i]);
  return text + "?)";
}

}  // namespace

Error no_embedding(const Args& args, std::size_t used, const finalfusion::Embeddings& embeddings,
                   const std::vector<std::string>& words) {
  std::string missing;
  for (const auto& w : words)
    if (!embeddings.embedding(w))
      missing += (missing.empty() ? "" : ", ") + quoted_name(w) + word_suggestion(embeddings, w);
  if (used == 2) missing += " in parameter " + quoted_name(args.at(1, "PARAM"));
  return Error(ErrorCode::not_found, "no embedding for " + missing,
               ErrorContext{.archive = args.path_at(0, "ARCHIVE or FILE"),
                            .tag = used == 2 ? args.value_or("--tag", "") : ""});
}

}  // namespace modelzip::cli
