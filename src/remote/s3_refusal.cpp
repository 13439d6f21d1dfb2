#include "remote/s3_refusal.hpp"

#include <curl/curl.h>

#include <string>

#include "remote/curl_request.hpp"
#include "remote/s3_multipart.hpp"

namespace modelzip::remote {
namespace {

// Error documents are a few hundred bytes; anything longer is not one.
constexpr std::size_t kMaxErrorDocument = 64 * 1024;

}  // namespace

std::optional<Error> explain_s3_refusal(const Endpoint& endpoint, const Settings& settings,
                                        long status) {
  if (!endpoint.s3()) return std::nullopt;
  CURL* e = curl_easy_init();
  if (!e) return std::nullopt;
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_slist* headers = nullptr;
  CappedBody body(kMaxErrorDocument);  // longer: the transfer fails, no explanation
  configure(e, endpoint.http, endpoint, settings, errbuf, headers);
  add_header(headers, "Range: bytes=0-0");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  body.capture(e);
  const CURLcode code = curl_easy_perform(e);
  long answer = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &answer);
  curl_easy_cleanup(e);
  curl_slist_free_all(headers);
  if (code != CURLE_OK || answer < 400) return std::nullopt;
  const std::optional<std::string> s3_code = xml_element(body.text, "Code");
  if (!s3_code || s3_code->empty()) return std::nullopt;
  const std::string http = "HTTP " + std::to_string(answer) + " " + printable(*s3_code, 64);
  const ErrorContext where{.archive = endpoint.url};
  if (*s3_code == "NoSuchBucket")
    return Error(ErrorCode::not_found, "no such bucket '" + endpoint.bucket + "' (" + http + ")",
                 where);
  if (*s3_code == "NoSuchKey")
    return Error(
        ErrorCode::not_found,
        "no such key '" + endpoint.key + "' in bucket '" + endpoint.bucket + "' (" + http + ")",
        where);
  // A server's text: control characters escaped, at most 256 bytes kept.
  const std::string message = printable(xml_element(body.text, "Message").value_or(""));
  return Error(status == 404 ? ErrorCode::not_found : ErrorCode::io,
               http + (message.empty() ? "" : ": " + message), where);
}

}  // namespace modelzip::remote
