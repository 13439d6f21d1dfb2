// Quickstart: save two checkpoints of a tiny model under two tags, the second
// sharing its unchanged parameters with the first, then load them back.
//
//   quickstart ARCHIVE      (ARCHIVE is created anew; an existing file is replaced)
#include <cstdio>
#include <filesystem>
#include <vector>

#include "modelzip/modelzip.hpp"

using namespace modelzip;

namespace {

// A tensor that views caller-owned floats: nothing is copied during the save,
// so the vector must outlive Writer::commit().
Tensor view(const std::vector<float>& v, Shape shape) {
  return Tensor::dense(DType::float32, std::move(shape),
                       Bytes::borrow(std::as_bytes(std::span(v)), nullptr));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: quickstart ARCHIVE\n");
    return 2;
  }
  try {
    std::vector<float> embedding(1000 * 64), weight(64 * 10), bias(10, 0.0f);
    for (std::size_t i = 0; i < embedding.size(); ++i)
      embedding[i] = static_cast<float>(i % 97) / 97;
    for (std::size_t i = 0; i < weight.size(); ++i) weight[i] = static_cast<float>(i % 13) - 6;

    std::filesystem::remove(argv[1]);
    Writer writer = Writer::open(argv[1]);
    writer.update_metadata([](Metadata& meta) {  // under the archive's lock, at commit
      meta.model_name = "quickstart-mlp";
      meta.model_version = "1";
    });

    NewTag step1;
    step1.add("embedding", view(embedding, {1000, 64}));
    step1.add("fc.weight", view(weight, {64, 10}));
    step1.add("fc.bias", view(bias, {10}));
    writer.add_tag("step-1", std::move(step1));
    writer.commit();

    // Training changed only the bias: the embedding is declared shared, and
    // the unchanged weight is found by content (dedup) and shared too.
    for (float& b : bias) b += 0.5f;
    NewTag step2;
    step2.share("embedding", "step-1", "embedding");
    step2.add("fc.weight", view(weight, {64, 10}));
    step2.add("fc.bias", view(bias, {10}));
    writer.add_tag("step-2", std::move(step2));
    writer.commit();
    std::printf("step-2: %llu new blob(s), %llu parameter(s) deduplicated\n",
                static_cast<unsigned long long>(writer.last_stats().blobs_written),
                static_cast<unsigned long long>(writer.last_stats().blobs_deduplicated));

    Archive archive = Archive::open(argv[1]);
    for (const ParamInfo& p : archive.params())  // the newest tag
      std::printf("%-10s %s %s%s\n", p.name.c_str(), std::string(dtype_name(p.dtype)).c_str(),
                  p.blob.c_str(), p.shared ? " (shared)" : "");
    Tensor b = archive.tensor("fc.bias");  // zero-copy view into the mapped file
    std::printf("newest fc.bias[0] = %g (zero-copy: %s)\n", b.as<float>()[0],
                b.values().is_mapped() ? "yes" : "no");
    return archive.verify().empty() ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "quickstart: %s\n", e.what());
    return 1;
  }
}
