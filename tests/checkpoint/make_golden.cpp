// Writes tests/golden/core/v1.zip. Run only when the format deliberately
// changes (then bump format_version if old readers would misread it):
//   build/tests/checkpoint/make_golden tests/golden/core/v1.zip
#include <cstdio>
#include <filesystem>

#include "golden_model.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::filesystem::remove(argv[1]);
  modelzip::testing::write_golden(argv[1]);
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
