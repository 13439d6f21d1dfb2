// The main() of every doctest program (libtest_main).
//
// MODELZIP_TEST_CASE_EXCLUDE, when set and not empty, adds doctest filters
// before the command line's: a comma-separated list of test case names
// (wildcards * and ?) to leave out, as --test-case-exclude takes it.
// tests/run.sh's valgrind stage uses it for its slowest cases (large data,
// loops over every byte of an input), which the other stages run in full.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  doctest::Context context;
  if (const char* exclude = std::getenv("MODELZIP_TEST_CASE_EXCLUDE"); exclude && *exclude)
    context.addFilter("test-case-exclude", exclude);
  context.applyCommandLine(argc, argv);
  return context.run();
}
