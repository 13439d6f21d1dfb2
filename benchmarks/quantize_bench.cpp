// quantize_bench: how fast modelzip quantizes and dequantizes, beside
// baselines measured in the same run. Not a test: numbers only.
//
//   quantize_bench [--size-mib 1024] [--tensors 64] [--reps 3] [--dir .]
//
// Rows (medians of --reps):
//   memcpy of the float32 weights          the baseline for quantizing
//   quantize(), each scheme                 in memory, all tensors
//   quantize_tag, int8-per-channel          archive to archive (reads, quantizes, appends)
//   zero-copy load of the float tag         Archive::load, then every value summed
//   dequantizing load of each quantized tag Archive::load + Tensor::dequantize(float32)
// The weights: --tensors float32 matrices [rows, 1024] of normal(0, 0.02)
// values, --size-mib in total.
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

double median_seconds(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void row(const std::string& what, double seconds, std::uint64_t bytes, double baseline) {
  std::printf("%-46s %8.3f s  %7.2f GiB/s  %6.2fx baseline\n", what.c_str(), seconds,
              static_cast<double>(bytes) / (1u << 30) / seconds, seconds / baseline);
}

volatile double sink;

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t size_mib = 1024;
  int tensors = 64, reps = 3;
  fs::path dir = ".";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--size-mib")
      size_mib = std::stoull(argv[i + 1]);
    else if (a == "--tensors")
      tensors = std::stoi(argv[i + 1]);
    else if (a == "--reps")
      reps = std::stoi(argv[i + 1]);
    else if (a == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: quantize_bench [--size-mib N] [--tensors N] [--reps N] [--dir D]\n");
      return 2;
    }
  }
  const std::int64_t cols = 1024;
  const std::int64_t rows = static_cast<std::int64_t>(size_mib * (1u << 20) / 4 / cols / tensors);
  const std::uint64_t per_tensor = static_cast<std::uint64_t>(rows * cols) * 4;
  const std::uint64_t total = per_tensor * static_cast<std::uint64_t>(tensors);
  std::printf("quantize_bench: %d float32 tensors [%lld, %lld], %.2f GiB, median of %d\n\n",
              tensors, static_cast<long long>(rows), static_cast<long long>(cols),
              static_cast<double>(total) / (1u << 30), reps);

  std::vector<std::vector<float>> data(static_cast<std::size_t>(tensors));
  std::vector<Tensor> weights;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (auto& d : data) {
    d.resize(per_tensor / 4);
    for (auto& x : d) x = dist(rng);
    weights.push_back(Tensor::dense(DType::float32, {rows, cols},
                                    Bytes::borrow(std::as_bytes(std::span(d)), nullptr)));
  }

  // Baseline: memcpy of the same bytes into a buffer that exists already.
  std::vector<std::byte> copy(per_tensor);
  const double t_memcpy = median_seconds(reps, [&] {
    for (const auto& w : weights) std::memcpy(copy.data(), w.values().data(), per_tensor);
    sink = static_cast<double>(static_cast<int>(copy[per_tensor / 2]));
  });
  std::printf("-- quantizing (baseline: memcpy of the float32 bytes)\n");
  row("memcpy", t_memcpy, total, t_memcpy);
  for (auto scheme : {QuantizeScheme::int8_per_tensor, QuantizeScheme::int8_per_channel,
                      QuantizeScheme::int8_block32, QuantizeScheme::int4_block32}) {
    std::uint64_t out_bytes = 0;
    const double t = median_seconds(reps, [&] {
      out_bytes = 0;
      for (const auto& w : weights) out_bytes += quantize(w, scheme).nbytes();
    });
    row("quantize " + std::string(quantize_scheme_name(scheme)) + " (" +
            std::to_string(static_cast<double>(out_bytes) / static_cast<double>(total))
                .substr(0, 5) +
            "x bytes)",
        t, total, t_memcpy);
  }

  // Archives: a float tag, then quantized tags through quantize_tag.
  const fs::path path = dir / "quantize_bench.zip";
  fs::remove(path);
  {
    Writer w = Writer::open(path, WriterOptions{.dedup = false});
    NewTag t;
    for (int i = 0; i < tensors; ++i) t.add("layer" + std::to_string(i) + ".weight", weights[i]);
    w.add_tag("float", std::move(t));
    w.commit();
  }
  std::printf("\n-- archive to archive (%s)\n", path.string().c_str());
  double t_tag = 0;
  QuantizeResult qr;
  {
    auto start = Clock::now();
    QuantizeOptions o;
    o.scheme = QuantizeScheme::int8_per_channel;
    qr = quantize_tag(path, "float", "int8", o);
    t_tag = std::chrono::duration<double>(Clock::now() - start).count();
  }
  row("quantize_tag int8-per-channel (1 run)", t_tag, total, t_memcpy);
  for (auto [tag, scheme] : {std::pair{"int8-block32", QuantizeScheme::int8_block32},
                             std::pair{"int4-block32", QuantizeScheme::int4_block32}}) {
    QuantizeOptions o;
    o.scheme = scheme;
    (void)quantize_tag(path, "float", tag, o);
  }
  std::printf("   added %.1f MiB for %.1f MiB of float32 weights (%.3fx)\n",
              static_cast<double>(qr.bytes_written) / (1 << 20),
              static_cast<double>(qr.source_bytes) / (1 << 20),
              static_cast<double>(qr.bytes_written) / static_cast<double>(qr.source_bytes));

  std::printf(
      "\n-- loading (page cache warm; baseline: zero-copy load of the float tag, every value "
      "read)\n");
  Archive a = Archive::open(path);
  auto sum_floats = [](const Tensor& t) {
    double s = 0;
    for (float x : t.as<float>()) s += x;
    return s;
  };
  const double t_view = median_seconds(reps, [&] {
    auto m = a.load("float");
    sink = static_cast<double>(m.size());
  });
  const double t_float = median_seconds(reps, [&] {
    double s = 0;
    for (const auto& [name, t] : a.load("float")) s += sum_floats(t);
    sink = s;
  });
  row("zero-copy load float (views only)", t_view, total, t_float);
  row("zero-copy load float + read every value", t_float, total, t_float);
  for (const char* tag : {"int8", "int8-block32", "int4-block32"}) {
    const double t = median_seconds(reps, [&] {
      double s = 0;
      for (const auto& [name, q] : a.load(tag)) s += sum_floats(q.dequantize(DType::float32));
      sink = s;
    });
    row(std::string("dequantizing load ") + tag + " + read every value", t, total, t_float);
  }
  fs::remove(path);
  return 0;
}
