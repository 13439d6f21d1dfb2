// Replays a fuzz target's corpus as a plain test, in every build (no
// libFuzzer needed): linked with one <target>_fuzz.cpp, it calls
// LLVMFuzzerTestOneInput on every file of the folders given, on its first
// half and on all but its last byte.
//
//   replay_<target> CORPUS_DIR... [--shared=SUBDIR[:EXT,EXT...]]...
//
// --shared adds the files of $MODELZIP_SHARED_TESTDATA/SUBDIR (those ending
// in one of the EXTs, if given); it is ignored when the variable is unset or
// the folder does not exist (the shared data is not part of the repository).
//
// Exit status 0 when every input was replayed cleanly. A modelzip::Error
// escaping the target, any other exception, or no input at all: the file is
// named on stderr and the exit status is 1. A crash, an abort, a sanitizer
// report or an input running longer than kSecondsPerInput: the file is named
// on stderr before the process dies.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Provided by the sanitizer runtimes; null when none is linked.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

namespace fs = std::filesystem;

constexpr unsigned kSecondsPerInput = 300;  // generous: valgrind and sanitizer builds are slow

// The input being replayed, for the signal handlers (which may only use
// async-signal-safe calls, so it is kept as a C string).
char g_current[4096] = "(none)";

void write_stderr(const char* text) {
  auto ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void report_current(const char* what) {
  write_stderr("\nreplay: ");
  write_stderr(what);
  write_stderr(" on input ");
  write_stderr(g_current);
  write_stderr("\n");
}

void on_fatal_signal(int sig) {
  report_current(sig == SIGALRM ? "timeout" : "fatal signal");
  ::signal(sig == SIGALRM ? SIGABRT : sig, SIG_DFL);
  ::raise(sig == SIGALRM ? SIGABRT : sig);
}

void on_sanitizer_death() {
  report_current("sanitizer report");
}

void install_handlers() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM})
    ::signal(sig, on_fatal_signal);
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(on_sanitizer_death);
}

std::vector<std::uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool has_extension(const fs::path& path, const std::vector<std::string>& extensions) {
  if (extensions.empty()) return true;
  const std::string name = path.filename().string();
  return std::any_of(extensions.begin(), extensions.end(), [&](const std::string& ext) {
    return name.size() >= ext.size() &&
           name.compare(name.size() - ext.size(), ext.size(), ext) == 0;
  });
}

void add_folder(const fs::path& folder, const std::vector<std::string>& extensions,
                std::vector<fs::path>& files) {
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.is_regular_file() && has_extension(entry.path(), extensions)) {
      files.push_back(entry.path());
    }
  }
}

// "--shared=SUBDIR[:EXT,EXT]" -> files of $MODELZIP_SHARED_TESTDATA/SUBDIR.
void add_shared(std::string_view spec, std::vector<fs::path>& files) {
  const char* root = std::getenv("MODELZIP_SHARED_TESTDATA");
  if (root == nullptr) return;
  std::vector<std::string> extensions;
  std::string_view subdir = spec;
  if (auto colon = spec.find(':'); colon != std::string_view::npos) {
    subdir = spec.substr(0, colon);
    std::string_view rest = spec.substr(colon + 1);
    while (!rest.empty()) {
      auto comma = rest.find(',');
      extensions.emplace_back(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  const fs::path folder = fs::path(root) / subdir;
  if (!fs::is_directory(folder)) return;
  add_folder(folder, extensions, files);
}

// Runs the target on data[0, size); false (after naming the input) if an
// exception escaped it.
bool replay(const std::vector<std::uint8_t>& data, std::size_t size) {
  // The target gets a buffer of exactly `size` bytes, as libFuzzer gives it.
  std::vector<std::uint8_t> input(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(size));
  ::alarm(kSecondsPerInput);
  try {
    LLVMFuzzerTestOneInput(input.data(), input.size());
  } catch (const std::exception& e) {
    ::alarm(0);
    std::fprintf(stderr, "replay: exception escaped on input %s: %s\n", g_current, e.what());
    return false;
  } catch (...) {
    ::alarm(0);
    std::fprintf(stderr, "replay: unknown exception escaped on input %s\n", g_current);
    return false;
  }
  ::alarm(0);
  return true;
}

void set_current(const fs::path& file, std::size_t size, std::size_t full_size) {
  std::string text = file.string();
  if (size != full_size) text += " (first " + std::to_string(size) + " bytes)";
  std::snprintf(g_current, sizeof g_current, "%s", text.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with("--shared=")) {
      add_shared(arg.substr(9), files);
    } else if (fs::is_directory(arg)) {
      add_folder(arg, {}, files);
    } else {
      std::fprintf(stderr, "replay: not a folder: %s\n", argv[i]);
      return 1;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no input found (an empty corpus tests nothing)\n");
    return 1;
  }
  install_handlers();
  int failures = 0;
  std::size_t runs = 0;
  for (const auto& file : files) {
    const std::vector<std::uint8_t> data = read_file(file);
    for (std::size_t size :
         {data.size(), data.size() / 2, data.size() == 0 ? 0 : data.size() - 1}) {
      set_current(file, size, data.size());
      if (!replay(data, size)) ++failures;
      ++runs;
      if (data.size() < 2) break;  // the shorter variants would repeat inputs
    }
  }
  std::printf("replayed %zu inputs from %zu files: %d failed\n", runs, files.size(), failures);
  return failures == 0 ? 0 : 1;
}
