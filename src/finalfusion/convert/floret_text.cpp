// floret text vectors: a header "n_buckets dims min_n max_n n_hashes seed
// bow eow", then one "index v1 ... vd" line per bucket.
#include <ostream>

#include "core/fail.hpp"
#include "finalfusion/convert/embedding_builder.hpp"
#include "finalfusion/embeddings_state.hpp"

namespace modelzip::finalfusion {
namespace detail {
void write_stream(std::ostream& out, const std::string& text);
}  // namespace detail

namespace {
using modelzip::detail::fail_corrupt;

Embeddings read_floret_text_bytes(const Bytes& data) {
  const std::string_view text = detail::without_utf8_bom(data.as_string_view());
  std::size_t pos = text.find('\n');
  if (pos == std::string_view::npos) fail_corrupt("floret: missing the header line", {.line = 1});
  const std::string_view header = text.substr(0, pos);
  std::vector<std::string_view> fields;
  for (std::size_t i = 0; i <= header.size();) {
    const std::size_t j = std::min(header.find(' ', i), header.size());
    fields.push_back(header.substr(i, j - i));
    i = j + 1;
  }
  if (fields.size() != 8)
    fail_corrupt("floret: expected 'n_buckets dims min_n max_n n_hashes seed bow eow'",
                 {.line = 1});
  std::uint64_t numbers[6];
  for (int i = 0; i < 6; ++i) {
    auto v = detail::parse_count(fields[i]);
    if (!v)
      fail_corrupt("floret: header field " + std::to_string(i + 1) + " is not a number",
                   {.line = 1});
    numbers[i] = *v;
  }
  const std::uint64_t buckets = numbers[0], dims = numbers[1];
  if (buckets == 0) fail_corrupt("floret: at least 1 bucket expected", {.line = 1});
  if (dims == 0) fail_corrupt("floret: at least 1 dimension expected", {.line = 1});
  if (numbers[2] > UINT32_MAX || numbers[3] > UINT32_MAX || numbers[4] > UINT32_MAX)
    fail_corrupt("floret: n-gram lengths or hash count out of range", {.line = 1});
  detail::WordDecoder markers(ConvertOptions{});  // strict
  std::string bow = markers.decode(fields[6], "floret bow", {.line = 1});
  std::string eow = markers.decode(detail::trim_ascii(fields[7]), "floret eow", {.line = 1});
  Vocab vocab = Vocab::Access::make(detail::make_floret_vocab(
      static_cast<std::uint32_t>(numbers[2]), static_cast<std::uint32_t>(numbers[3]), buckets,
      static_cast<std::uint32_t>(numbers[4]), static_cast<std::uint32_t>(numbers[5]),
      std::move(bow), std::move(eow), detail::Failure{ErrorCode::corrupt, {.line = 1}}));

  // Each value needs at least 2 bytes: never reserve more than the input holds.
  std::vector<float> matrix;
  matrix.reserve(
      static_cast<std::size_t>(std::min<std::uint64_t>(buckets * dims, text.size() / 2)));
  std::uint64_t line = 1, rows = 0;
  ++pos;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view rest = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    std::uint64_t count = 0;
    bool first = true;
    while (true) {
      while (!rest.empty() && detail::is_ascii_space(rest.front())) rest.remove_prefix(1);
      if (rest.empty()) break;
      std::size_t n = 0;
      while (n < rest.size() && !detail::is_ascii_space(rest[n])) ++n;
      const auto field = rest.substr(0, n);
      rest.remove_prefix(n);
      if (first) {  // the bucket index column
        first = false;
        continue;
      }
      auto value = detail::parse_float(field);
      if (!value)
        fail_corrupt(
            "floret: cannot parse vector component '" + std::string(field.substr(0, 32)) + "'",
            {.line = line});
      matrix.push_back(*value);
      ++count;
    }
    if (count != dims)
      fail_corrupt(
          "floret: " + std::to_string(count) + " components, expected " + std::to_string(dims),
          {.line = line});
    ++rows;
  }
  if (rows != buckets)
    fail_corrupt("floret: header declares " + std::to_string(buckets) + " buckets, the file has " +
                     std::to_string(rows) + " rows",
                 {.line = line});
  return Embeddings::from_matrix(std::move(vocab), std::move(matrix),
                                 static_cast<std::size_t>(dims));
}

}  // namespace

Embeddings read_floret_text(const Bytes& data, std::string_view source) {
  return detail::read_from(source, [&] { return read_floret_text_bytes(data); });
}

void write_floret_text(std::ostream& out, const Embeddings& embeddings) {
  const Vocab& v = embeddings.vocab();
  if (v.kind() != VocabKind::floret)
    throw Error(ErrorCode::invalid_argument, "floret text needs a floret vocabulary");
  const std::size_t d = embeddings.dims();
  detail::write_stream(out, std::to_string(v.n_buckets()) + " " + std::to_string(d) + " " +
                                std::to_string(v.min_n()) + " " + std::to_string(v.max_n()) + " " +
                                std::to_string(v.n_hashes()) + " " + std::to_string(v.seed()) +
                                " " + v.bow() + " " + v.eow() + "\n");
  std::vector<float> row(d);
  std::string line;
  for (std::size_t r = v.words_len(); r < embeddings.rows(); ++r) {
    embeddings.row(r, row);
    line = std::to_string(r - v.words_len());
    for (float x : row) {
      line += ' ';
      detail::append_float(line, x);
    }
    line += '\n';
    detail::write_stream(out, line);
  }
}

}  // namespace modelzip::finalfusion
