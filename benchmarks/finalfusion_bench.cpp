// finalfusion_bench: speed of finalfusion embeddings in modelzip, each
// number printed beside a plain-memory baseline measured in the same run.
//
//   finalfusion_bench [--rows N] [--dims D] [--bucket-exponent E]
//                     [--lookups L] [--queries Q] [--dir PATH]
//
// A synthetic matrix of N rows x D dims (default 1,000,000 x 300) is built
// with a bucket-subword vocabulary (N - 2^E words plus 2^E n-gram buckets),
// written as a .fifu file and as an embedding entry of a modelzip archive,
// then measured:
//   load      Embeddings::open with mmap, with read(), and through an archive
//             (Archive::open + embedding_file + Embeddings::read), against
//             reading the file and memcpy of the same bytes;
//   lookups   known words (a row copy) and unknown words (sum of n-gram
//             rows), against memcpy of as many random rows;
//   queries   similar(word, 10), against a memcpy pass over the same matrix.
// Numbers are medians or bests of a few repetitions; the machine may be
// shared, so compare numbers within one run only.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "modelzip/archive.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "modelzip/writer.hpp"

namespace ff = modelzip::finalfusion;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::size_t rows = 1'000'000;
  std::size_t dims = 300;
  std::uint32_t bucket_exponent = 16;
  std::size_t lookups = 200'000;
  std::size_t queries = 20;
  std::filesystem::path dir;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Best (smallest) time of `repeat` runs of fn.
double best_of(int repeat, const std::function<void()>& fn) {
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) {
    const auto start = Clock::now();
    fn();
    best = std::min(best, seconds_since(start));
  }
  return best;
}

double gib_per_s(double bytes, double seconds) {
  return bytes / seconds / (1024.0 * 1024 * 1024);
}

void print_row(const std::string& what, double seconds, double bytes,
               const std::string& extra = {}) {
  std::printf("  %-44s %9.3f ms  %7.2f GiB/s  %s\n", what.c_str(), seconds * 1e3,
              gib_per_s(bytes, seconds), extra.c_str());
}

void print_rate(const std::string& what, double per_second, const std::string& extra = {}) {
  std::printf("  %-44s %12.0f /s  %s\n", what.c_str(), per_second, extra.c_str());
}

// Keeps results alive so the optimizer cannot drop the work.
volatile float g_sink = 0;

float checksum(std::span<const float> values) {
  // Reads every value (eight independent sums so the loop runs at memory speed).
  float acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= values.size(); i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += values[i + k];
  for (; i < values.size(); ++i) acc[0] += values[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "missing value for " << arg << "\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--rows")
      o.rows = std::stoull(value());
    else if (arg == "--dims")
      o.dims = std::stoull(value());
    else if (arg == "--bucket-exponent")
      o.bucket_exponent = static_cast<std::uint32_t>(std::stoul(value()));
    else if (arg == "--lookups")
      o.lookups = std::stoull(value());
    else if (arg == "--queries")
      o.queries = std::stoull(value());
    else if (arg == "--dir")
      o.dir = value();
    else {
      std::cerr << "usage: finalfusion_bench [--rows N] [--dims D] [--bucket-exponent E]\n"
                   "                         [--lookups L] [--queries Q] [--dir PATH]\n";
      std::exit(arg == "--help" ? 0 : 2);
    }
  }
  // Keep at least 3/4 of the rows for words.
  while (o.bucket_exponent > 0 && (std::size_t{1} << o.bucket_exponent) > o.rows / 4)
    --o.bucket_exponent;
  if (o.rows < 2 || o.dims == 0) {
    std::cerr << "need at least 2 rows and 1 dim\n";
    std::exit(2);
  }
  return o;
}

ff::Embeddings make_embeddings(const Options& o) {
  const std::size_t buckets = std::size_t{1} << o.bucket_exponent;
  const std::size_t words_len = o.rows - buckets;
  std::vector<std::string> words;
  words.reserve(words_len);
  for (std::size_t i = 0; i < words_len; ++i) words.push_back("w" + std::to_string(i));
  std::vector<float> matrix(o.rows * o.dims);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& v : matrix) {  // xorshift64*: fast, deterministic
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    v = static_cast<float>(static_cast<std::int32_t>((x * 0x2545f4914f6cdd1dull) >> 32)) * 0x1p-31f;
  }
  auto vocab = ff::Vocab::bucket_subwords(std::move(words), 3, 6, o.bucket_exponent);
  return ff::Embeddings::from_matrix(std::move(vocab), std::move(matrix), o.dims);
}

std::vector<char> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> data(std::filesystem::file_size(path));
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  return data;
}

struct LoadStrategy {
  std::string name;
  std::function<ff::Embeddings()> load;
};

// The ways embeddings reach memory: a standalone file (mapped or read) and
// an embedding entry of a modelzip archive.
std::vector<LoadStrategy> load_strategies(const std::filesystem::path& fifu,
                                          const std::filesystem::path& archive) {
  return {
      {"open(.fifu, mmap)", [fifu] { return ff::Embeddings::open(fifu); }},
      {"open(.fifu, read)", [fifu] { return ff::Embeddings::open(fifu, {.mmap = false}); }},
      {"archive entry (zero-copy)",
       [archive] {
         auto a = modelzip::Archive::open(archive);
         return ff::Embeddings::read(a.embedding_file("embedding"), "embedding");
       }},
  };
}

void write_archive(const std::filesystem::path& fifu, const std::filesystem::path& archive) {
  std::filesystem::remove(archive);
  modelzip::WriterOptions options;
  options.durable = false;
  auto writer = modelzip::Writer::open(archive, options);
  modelzip::NewTag tag;
  tag.add_embedding("embedding", ff::Embeddings::open(fifu).to_bytes());
  writer.add_tag("bench", std::move(tag));
  writer.commit();
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse_options(argc, argv);
  std::filesystem::path dir = o.dir;
  const bool own_dir = dir.empty();
  if (own_dir) {
    dir = std::filesystem::temp_directory_path() /
          ("modelzip-ff-bench-" + std::to_string(std::random_device{}()));
  }
  std::filesystem::create_directories(dir);
  const auto fifu = dir / "bench.fifu";
  const auto archive = dir / "bench.zip";

  std::printf("finalfusion_bench: %zu rows x %zu dims (%zu words + 2^%u buckets)\n", o.rows, o.dims,
              o.rows - (std::size_t{1} << o.bucket_exponent), o.bucket_exponent);

  // --- write ---------------------------------------------------------------
  auto start = Clock::now();
  auto embeddings = make_embeddings(o);
  const double generate = seconds_since(start);
  start = Clock::now();
  ff::store(fifu, embeddings, ff::EmbeddingFormat::finalfusion, {.durable = false});
  const double save = seconds_since(start);
  const double file_bytes = static_cast<double>(std::filesystem::file_size(fifu));
  const double matrix_bytes = static_cast<double>(o.rows * o.dims * sizeof(float));
  std::printf("\nwrite (%.1f MiB file; generating took %.2f s)\n", file_bytes / 1048576, generate);
  print_row("store .fifu (no fsync)", save, file_bytes);
  start = Clock::now();
  write_archive(fifu, archive);
  print_row("archive with one embedding entry", seconds_since(start), file_bytes);
  embeddings = ff::Embeddings::from_matrix(ff::Vocab::simple({"x"}), {0.0f}, 1);  // free memory

  // --- load ----------------------------------------------------------------
  std::printf("\nload (file in the page cache)\n");
  std::vector<char> in_memory;
  const double read_file = best_of(3, [&] { in_memory = read_whole_file(fifu); });
  std::vector<char> copy(in_memory.size());
  const double memcpy_file =
      best_of(3, [&] { std::memcpy(copy.data(), in_memory.data(), in_memory.size()); });
  g_sink = g_sink + static_cast<float>(copy[copy.size() / 2]);
  print_row("baseline: memcpy of the file's bytes", memcpy_file, file_bytes);
  print_row("baseline: read the whole file", read_file, file_bytes);
  std::vector<char>().swap(copy);
  std::vector<char>().swap(in_memory);
  for (const auto& strategy : load_strategies(fifu, archive)) {
    double open_time = 1e300, first_pass = 1e300;
    bool view = false;
    for (int i = 0; i < 3; ++i) {
      start = Clock::now();
      auto e = strategy.load();
      open_time = std::min(open_time, seconds_since(start));
      start = Clock::now();
      g_sink = g_sink + checksum(e.matrix());
      first_pass = std::min(first_pass, seconds_since(start));
      view = e.storage_is_view();
    }
    print_row(strategy.name, open_time, file_bytes,
              view ? "(matrix: zero-copy view)" : "(matrix: copied)");
    print_row("  + first pass reading the whole matrix", first_pass, matrix_bytes);
  }

  // --- lookups -------------------------------------------------------------
  auto e = ff::Embeddings::open(fifu);
  const auto words = e.vocab().words();
  std::mt19937_64 rng(1);
  std::vector<std::string_view> known(o.lookups);
  for (auto& w : known) w = words[rng() % words.size()];
  std::vector<std::string> unknown_storage(o.lookups);
  for (auto& w : unknown_storage) w = "unknown" + std::to_string(rng() % 100000000);
  std::vector<float> out(o.dims);
  std::vector<float> rows_copy(o.dims);
  const float* matrix = e.matrix().data();
  std::vector<std::size_t> random_rows(o.lookups);
  for (auto& r : random_rows) r = rng() % o.rows;

  std::printf("\nlookups (%zu words, mapped file)\n", o.lookups);
  const double memcpy_rows = best_of(3, [&] {
    for (auto r : random_rows) {
      std::memcpy(rows_copy.data(), matrix + r * o.dims, o.dims * sizeof(float));
      g_sink = g_sink + rows_copy[0];
    }
  });
  print_rate("baseline: memcpy of random rows", static_cast<double>(o.lookups) / memcpy_rows);
  const double known_time = best_of(3, [&] {
    for (auto w : known) {
      e.embedding_into(w, out);
      g_sink = g_sink + out[0];
    }
  });
  print_rate("known words (embedding_into)", static_cast<double>(o.lookups) / known_time);
  std::vector<std::uint64_t> subword_rows;
  std::size_t summed_rows = 0;
  for (const auto& w : unknown_storage) summed_rows += e.vocab().subword_rows(w).size();
  const double unknown_time = best_of(3, [&] {
    for (const auto& w : unknown_storage) {
      e.embedding_into(w, out);
      g_sink = g_sink + out[0];
    }
  });
  const double memcpy_unknown =
      memcpy_rows * static_cast<double>(summed_rows) / static_cast<double>(o.lookups);
  print_rate("baseline: memcpy of as many rows as n-grams",
             static_cast<double>(o.lookups) / memcpy_unknown,
             "(" + std::to_string(summed_rows / o.lookups) + " n-gram rows per word)");
  print_rate("unknown words (sum of n-gram rows)", static_cast<double>(o.lookups) / unknown_time);
  const std::size_t batch = std::min<std::size_t>(o.lookups, 4096);
  std::vector<float> batch_out(batch * o.dims);
  const double batch_time = best_of(3, [&] {
    e.embeddings_into(std::span(known).first(batch), batch_out);
    g_sink = g_sink + batch_out[0];
  });
  print_rate("known words, batch of " + std::to_string(batch),
             static_cast<double>(batch) / batch_time);

  // --- similarity queries --------------------------------------------------
  std::printf("\nsimilarity queries (top 10 over %zu words)\n", words.size());
  const double scan_bytes = static_cast<double>(words.size() * o.dims * sizeof(float));
  std::vector<char> scan_copy(static_cast<std::size_t>(scan_bytes));
  const double memcpy_scan = best_of(3, [&] {
    std::memcpy(scan_copy.data(), matrix, scan_copy.size());
    g_sink = g_sink + static_cast<float>(scan_copy[scan_copy.size() / 3]);
  });
  print_row("baseline: memcpy of the word rows", memcpy_scan, scan_bytes);
  start = Clock::now();
  auto first = e.similar(known[0], 10);
  print_row("first query (computes row norms once)", seconds_since(start), scan_bytes);
  std::vector<double> times;
  for (std::size_t q = 0; q < o.queries; ++q) {
    start = Clock::now();
    auto result = e.similar(known[q % known.size()], 10);
    times.push_back(seconds_since(start));
    g_sink = g_sink + (result && !result->empty() ? (*result)[0].similarity : 0.0f);
  }
  std::sort(times.begin(), times.end());
  const double median = times.empty() ? 0 : times[times.size() / 2];
  if (median > 0) {
    print_row("similar(word, 10), median", median, scan_bytes);
    print_rate("  queries per second", 1.0 / median);
  }
  (void)first;

  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "finalfusion_bench: " << e.what() << "\n";
  return 1;
}
