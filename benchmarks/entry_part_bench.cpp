// entry_part_bench: what Archive::entry_part costs for a small part of a
// large deflated entry, beside Archive::entry of the whole entry. Prints the
// median time of several repetitions and the growth of the peak resident
// set (ru_maxrss, measured in a child process per row). A deflated entry
// has no index: a part is decompressed from the entry's start to its end, so
// a part at the end costs about the whole decompression in time; in memory
// it should cost the part only. Not a test: numbers only.
//
//   entry_part_bench [--size-mib 64] [--reps 5] [--dir .]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench_measure.hpp"
#include "modelzip/modelzip.hpp"

using namespace modelzip;
using bench::child_peak_kib;
using bench::median_seconds;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::uint64_t size_mib = 64;
  int reps = 5;
  fs::path dir = ".";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--size-mib"))
      size_mib = std::stoull(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::max(1, std::stoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
  }
  // Numbered lines: deflate shrinks them about 3x, as it does real text.
  std::string data;
  const std::size_t size = static_cast<std::size_t>(size_mib) << 20;
  data.reserve(size);
  for (std::uint64_t i = 0; data.size() < size; ++i) data += std::to_string(i * 7919) + "\n";
  data.resize(size);
  const fs::path path = dir / "entry_part_bench.zip";
  fs::remove(path);
  {
    Writer w = Writer::open(path, WriterOptions{.durable = false});
    NewTag tag;
    tag.set_entry("big.bin", Bytes::copy_of(data), Compression::deflate);
    w.add_tag("t", std::move(tag));
    w.commit();
  }
  data = std::string();
  const Archive a = Archive::open(path);
  const std::string name = "t/big.bin";
  const std::uint64_t n = a.entry_size(name);
  std::printf("entry %s: %llu bytes deflated to %llu (%d repetitions, median)\n", name.c_str(),
              static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(fs::file_size(path)), reps);
  std::printf("%-40s %10s %12s\n", "read", "ms", "peak RSS KiB");
  struct Row {
    const char* what;
    std::function<void()> read;
  };
  const std::vector<Row> rows = {
      {"entry_part 100 bytes at 0", [&] { (void)a.entry_part(name, 0, 100); }},
      {"entry_part 100 bytes at the middle", [&] { (void)a.entry_part(name, n / 2, 100); }},
      {"entry_part 100 bytes at the end", [&] { (void)a.entry_part(name, n - 100, 100); }},
      {"entry_part 1 MiB at the end", [&] { (void)a.entry_part(name, n - (1u << 20), 1u << 20); }},
      {"entry (the whole entry)", [&] { (void)a.entry(name); }},
  };
  for (const Row& row : rows) {
    const double seconds = median_seconds(reps, row.read);
    const long kib = child_peak_kib(row.read);
    std::printf("%-40s %10.2f %12ld\n", row.what, seconds * 1e3, kib);
  }
  fs::remove(path);
  return 0;
}
