// Files written by modelzip, checked by numpy (Debian's /usr/bin/python3)
// with tests/convert/check_written.py, which states the expected values by
// hand and checks the safetensors and BTF layout rules byte by byte.
#include <cstdio>

#include "convert_test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
using convert::NamedTensor;

namespace {

bool python_with_numpy() {
  if (!std::filesystem::exists("/usr/bin/python3")) return false;
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

// Runs `command`, returning its exit status and combined output.
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, p)) output.append(buffer, n);
  return {::pclose(p), output};
}

std::uint16_t bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace

TEST_SUITE("convert") {
  TEST_CASE("numpy loads what modelzip writes (npz, npy), safetensors and BTF rules hold") {
    if (!python_with_numpy()) {
      MESSAGE("skipped: /usr/bin/python3 with numpy is not installed");
      return;
    }
    // The same values as EXPECTED in check_written.py.
    std::vector<NamedTensor> t;
    t.push_back(
        {"weights", dense<float>(DType::float32, {2, 3}, {1.5f, -2, 3.25f, 4, -0.5f, 100})});
    t.push_back({"ids", dense<std::int64_t>(DType::int64, {3}, {5, -6, 7})});
    t.push_back({"flags", dense<std::uint8_t>(DType::bool_, {2, 2}, {1, 0, 0, 1})});
    t.push_back({"half", dense<std::uint16_t>(DType::float16, {2}, {0x3C00, 0xB400})});
    t.push_back({"brain", dense<std::uint16_t>(DType::bfloat16, {2}, {bf16(1.0f), bf16(-2.0f)})});
    t.push_back({"u8", dense<std::uint8_t>(DType::uint8, {3}, {0, 128, 255})});
    t.push_back({"scalar", dense<double>(DType::float64, {}, {2.5})});
    t.push_back({"names", Tensor::strings({3}, std::vector<std::string>{"alpha",
                                                                        "\xCE\xB2"
                                                                        "eta",
                                                                        ""})});
    t.push_back({"u16", dense<std::uint16_t>(DType::uint16, {2}, {0, 65535})});
    t.push_back({"i16", dense<std::int16_t>(DType::int16, {2}, {-32768, 32767})});
    t.push_back({"u32", dense<std::uint32_t>(DType::uint32, {2}, {7, 4000000000u})});
    t.push_back({"i32", dense<std::int32_t>(DType::int32, {2}, {-5, 1 << 30})});
    t.push_back({"u64", dense<std::uint64_t>(DType::uint64, {1}, {18446744073709551615ull})});
    t.push_back({"i8", dense<std::int8_t>(DType::int8, {3}, {-128, 0, 127})});
    t.push_back({"empty", dense<float>(DType::float32, {0, 4}, {})});
    t.push_back({"e4m3", dense<std::uint8_t>(DType::float8_e4m3fn, {4}, {0x38, 0xFE, 0x01, 0x7F})});
    t.push_back({"e5m2", dense<std::uint8_t>(DType::float8_e5m2, {3}, {0x3C, 0x7C, 0x83})});
    t.push_back(
        {"e8m0", dense<std::uint8_t>(DType::float8_e8m0fnu, {4}, {0x7F, 0x80, 0x00, 0xFF})});
    t.push_back(
        {"fp4", dense<std::uint8_t>(DType::float4_e2m1fn_x2, {2, 2}, {0x21, 0x97, 0x70, 0xF8})});
    t.push_back({"c64", dense<float>(DType::complex64, {2}, {1, 2, -0.5f, 0})});
    t.push_back({"c128", dense<double>(DType::complex128, {1}, {3, -4})});

    TempDir dir;
    convert::write_npz(dir / "all.npz", t);
    std::filesystem::create_directory(dir / "npy");
    for (const auto& x : t) convert::write_npy(dir.path() / "npy" / (x.name + ".npy"), x.tensor);

    std::vector<NamedTensor> st;
    for (const auto& x : t)
      if (x.name != "names" && x.name != "c128") st.push_back(x);  // safetensors has no complex128
    convert::write_safetensors(dir / "model.safetensors", st,
                               {{"format", "pt"}, {"note", "caf\xC3\xA9"}});

    std::vector<NamedTensor> btf;
    for (const char* name :
         {"weights", "ids", "u8", "scalar", "u16", "i16", "u32", "i32", "u64", "i8", "empty"})
      btf.push_back({name, find_tensor(t, name)});
    btf.push_back({"coo", Tensor::sparse_coo(DType::float32, {3, 4}, 2,
                                             bytes_of_values<std::int64_t>({0, 1, 2, 3}),
                                             bytes_of_values<float>({1.5f, -2.5f}))});
    convert::write_btf(dir / "model.btf", btf);

    const auto script = tests_dir() / "convert" / "check_written.py";
    REQUIRE(std::filesystem::exists(script));
    const auto result =
        run("/usr/bin/python3 '" + script.string() + "' '" + dir.path().string() + "'");
    const int status = result.first;
    const std::string& output = result.second;
    INFO("check_written.py output:\n" << output);
    CHECK(status == 0);
    CHECK(output.find("ok") != std::string::npos);
  }
}
