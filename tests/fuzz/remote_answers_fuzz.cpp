// Fuzz target: the parsers of what a server answers, which is untrusted
// input like a file (remote/curl_request.hpp, remote/s3_multipart.hpp,
// remote/stale_uploads.hpp). The input is read two ways:
//   - as response header lines (split at '\n'): parse_header_line, and
//     parse_content_range / parse_u64 of their values;
//   - as an S3 XML answer: the walk over <Upload> elements that
//     ListMultipartUploads does, its fields and parse_s3_time of Initiated,
//     and the fields the other requests read (UploadId, ETag, Code...).
// Invariants: printable() output has no control character and is bounded; a
// parsed Content-Range is ordered and re-parses to itself when
// written back; a parsed number re-parses from its decimal text; header names
// come back lower case and values trimmed; an element's text is never longer
// than the answer and the walk always moves forward within it.
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "remote/curl_request.hpp"
#include "remote/s3_multipart.hpp"
#include "remote/settings.hpp"
#include "remote/stale_uploads.hpp"

using namespace modelzip;
using namespace modelzip::remote;

namespace {

void header_lines(std::string_view text) {
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    const auto h = parse_header_line(line);
    if (!h) continue;
    if (h->status_line) {
      FUZZ_CHECK(h->status >= 0 && h->status <= 999);
      continue;
    }
    for (char c : h->name) FUZZ_CHECK(!std::isupper(static_cast<unsigned char>(c)));
    if (!h->value.empty()) {
      FUZZ_CHECK(!std::isspace(static_cast<unsigned char>(h->value.front())));
      FUZZ_CHECK(!std::isspace(static_cast<unsigned char>(h->value.back())));
    }
    if (auto n = parse_u64(h->value)) FUZZ_CHECK(parse_u64(std::to_string(*n)) == n);
    if (auto r = parse_content_range(h->value)) {
      FUZZ_CHECK(r->first <= r->last);
      FUZZ_CHECK(!r->total || r->last < *r->total);
      const std::string again = "bytes " + std::to_string(r->first) + "-" +
                                std::to_string(r->last) + "/" +
                                (r->total ? std::to_string(*r->total) : "*");
      const auto back = parse_content_range(again);
      FUZZ_CHECK(back && back->first == r->first && back->last == r->last &&
                 back->total == r->total);
    }
    (void)parse_size(h->value);
    const std::string shown = printable(h->value, 64);
    for (unsigned char c : shown) FUZZ_CHECK(c >= 0x20 && c != 0x7F);
    FUZZ_CHECK(shown.size() <= 4 * 64 + 40);
  }
}

void s3_answer(std::string_view xml) {
  std::size_t at = 0, end = 0, uploads = 0;
  while (auto upload = xml_element(xml, "Upload", at, &end)) {
    FUZZ_CHECK(end > at && end <= xml.size());
    FUZZ_CHECK(upload->size() <= xml.size());
    at = end;
    ++uploads;
    (void)xml_element(*upload, "Key");
    (void)xml_element(*upload, "UploadId");
    if (auto initiated = xml_element(*upload, "Initiated")) (void)parse_s3_time(*initiated);
  }
  FUZZ_CHECK(uploads <= xml.size());
  for (std::string_view tag : {"UploadId", "ETag", "ChecksumCRC32", "Code", "Message",
                               "IsTruncated", "NextKeyMarker", "NextUploadIdMarker"})
    if (auto text = xml_element(xml, tag)) FUZZ_CHECK(text->size() <= xml.size());
  (void)parse_s3_time(xml);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A copy of exactly `size` bytes, so a read past the end is found.
  const Bytes bytes = fuzz::input_bytes(data, size);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  header_lines(text);
  s3_answer(text);
  return 0;
}
