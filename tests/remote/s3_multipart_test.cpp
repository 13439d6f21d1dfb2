// The pure pieces of the S3 multipart client: reading S3's XML answers and
// the part checksum. (Requests are tested against a real server in
// test_s3_multipart.py.)
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "remote/curl_request.hpp"
#include "remote/s3_multipart.hpp"
#include "remote/stale_uploads.hpp"

using modelzip::remote::s3_crc32_base64;
using modelzip::remote::xml_element;

TEST_CASE("s3_crc32_base64 is base64 of the big-endian CRC-32") {
  const std::string text = "123456789";  // CRC-32 0xCBF43926
  CHECK(s3_crc32_base64(std::as_bytes(std::span(text))) == "y/Q5Jg==");
  CHECK(s3_crc32_base64({}) == "AAAAAA==");
}

TEST_CASE("xml_element reads ETags with entities and walks repeated elements") {
  // ListMultipartUploads as AWS documents it (abridged).
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListMultipartUploadsResult>"
      "<Bucket>models</Bucket><IsTruncated>false</IsTruncated>"
      "<Upload><Key>ckpt.zip</Key><UploadId>id-1</UploadId>"
      "<Initiated>2026-11-27T20:00:00.000Z</Initiated></Upload>"
      "<Upload><Key>ckpt.zip.old</Key><UploadId>id-2</UploadId></Upload>"
      "</ListMultipartUploadsResult>";
  std::size_t at = 0, end = 0;
  std::vector<std::string> ids;
  while (auto upload = xml_element(xml, "Upload", at, &end)) {
    at = end;
    ids.push_back(xml_element(*upload, "UploadId").value_or("?"));
  }
  CHECK(ids == std::vector<std::string>{"id-1", "id-2"});
  CHECK(xml_element(xml, "IsTruncated") == "false");
  CHECK_FALSE(xml_element(xml, "NextKeyMarker"));
  CHECK(xml_element("<ETag>&quot;ab&amp;c&quot;</ETag>", "ETag") == "\"ab&c\"");
  CHECK_FALSE(xml_element("<ETag>unterminated", "ETag"));
  CHECK_FALSE(xml_element("<A>x</A>", "A", 100));
}

TEST_CASE("xml_element decodes character references and CDATA, and keeps what it does not know") {
  // Go's encoder (MinIO) writes ' as &#39; and S3 writes a carriage return as &#13;.
  CHECK(xml_element("<Key>it&#39;s&#13;&#x41;&#X41;</Key>", "Key") == "it's\rA&#X41;");
  CHECK(xml_element("<Key>&#x1F600;&#233;</Key>", "Key") == "\xF0\x9F\x98\x80\xC3\xA9");
  CHECK(xml_element("<Key><![CDATA[a&amp;<b>]]>c</Key>", "Key") == "a&amp;<b>c");
  for (std::string_view kept : {"&#0;", "&#xD800;", "&#x110000;", "&#;", "&#x;", "&#12a;",
                                "&unknown;", "&#99999999999;", "<![CDATA[open", "&amp"})
    CHECK(xml_element("<K>" + std::string(kept) + "</K>", "K") == std::string(kept));
}

TEST_CASE("parse_content_range takes exactly one range of bytes") {
  using modelzip::remote::parse_content_range;
  auto r = parse_content_range("bytes 0-99/1000");
  REQUIRE(r);
  CHECK(r->first == 0);
  CHECK(r->last == 99);
  CHECK(r->total == 1000u);
  r = parse_content_range("bytes 5-5/*");
  REQUIRE(r);
  CHECK_FALSE(r->total);
  for (std::string_view bad :
       {"", "bytes", "bytes 0-99/1000 x", "bytes 0-99/1000x", "bytes=0-99/1000", "items 0-9/10",
        "bytes */1000", "bytes 9-0/10", "bytes 0-10/10", "bytes -1-9/10", "bytes 0-9/",
        "bytes  0-9/10", "bytes 0-9 /10", "bytes 0-18446744073709551616/*", "bytes 0-9/+10"})
    CHECK_FALSE(parse_content_range(bad));
}

TEST_CASE("parse_s3_time reads S3's Initiated times (UTC) and rejects malformed ones") {
  using modelzip::remote::parse_s3_time;
  auto seconds = [](std::string_view t) {
    auto p = parse_s3_time(t);
    REQUIRE(p);
    return std::chrono::duration_cast<std::chrono::seconds>(p->time_since_epoch()).count();
  };
  CHECK(seconds("2026-11-27T23:10:05.123Z") == 1795821005);
  CHECK(seconds("2000-02-29T00:00:00Z") == 951782400);
  CHECK(seconds("1970-01-01T00:00:00.000Z") == 0);
  for (std::string_view bad : {"", "2026-11-27", "2026-13-01T00:00:00Z", "2026-11-27 23:10:05Z",
                               "20x6-11-27T23:10:05Z", "2026-11-27T24:00:00Z"})
    CHECK_FALSE(parse_s3_time(bad));
  // Beyond what the clock holds (nanoseconds since 1970 in 64 bits, to
  // 2262-04-11): rejected, not overflowed (found by fuzz_remote_answers).
  CHECK(seconds("2262-04-10T00:00:00Z") == 9223200000);
  for (std::string_view far : {"2263-01-01T00:00:00Z", "8935-11-27T20:00:00.000Z",
                               "9999-12-31T23:59:60Z", "1000-01-01T00:00:00Z"})
    CHECK_FALSE(parse_s3_time(far));
}

TEST_CASE("printable shows control characters as \\xNN and cuts long text at a UTF-8 boundary") {
  using modelzip::remote::printable;
  CHECK(printable("a\x1b[31m\r\nb\x7f") == "a\\x1b[31m\\x0d\\x0ab\\x7f");
  CHECK(printable("caf\xC3\xA9", 4) == "caf... (5 bytes)");  // not half of the e acute
  CHECK(printable("caf\xC3\xA9", 5) == "caf\xC3\xA9");
  CHECK(printable(std::string(300, 'm')) == std::string(256, 'm') + "... (300 bytes)");
  CHECK(printable("") == "");
}

TEST_CASE("retry_pause doubles from 250 ms and honours Retry-After up to 10 s") {
  using modelzip::remote::retry_pause;
  using std::chrono::milliseconds;
  CHECK(retry_pause(1, std::nullopt) == milliseconds(250));
  CHECK(retry_pause(3, std::nullopt) == milliseconds(1000));
  CHECK(retry_pause(1, 0) == milliseconds(250));
  CHECK(retry_pause(1, 2) == milliseconds(2000));
  CHECK(retry_pause(4, 1) == milliseconds(2000));
  CHECK(retry_pause(1, 100000) == milliseconds(10000));
  CHECK(retry_pause(1, UINT64_MAX) == milliseconds(10000));
}
