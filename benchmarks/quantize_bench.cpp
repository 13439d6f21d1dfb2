// quantize_bench: how fast modelzip quantizes and dequantizes, beside
// baselines measured in the same run. Not a test: numbers only.
//
//   quantize_bench [--size-mib 1024] [--tensors 64] [--reps 3] [--dir .]
//   quantize_bench --model ARCHIVE --from TAG --dir DIR
//
// --model (used by quantize_models.py on torchvision models): for each
// scheme, quantizes TAG of a copy of ARCHIVE (DIR/<scheme>.zip) with
// quantize_tag and prints one JSON line: the bytes the quantized tag added
// against the bytes of TAG's floating-point tensors, and the largest error
// of a quantized element in units of its bound (half a quantization step:
// must be <= 1); it writes the quantized tag, dequantized, to
// DIR/<scheme>.npz.
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
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_measure.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/modelzip.hpp"

using namespace modelzip;
using bench::median_seconds;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

void row(const std::string& what, double seconds, std::uint64_t bytes, double baseline) {
  std::printf("%-46s %8.3f s  %7.2f GiB/s  %6.2fx baseline\n", what.c_str(), seconds,
              static_cast<double>(bytes) / (1u << 30) / seconds, seconds / baseline);
}

volatile double sink;

// As a double, element i of a dense floating-point tensor.
double element(const Tensor& t, std::uint64_t i) {
  const std::byte* p = t.values().data();
  auto u16 = [&] {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return h;
  };
  switch (t.dtype()) {
    case DType::float32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::float64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return d;
    }
    case DType::float16:
    case DType::bfloat16: {
      // Through dequantize's own rounding is not wanted here: decode by hand.
      std::uint16_t h = u16();
      if (t.dtype() == DType::bfloat16) {
        std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
      }
      int e = (h >> 10) & 0x1F, m = h & 0x3FF;
      double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
      return (h & 0x8000) ? -v : v;
    }
    default:
      return 0;
  }
}

int model_mode(const fs::path& archive, const std::string& from, const fs::path& dir) {
  fs::create_directories(dir);
  for (auto scheme : {QuantizeRecipe::int8_per_tensor, QuantizeRecipe::int8_per_channel,
                      QuantizeRecipe::int8_block32, QuantizeRecipe::int4_block32}) {
    const std::string name(quantize_recipe_name(scheme));
    const fs::path copy = dir / (name + ".zip");
    fs::copy_file(archive, copy, fs::copy_options::overwrite_existing);
    const auto before = fs::file_size(copy);
    QuantizeOptions o;
    o.scheme = scheme;
    o.durable = false;
    auto start = Clock::now();
    QuantizeResult r = quantize_tag(copy, from, "q", o);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const auto added = fs::file_size(copy) - before;
    Archive a = Archive::open(copy);
    std::uint64_t weight_bytes = 0;
    for (const auto& p : a.params(from))
      if (p.kind == BlobKind::tensor && dtype_is_floating(p.dtype)) weight_bytes += p.nbytes;
    double worst = 0;
    std::vector<convert::NamedTensor> out;
    for (const auto& p : a.params("q")) {
      if (p.kind != BlobKind::tensor) continue;
      Tensor t = a.tensor(p.name, "q");
      if (const Quantization* q = t.quantization()) {
        Tensor x = a.tensor(p.name, from);
        Tensor d = t.dequantize(DType::float64);
        auto dv = d.as<double>();
        for (std::uint64_t i = 0; i < t.numel(); ++i)
          worst = std::max(worst,
                           std::fabs(dv[i] - element(x, i)) / (q->element_scale(t.shape(), i) / 2));
        t = t.dequantize();
      }
      out.push_back({p.name, t});
    }
    convert::write_npz(dir / (name + ".npz"), out);
    std::printf(
        "{\"scheme\": \"%s\", \"quantized\": %zu, \"referenced\": %zu, \"weight_bytes\": %llu, "
        "\"bytes_added\": %llu, \"added_ratio\": %.4f, \"max_error_over_bound\": %.4f, "
        "\"seconds\": %.3f}\n",
        name.c_str(), r.quantized.size(), r.referenced.size(),
        static_cast<unsigned long long>(weight_bytes), static_cast<unsigned long long>(added),
        static_cast<double>(added) / static_cast<double>(weight_bytes), worst, seconds);
    std::fflush(stdout);
    fs::remove(copy);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t size_mib = 1024;
  int tensors = 64, reps = 3;
  fs::path dir = ".", model;
  std::string from;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--model")
      model = argv[i + 1];
    else if (a == "--from")
      from = argv[i + 1];
    else if (a == "--size-mib")
      size_mib = std::stoull(argv[i + 1]);
    else if (a == "--tensors")
      tensors = std::stoi(argv[i + 1]);
    else if (a == "--reps")
      reps = std::stoi(argv[i + 1]);
    else if (a == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: quantize_bench [--size-mib N] [--tensors N] [--reps N] [--dir D]\n"
                   "       quantize_bench --model ARCHIVE --from TAG --dir DIR\n");
      return 2;
    }
  }
  if (!model.empty()) return model_mode(model, from, dir);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
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
  for (auto scheme : {QuantizeRecipe::int8_per_tensor, QuantizeRecipe::int8_per_channel,
                      QuantizeRecipe::int8_block32, QuantizeRecipe::int4_block32}) {
    std::uint64_t out_bytes = 0;
    const double t = median_seconds(reps, [&] {
      out_bytes = 0;
      for (const auto& w : weights) out_bytes += quantize(w, scheme).nbytes();
    });
    row("quantize " + std::string(quantize_recipe_name(scheme)) + " (" +
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
    o.scheme = QuantizeRecipe::int8_per_channel;
    qr = quantize_tag(path, "float", "int8", o);
    t_tag = std::chrono::duration<double>(Clock::now() - start).count();
  }
  row("quantize_tag int8-per-channel (1 run)", t_tag, total, t_memcpy);
  for (auto [tag, scheme] : {std::pair{"int8-block32", QuantizeRecipe::int8_block32},
                             std::pair{"int4-block32", QuantizeRecipe::int4_block32}}) {
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
