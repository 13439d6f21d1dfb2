// A tag's free-form metadata (modelzip/tag_metadata.hpp, FORMAT.md section
// 3.1): set on a NewTag, read back per tag, absent for tags without it, and
// the entry's torch table kept beside it.
#include "modelzip/tag_metadata.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

#include "../zip/expect_error.hpp"
#include "checkpoint/tag_metadata.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

NewTag one_param() {
  NewTag contents;
  contents.add("w", Tensor::dense(DType::float32, {1}, Bytes::copy_of(std::string(4, '\0'))));
  return contents;
}

}  // namespace

TEST_CASE("Tag metadata: set at save, read back per tag, empty without") {
  TempDir dir;
  const auto path = dir / "model.zip";
  const std::map<std::string, std::string> pairs = {
      {"format", "pt"}, {"", "empty key"}, {"lines", "a\nb"}, {"text", "gr\xC3\xBC\xC3\x9F"}};
  {
    Writer w = Writer::open(path);
    NewTag first = one_param();
    set_tag_metadata(first, pairs);
    w.add_tag("step-1", std::move(first));
    w.add_tag("step-2", one_param());
    w.commit();
  }
  const Archive archive = Archive::open(path);
  CHECK(tag_metadata(archive, "step-1") == pairs);
  CHECK(tag_metadata(archive, "STEP-1") == pairs);
  CHECK(tag_metadata(archive, "step-2").empty());
  CHECK(tag_metadata(archive).empty());  // the newest: step-2
  CHECK(archive.has_entry("step-1/metadata.toml"));
  CHECK_FALSE(archive.has_entry("step-2/metadata.toml"));
  CHECK(archive.verify().empty());
  CHECK_ERROR(tag_metadata(archive, "step-3"), ErrorCode::not_found, "no such tag");
}

TEST_CASE("Tag metadata: text that is not UTF-8 is refused when staged") {
  NewTag contents = one_param();
  CHECK_ERROR(set_tag_metadata(contents, {{"k", "\xFF"}}), ErrorCode::invalid_argument,
              "the value of 'k' is not UTF-8 text");
  CHECK_ERROR(set_tag_metadata(contents, {{"\xFF", "v"}}), ErrorCode::invalid_argument,
              "a key is not UTF-8 text");
}

TEST_CASE("Tag metadata: the torch table is kept beside the free-form pairs") {
  TempDir dir;
  const auto path = dir / "model.zip";
  format::TagMetadata both;
  both.safetensors = {{"format", "pt"}};
  both.torch = {{"state_dict_metadata", "{\"\": {\"version\": 2}}"}};
  {
    Writer w = Writer::open(path);
    NewTag contents = one_param();
    checkpoint::stage_tag_metadata(contents, both);
    w.add_tag("t", std::move(contents));
    w.commit();
  }
  const Archive archive = Archive::open(path);
  CHECK(checkpoint::read_tag_metadata(archive, "t") == both);
  CHECK(tag_metadata(archive, "t") == both.safetensors);
}
