// rotation_bench: what dropping the oldest checkpoint costs ("keep the last
// N"), in place (free entries, FORMAT.md section 8.5) beside a full rewrite
// of the same archive, in the same run. The archive holds --tags tags of
// --tag-mib MiB each (4 float32 tensors per tag, distinct random bytes, so
// nothing is shared). Each repetition starts from a fresh copy of it
// (untimed). Rows: dropping the oldest tag; one rotation step (add a new
// tag of the same size and drop the oldest in one commit). Durable commits
// (fsync), warm page cache. Not a test: numbers only.
//
//   rotation_bench [--tags 10] [--tag-mib 100] [--reps 3] [--dir .]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "modelzip/modelzip.hpp"

using namespace modelzip;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int tags = 10;
  std::uint64_t tag_mib = 100;
  int reps = 3;
  fs::path dir = ".";
};

constexpr int kTensorsPerTag = 4;

std::vector<Tensor> random_tag(std::mt19937_64& rng, std::uint64_t bytes) {
  std::vector<Tensor> out;
  const std::uint64_t per = bytes / kTensorsPerTag / 4;
  for (int i = 0; i < kTensorsPerTag; ++i) {
    std::vector<float> v(per);
    for (auto& x : v) x = static_cast<float>(rng() % 1000003) * 1e-3f;
    out.push_back(Tensor::dense(
        DType::float32, {static_cast<std::int64_t>(per)},
        Bytes::copy_of(std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 4))));
  }
  return out;
}

NewTag new_tag(const std::vector<Tensor>& tensors) {
  NewTag nt;
  for (std::size_t i = 0; i < tensors.size(); ++i) nt.add("layer" + std::to_string(i), tensors[i]);
  return nt;
}

struct Timing {
  double median = 0, best = 0;
  std::uint64_t written = 0, size_after = 0;
};

void sync_file(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Runs `commit` on a fresh copy of `base` at `work`, `reps` times.
Timing measure(const Options& o, const fs::path& base, const fs::path& work,
               const std::function<Writer::Stats(const fs::path&)>& commit) {
  std::vector<double> t;
  Timing out;
  for (int r = 0; r < o.reps; ++r) {
    fs::remove(work);
    fs::copy_file(base, work);
    sync_file(work);  // the copy's write-back is not the commit's cost
    const auto start = Clock::now();
    const Writer::Stats s = commit(work);
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    out.written = s.bytes_written;
    out.size_after = fs::file_size(work);
  }
  fs::remove(work);
  std::sort(t.begin(), t.end());
  out.median = t[t.size() / 2];
  out.best = t.front();
  return out;
}

void row(const char* what, const Timing& t, const Timing& baseline) {
  std::printf("%-44s %9.1f ms %9.1f ms %10.1f MiB %10.1f MiB %8.1fx\n", what, t.median * 1e3,
              t.best * 1e3, t.written / 1048576.0, t.size_after / 1048576.0,
              baseline.median / t.median);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tags")
      o.tags = std::max(2, std::stoi(next()));
    else if (a == "--tag-mib")
      o.tag_mib = std::max<std::uint64_t>(1, std::stoull(next()));
    else if (a == "--reps")
      o.reps = std::max(1, std::stoi(next()));
    else if (a == "--dir")
      o.dir = next();
    else {
      std::fprintf(stderr,
                   "usage: rotation_bench [--tags 10] [--tag-mib 100] [--reps 3] [--dir .]\n");
      return 2;
    }
  }
  const fs::path base = o.dir / "rotation_bench_base.zip";
  const fs::path work = o.dir / "rotation_bench_work.zip";
  fs::remove(base);
  std::mt19937_64 rng(42);
  const std::uint64_t tag_bytes = o.tag_mib << 20;
  for (int k = 0; k < o.tags; ++k) {
    Writer w = Writer::open(base, WriterOptions{.durable = false});
    w.add_tag("step-" + std::to_string(k), new_tag(random_tag(rng, tag_bytes)));
    w.commit();
  }
  sync_file(base);
  const std::vector<Tensor> next = random_tag(rng, tag_bytes);
  std::printf(
      "rotation_bench: archive of %d tags x %llu MiB (%.1f MiB), median and fastest of %d, "
      "durable commits, folder %s\n",
      o.tags, static_cast<unsigned long long>(o.tag_mib), fs::file_size(base) / 1048576.0, o.reps,
      o.dir.string().c_str());
  std::printf("%-44s %12s %12s %14s %14s %9s\n", "operation", "median", "fastest", "written",
              "file after", "vs rewrite");

  auto drop = [&](bool in_place) {
    return [in_place](const fs::path& p) {
      Writer w = Writer::open(p, WriterOptions{.append = in_place});
      w.remove_tag("step-0");
      w.commit();
      return w.last_stats();
    };
  };
  auto rotate = [&](bool in_place) {
    return [in_place, &next](const fs::path& p) {
      Writer w = Writer::open(p, WriterOptions{.append = in_place});
      w.add_tag("next", new_tag(next));
      w.keep_last(static_cast<std::size_t>(Archive::open(p).tags().size()));
      w.commit();
      return w.last_stats();
    };
  };
  const Timing drop_rewrite = measure(o, base, work, drop(false));
  const Timing drop_in_place = measure(o, base, work, drop(true));
  const Timing rotate_rewrite = measure(o, base, work, rotate(false));
  const Timing rotate_in_place = measure(o, base, work, rotate(true));
  row("drop the oldest tag: full rewrite (baseline)", drop_rewrite, drop_rewrite);
  row("drop the oldest tag: in place", drop_in_place, drop_rewrite);
  row("add a tag + drop the oldest: rewrite", rotate_rewrite, rotate_rewrite);
  row("add a tag + drop the oldest: in place", rotate_in_place, rotate_rewrite);
  fs::remove(base);
  return 0;
}
