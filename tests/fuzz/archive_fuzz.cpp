// Fuzz target: a whole archive from untrusted bytes, used the way a reader
// uses one. Archive::from_memory, then every entry (whole and through
// EntryStream), every tag's parameters
// (tensors in both read modes, embedding files parsed as finalfusion),
// updater states, load() and verify().
//
// Invariants beyond "no crash": a tensor read in copy mode equals the same
// tensor read zero-copy and matches what params() says of it; an archive
// that verify() finds without problems reads completely without an Error.
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_support.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/entry_stream.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

namespace {

// Reads one parameter or updater state both ways; false if either failed.
template <class Read>
bool read_both_ways(const ParamInfo& info, Read read) {
  Tensor view, copy;
  const bool view_ok = attempt([&] { view = read(ReadMode::zero_copy); });
  const bool copy_ok = attempt([&] { copy = read(ReadMode::copy); });
  if (view_ok) keep(touch(view));
  if (copy_ok) {
    FUZZ_CHECK(copy.dtype() == info.dtype);
    FUZZ_CHECK(copy.shape() == info.shape);
    FUZZ_CHECK(copy.layout() == info.layout);
    FUZZ_CHECK(copy.nbytes() == info.nbytes);
  }
  // A copy read checks more (CRCs) than a view: it may fail where the view
  // succeeds, but never the other way round, and never disagree on data.
  if (copy_ok) FUZZ_CHECK(view_ok && view == copy);
  return copy_ok;
}

bool read_embedding(const Archive& archive, const ParamInfo& info, const std::string& tag) {
  return attempt([&] {
    Bytes file = archive.embedding_file(info.name, tag, ReadMode::copy);
    auto embeddings = finalfusion::Embeddings::read(file, info.blob);
    keep(embeddings.rows() + embeddings.dims());
  });
}

// Reads everything in the archive; returns true when nothing threw.
bool read_everything(const Archive& archive) {
  bool all_ok = true;
  keep(archive.metadata().format_version);
  for (const std::string& name : archive.entry_names()) {
    FUZZ_CHECK(archive.has_entry(name));
    Bytes copy;
    const bool copy_ok = attempt([&] { copy = archive.entry(name, ReadMode::copy); });
    all_ok &= copy_ok;
    if (copy_ok) keep(touch(copy));
    attempt([&] { keep(touch(archive.entry(name, ReadMode::zero_copy))); });
    // The entry streamed in parts: where both reads succeed, the same bytes.
    std::string streamed;
    const bool stream_ok = attempt([&] {
      EntryStream stream = EntryStream::open(archive, name);
      std::byte part[4096];
      while (const std::size_t n = stream.read(part))
        streamed.append(reinterpret_cast<const char*>(part), n);
    });
    if (copy_ok && stream_ok) FUZZ_CHECK(streamed == copy.as_string_view());
  }
  for (const std::string& tag : archive.tags()) {
    FUZZ_CHECK(archive.find_tag(tag) == tag);
    std::vector<ParamInfo> params;
    all_ok &= attempt([&] { params = archive.params(tag); });
    for (const ParamInfo& info : params) {
      if (info.kind == BlobKind::embedding) {
        all_ok &= read_embedding(archive, info, tag);
      } else {
        all_ok &= read_both_ways(
            info, [&](ReadMode mode) { return archive.tensor(info.name, tag, mode); });
      }
    }
    all_ok &= attempt([&] { keep(archive.load(tag, {.mode = ReadMode::copy}).size()); });
    std::vector<ParamInfo> states;
    all_ok &= attempt([&] { states = archive.updater_states(tag); });
    for (const ParamInfo& info : states) {
      all_ok &= read_both_ways(info, [&](ReadMode mode) {
        return archive.updater_state(info.name, info.state, tag, mode);
      });
    }
  }
  return all_ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<Archive> archive;
  if (!attempt(
          [&] { archive.emplace(Archive::from_memory(input_bytes(data, size), "fuzz.zip")); })) {
    return 0;
  }
  const bool read_ok = read_everything(*archive);
  std::vector<Problem> problems;
  if (attempt([&] { problems = archive->verify(); }) && problems.empty()) {
    FUZZ_CHECK(read_ok);
  }
  return 0;
}
