// A program built against an installed modelzip, the way a user builds one:
//
//   c++ -std=c++20 main.cpp $(pkg-config --cflags --libs modelzip) -o installed_sample
//   ./installed_sample model.zip
//
// It saves one tag with two float32 tensors, reopens the archive, and prints
// what it reads back; exit status 0 only if everything matched. Only the
// public headers <modelzip/...> are used. tests/install/check_install.py
// builds and runs it against a `meson install --destdir` tree.
#include <modelzip/modelzip.hpp>

#include <cstdio>
#include <filesystem>
#include <vector>

using namespace modelzip;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: installed_sample ARCHIVE\n");
    return 2;
  }
  try {
    std::vector<float> weight = {1, 2, 3, 4, 5, 6};  // 2 x 3
    std::vector<float> bias = {0.5f, -0.5f};
    std::filesystem::remove(argv[1]);
    Writer writer = Writer::open(argv[1]);
    NewTag tag;
    tag.add("w", Tensor::dense(DType::float32, {2, 3},
                               Bytes::borrow(std::as_bytes(std::span(weight)), nullptr)));
    tag.add("b", Tensor::dense(DType::float32, {2},
                               Bytes::borrow(std::as_bytes(std::span(bias)), nullptr)));
    writer.add_tag("v1", std::move(tag));
    writer.commit();

    Archive archive = Archive::open(argv[1]);
    float sum = 0;
    for (float v : archive.tensor("w", "v1").as<float>()) sum += v;
    std::printf("tags=%zu params=%zu sum(w)=%g b[1]=%g verify=%s\n", archive.tags().size(),
                archive.params("v1").size(), sum, archive.tensor("b").as<float>()[1],
                archive.verify().empty() ? "ok" : "problems");
    try {
      archive.tensor("missing");
      return 1;  // must have thrown
    } catch (const Error& e) {
      std::printf("missing: %s\n", e.code() == ErrorCode::not_found ? "not_found" : "other");
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "installed_sample: %s\n", e.what());
    return 1;
  }
}
