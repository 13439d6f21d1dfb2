#include "remote/s3_multipart.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>
#include <utility>

#include "core/crc32.hpp"
#include "modelzip/cancel.hpp"
#include "remote/curl_request.hpp"
#include "remote/remote_source.hpp"

namespace modelzip::remote {
namespace {

// Error bodies and XML answers kept at most (an answer is a few KiB).
constexpr std::size_t kMaxAnswer = std::size_t{1} << 20;

std::string query_encode(std::string_view value) {
  return percent_encode(value, false);
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void append_utf8(std::string& out, std::uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// A character reference's code point ("#13", "#x0D": the text between '&'
// and ';'), if it names a character XML allows.
std::optional<std::uint32_t> char_reference(std::string_view ref) {
  if (ref.size() < 2 || ref[0] != '#') return std::nullopt;
  const bool hex = ref[1] == 'x';
  const std::string_view digits = ref.substr(hex ? 2 : 1);
  if (digits.empty() || digits.size() > 8) return std::nullopt;
  std::uint32_t c = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), c, hex ? 16 : 10);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (c == 0 || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return std::nullopt;
  return c;
}

// Element text as S3 writes it: the five predefined entities, character
// references (S3 writes a key's control characters as "&#13;") and CDATA
// sections decoded; anything else (an unknown entity) is kept as it is.
std::string xml_unescape(std::string_view text) {
  static const std::pair<std::string_view, char> entities[] = {
      {"&quot;", '"'}, {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}};
  constexpr std::string_view cdata_open = "<![CDATA[", cdata_close = "]]>";
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::string_view rest = text.substr(i);
    if (rest.starts_with(cdata_open)) {
      const auto close = rest.find(cdata_close, cdata_open.size());
      if (close != std::string_view::npos) {
        out += rest.substr(cdata_open.size(), close - cdata_open.size());
        i += close + cdata_close.size();
        continue;
      }
    }
    if (text[i] == '&') {
      bool matched = false;
      for (auto [entity, c] : entities)
        if (rest.starts_with(entity)) {
          out += c;
          i += entity.size();
          matched = true;
          break;
        }
      if (matched) continue;
      const auto semicolon = rest.find(';');
      if (semicolon != std::string_view::npos && semicolon <= 11)
        if (auto c = char_reference(rest.substr(1, semicolon - 1))) {
          append_utf8(out, *c);
          i += semicolon + 1;
          continue;
        }
    }
    out += text[i++];
  }
  return out;
}

struct Body {
  std::span<const std::byte> data;
  std::size_t sent = 0;
};

size_t read_body(char* buffer, size_t size, size_t count, void* user) {
  auto* b = static_cast<Body*>(user);
  const size_t n = std::min(size * count, b->data.size() - b->sent);
  std::memcpy(buffer, b->data.data() + b->sent, n);
  b->sent += n;
  return n;
}

}  // namespace

struct S3Multipart::Request {
  const char* operation;  // "UploadPart"...
  const char* method;     // "PUT", "POST", "GET", "DELETE"
  std::string http;       // URL with its query
  std::vector<std::string> headers;
  std::span<const std::byte> body;
  // Stopped by modelzip::request_cancel() (UploadPart, UploadPartCopy: the
  // parts of an upload that will be aborted), between attempts too.
  bool cancellable = false;
  // Not repeatable (CompleteMultipartUpload): an attempt sent whose answer
  // was lost may have taken effect, which a final error then says.
  bool once = false;
  // Bytes the server copies (UploadPartCopy) or assembles
  // (CompleteMultipartUpload: the object's size): with the body's, what the
  // request's deadline and stall limit are given for.
  std::uint64_t copies = 0;
  int in_flight = 1;  // requests sharing the link with it (set_deadline)
  // The server works before it answers (UploadPartCopy,
  // CompleteMultipartUpload) and may send nothing meanwhile: no 1 KiB/s
  // limit, TCP keep-alive probes instead; the request fails when nothing at
  // all arrives for stall_limit_s(): the low-speed time per kDeadlineUnit
  // the server copies or assembles.
  bool server_works = false;
};

struct S3Multipart::Response {
  long status = 0;
  std::string etag;
  std::string checksum_crc32;
  std::string body;  // at most kMaxAnswer bytes
};

namespace {

struct Attempt {
  long status = 0;
  std::string etag, checksum;
  std::optional<std::uint64_t> retry_after;  // seconds
  CappedBody body{kMaxAnswer};

  static size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* a = static_cast<Attempt*>(user);
    const size_t n = size * count;
    if (auto line = parse_header_line(std::string_view(data, n))) {
      if (line->status_line) {
        a->status = line->status;
        a->etag.clear();
        a->checksum.clear();
        a->retry_after.reset();
      } else if (line->name == "retry-after") {
        a->retry_after = parse_u64(line->value);
      } else if (line->name == "etag") {
        a->etag = line->value;
      } else if (line->name == "x-amz-checksum-crc32") {
        a->checksum = line->value;
      }
    }
    return n;
  }
};

// The seconds an UploadPartCopy of `copies` bytes, or a
// CompleteMultipartUpload of an object that size, may go without a byte of
// answer: the low-speed time (default 30 s) per kDeadlineUnit (8 MiB) the
// server copies or assembles, at least once, as the deadline scales with
// the bytes.
long stall_limit_s(const Settings& settings, std::uint64_t copies) {
  const double units = std::max(1.0, static_cast<double>(copies) / kDeadlineUnit);
  return static_cast<long>(
      std::min(std::ceil(units * static_cast<double>(settings.low_speed_time_s)), 1e12));
}

int stop_if_cancelled(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return cancel_requested() ? 1 : 0;
}

// S3 error codes worth another attempt (besides 5xx and 429).
bool transient_s3(std::string_view code) {
  return code == "SlowDown" || code == "RequestTimeout" || code == "InternalError" ||
         code == "ServiceUnavailable" || code == "RequestTimeTooSkewed";
}

}  // namespace

S3Multipart::S3Multipart(const std::string& url, const RemoteOptions& options)
    : endpoint_(resolve(url)), settings_(settings_from(options, url)) {
  if (!endpoint_.s3())
    fail(ErrorCode::invalid_argument, url, "uploads need an s3://BUCKET/KEY URL");
  global_init();
}

std::uint64_t S3Multipart::requests() const noexcept {
  return requests_.load();
}

S3Multipart::Response S3Multipart::perform(const Request& r) const {
  const std::string where = std::string(" (") + r.method + " " + r.http + ")";
  bool answer_lost = false;  // an attempt reached the server and got no answer
  auto lost_note = [&]() -> std::string {
    if (!r.once || !answer_lost) return {};
    return std::string("; an attempt's answer was lost, ") + kMayHaveTakenEffect +
           ": check the object before writing again";
  };
  for (int attempt = 1;; ++attempt) {
    const bool retry_left = attempt < kS3Attempts;
    std::optional<std::uint64_t> retry_after;  // of this attempt's answer
    auto pause = [&] { std::this_thread::sleep_for(retry_pause(attempt, retry_after)); };
    CURL* e = curl_easy_init();
    if (!e) fail(ErrorCode::io, endpoint_.url, "cannot start a libcurl transfer");
    char errbuf[CURL_ERROR_SIZE] = {};
    curl_slist* headers = nullptr;
    Attempt a;
    Body body{r.body};
    configure(e, r.http, endpoint_, settings_, errbuf, headers,
              r.body.empty() ? kEmptyPayloadSha256 : kUnsignedPayload);
    const long deadline_ms =
        set_deadline(e, settings_, std::max<std::uint64_t>(r.body.size(), r.copies), r.in_flight);
    const long stall_s = r.server_works ? stall_limit_s(settings_, r.copies) : 0;
    if (r.server_works) {
      // Below 1 byte/s for stall_s: nothing arrived.
      curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
      curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, stall_s);
      curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
      curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, settings_.low_speed_time_s);
      curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
    }
    for (const auto& h : r.headers) add_header(headers, h);
    // (No "Expect:" removal: libcurl's SigV4 would sign the removed header.)
    const std::string method = r.method;
    if (method == "PUT" || method == "POST") {
      curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(e, CURLOPT_READFUNCTION, &read_body);
      curl_easy_setopt(e, CURLOPT_READDATA, &body);
      curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
      if (method == "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "POST");
    } else if (method == "DELETE") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Attempt::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &a);
    a.body.capture(e);
    if (r.cancellable) {  // called at least once a second while the transfer runs
      curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, &stop_if_cancelled);
    }
    ++requests_;
    const CURLcode code = curl_easy_perform(e);
    retry_after = a.retry_after;
    long os_errno = 0;
    curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &os_errno);
    long sent = 0;  // bytes of request headers sent
    curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &sent);
    curl_off_t elapsed_us = 0, uploaded = 0, connected_us = 0;
    curl_easy_getinfo(e, CURLINFO_TOTAL_TIME_T, &elapsed_us);
    curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &connected_us);
    curl_easy_getinfo(e, CURLINFO_SIZE_UPLOAD_T, &uploaded);
    curl_easy_cleanup(e);
    curl_slist_free_all(headers);

    const std::string attempts =
        attempt > 1 ? " after " + std::to_string(attempt) + " attempts" : "";
    if (r.cancellable && cancel_requested())
      throw Error(ErrorCode::cancelled,
                  std::string("S3 ") + r.operation + " cancelled (interrupted)" + where,
                  ErrorContext{.archive = endpoint_.url});
    if (code != CURLE_OK && !a.body.overflow) {
      if (sent > 0) answer_lost = true;
      if (transient(code) && retry_left) {
        pause();
        continue;
      }
      std::string detail = describe(code, errbuf, os_errno);
      const long elapsed_ms = static_cast<long>(elapsed_us / 1000);
      if (code == CURLE_OPERATION_TIMEDOUT && stall_s > 0 && connected_us > 0 &&
          elapsed_ms + 100 < deadline_ms)
        detail = "timed out: the server sent nothing for " + std::to_string(stall_s) + " s " +
                 (r.body.empty() ? "during a server-side copy of "
                                 : "while completing the upload of an object of ") +
                 std::to_string(r.copies) +
                 " bytes (MODELZIP_LOW_SPEED_TIME or RemoteOptions::low_speed_time, now " +
                 std::to_string(settings_.low_speed_time_s) +
                 " s per 8 MiB the server copies or assembles: raise it for a slower server)";
      else if (code == CURLE_OPERATION_TIMEDOUT)
        detail = timed_out(
            settings_, deadline_ms, elapsed_ms, "the request",
            !r.body.empty()
                ? std::to_string(uploaded) + " of " + std::to_string(r.body.size()) + " bytes sent"
                : (r.copies ? "a server-side copy of " + std::to_string(r.copies) + " bytes, "
                            : "") +
                      (a.status != 0 ? "its answer incomplete" : "no answer"),
            detail);
      fail(
          ErrorCode::io, endpoint_.url,
          std::string("S3 ") + r.operation + " failed: " + detail + attempts + where + lost_note());
    }
    if (a.body.overflow)
      fail(ErrorCode::io, endpoint_.url,
           std::string("S3 ") + r.operation + " failed: HTTP " + std::to_string(a.status) +
               " with an answer larger than " + std::to_string(kMaxAnswer >> 20) +
               " MiB (S3 answers are a few KiB)" + attempts + where + lost_note());
    // S3 may answer 200 and report an error in the body (CompleteMultipartUpload,
    // UploadPartCopy).
    const bool error_body = a.body.text.find("<Error>") != std::string::npos;
    if (a.status >= 200 && a.status < 300 && !error_body && !a.body.overflow)
      return Response{a.status, a.etag, a.checksum, std::move(a.body.text)};
    const std::string s3_code = xml_element(a.body.text, "Code").value_or("");
    const std::string s3_message = printable(xml_element(a.body.text, "Message").value_or(""));
    // 501 NotImplemented is the server's final word.
    if (((a.status >= 500 && a.status != 501) || a.status == 429 || transient_s3(s3_code)) &&
        retry_left) {
      pause();
      continue;
    }
    std::string message =
        std::string("S3 ") + r.operation + " failed: HTTP " + std::to_string(a.status) +
        (s3_code.empty() ? status_text(a.status) : " " + printable(s3_code, 64)) +
        (s3_message.empty() ? "" : ": " + s3_message) + attempts + where + lost_note();
    if (a.status == 412 || (a.status == 409 && s3_code == "ConditionalRequestConflict"))
      fail(ErrorCode::io, endpoint_.url, std::string(kChangedByAnotherWriter) + ": " + message);
    ErrorCode ec = ErrorCode::io;
    if (s3_code == "NoSuchBucket" || s3_code == "NoSuchKey" || s3_code == "NoSuchUpload")
      ec = ErrorCode::not_found;
    fail(ec, endpoint_.url, message);
  }
}

std::string S3Multipart::create() const {
  // "?uploads=" rather than "?uploads": libcurl signs the bare form wrongly.
  Response r = perform(Request{"CreateMultipartUpload",
                               "POST",
                               endpoint_.http + "?uploads=",
                               {"x-amz-checksum-algorithm: CRC32", "Content-Type: application/zip"},
                               {}});
  auto id = xml_element(r.body, "UploadId");
  if (!id || id->empty())
    fail(ErrorCode::io, endpoint_.url,
         "S3 CreateMultipartUpload failed: no UploadId in the answer (POST " + endpoint_.http +
             "?uploads=)");
  return *id;
}

namespace {
std::string part_query(int number, const std::string& upload_id) {
  return "?partNumber=" + std::to_string(number) + "&uploadId=" + query_encode(upload_id);
}
}  // namespace

S3Part S3Multipart::upload_part(const std::string& upload_id, int number,
                                std::span<const std::byte> body, int in_flight) const {
  const std::string crc = s3_crc32_base64(body);
  Request part{"UploadPart",
               "PUT",
               endpoint_.http + part_query(number, upload_id),
               {"x-amz-checksum-crc32: " + crc, "Content-Type: application/octet-stream"},
               body,
               true};
  part.in_flight = in_flight;
  Response r = perform(part);
  if (r.etag.empty())
    fail(ErrorCode::io, endpoint_.url,
         "S3 UploadPart failed: no ETag in the answer for part " + std::to_string(number));
  return S3Part{number, r.etag, crc};
}

S3Part S3Multipart::upload_part_copy(const std::string& upload_id, int number,
                                     const std::string& source_key, std::uint64_t first,
                                     std::uint64_t length, const std::string& source_etag) const {
  if (length == 0)
    fail(ErrorCode::invalid_argument, endpoint_.url, "S3 UploadPartCopy of no bytes");
  std::vector<std::string> headers{
      "x-amz-copy-source: /" + endpoint_.bucket + "/" + percent_encode_path(source_key),
      "x-amz-copy-source-range: bytes=" + std::to_string(first) + "-" +
          std::to_string(first + length - 1)};
  if (!source_etag.empty()) headers.push_back("x-amz-copy-source-if-match: " + source_etag);
  Request copy{"UploadPartCopy", "PUT", endpoint_.http + part_query(number, upload_id), headers};
  copy.cancellable = true;
  copy.copies = length;
  copy.server_works = true;
  Response r = perform(copy);
  auto etag = xml_element(r.body, "ETag");
  if (!etag || etag->empty())
    fail(ErrorCode::io, endpoint_.url,
         "S3 UploadPartCopy failed: no ETag in the answer for part " + std::to_string(number));
  return S3Part{number, *etag, xml_element(r.body, "ChecksumCRC32").value_or("")};
}

std::string S3Multipart::complete(const std::string& upload_id, std::span<const S3Part> parts,
                                  const S3Condition& condition, std::uint64_t size) const {
  std::string xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  for (const auto& p : parts) {
    xml += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>" +
           xml_escape(p.etag) + "</ETag>";
    if (!p.checksum_crc32.empty())
      xml += "<ChecksumCRC32>" + xml_escape(p.checksum_crc32) + "</ChecksumCRC32>";
    xml += "</Part>";
  }
  xml += "</CompleteMultipartUpload>";
  std::vector<std::string> headers{"Content-Type: application/xml"};
  if (condition.if_none_match) headers.push_back("If-None-Match: *");
  if (!condition.if_match.empty()) headers.push_back("If-Match: " + condition.if_match);
  Request request{"CompleteMultipartUpload",
                  "POST",
                  endpoint_.http + "?uploadId=" + query_encode(upload_id),
                  headers,
                  std::as_bytes(std::span(xml)),
                  false,
                  true};
  request.server_works = true;
  request.copies = size;
  Response r = perform(request);
  return xml_element(r.body, "ETag").value_or(r.etag);
}

void S3Multipart::abort(const std::string& upload_id) const {
  perform(Request{"AbortMultipartUpload",
                  "DELETE",
                  endpoint_.http + "?uploadId=" + query_encode(upload_id),
                  {},
                  {}});
}

std::vector<S3PendingUpload> S3Multipart::list_uploads() const {
  std::vector<S3PendingUpload> out;
  std::string key_marker, id_marker;
  std::set<std::pair<std::string, std::string>> markers;  // of the pages asked for
  for (int page = 0; page < 10'000; ++page) {
    // Query parameters in the order SigV4 signs them (sorted by name).
    std::string query = "?";
    if (!key_marker.empty()) query += "key-marker=" + query_encode(key_marker) + "&";
    query += "prefix=" + query_encode(endpoint_.key);
    if (!id_marker.empty()) query += "&upload-id-marker=" + query_encode(id_marker);
    query += "&uploads=";
    Response r =
        perform(Request{"ListMultipartUploads", "GET", endpoint_.bucket_http + query, {}, {}});
    std::size_t at = 0, end = 0;
    while (auto upload = xml_element(r.body, "Upload", at, &end)) {
      at = end;
      S3PendingUpload u{xml_element(*upload, "Key").value_or(""),
                        xml_element(*upload, "UploadId").value_or(""),
                        xml_element(*upload, "Initiated").value_or("")};
      if (u.key == endpoint_.key && !u.upload_id.empty()) out.push_back(std::move(u));
    }
    if (xml_element(r.body, "IsTruncated").value_or("false") != "true") return out;
    key_marker = xml_element(r.body, "NextKeyMarker").value_or("");
    id_marker = xml_element(r.body, "NextUploadIdMarker").value_or("");
    if (key_marker.empty() && id_marker.empty()) return out;
    // A server naming a page again would be listed until the page limit.
    if (!markers.insert({key_marker, id_marker}).second)
      fail(ErrorCode::io, endpoint_.url,
           "S3 ListMultipartUploads failed: the server sent the page markers '" +
               printable(key_marker) + "', '" + printable(id_marker) + "' twice (GET " +
               endpoint_.bucket_http + query + ")");
  }
  fail(ErrorCode::limit_exceeded, endpoint_.url,
       "S3 ListMultipartUploads: more than 10000 pages of uploads");
}

std::string s3_crc32_base64(std::span<const std::byte> data) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const std::uint32_t crc = detail::crc32_of(data);
  const unsigned char b[4] = {
      static_cast<unsigned char>(crc >> 24), static_cast<unsigned char>(crc >> 16),
      static_cast<unsigned char>(crc >> 8), static_cast<unsigned char>(crc)};
  std::string out;
  out += alphabet[b[0] >> 2];
  out += alphabet[((b[0] & 3) << 4) | (b[1] >> 4)];
  out += alphabet[((b[1] & 15) << 2) | (b[2] >> 6)];
  out += alphabet[b[2] & 63];
  out += alphabet[b[3] >> 2];
  out += alphabet[(b[3] & 3) << 4];
  out += "==";
  return out;
}

std::optional<std::string> xml_element(std::string_view xml, std::string_view tag, std::size_t from,
                                       std::size_t* end) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  if (from > xml.size()) return std::nullopt;
  auto a = xml.find(open, from);
  if (a == std::string_view::npos) return std::nullopt;
  auto b = xml.find(close, a + open.size());
  if (b == std::string_view::npos) return std::nullopt;
  if (end) *end = b + close.size();
  return xml_unescape(xml.substr(a + open.size(), b - a - open.size()));
}

}  // namespace modelzip::remote
