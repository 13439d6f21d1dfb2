// Where a remote object's requests go: an http(s) URL as given, or an
// s3://BUCKET/KEY URL resolved with AWS_REGION / AWS_DEFAULT_REGION (default
// us-east-1), AWS_ENDPOINT_URL (S3-compatible stores, path-style) and the
// credentials AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// read from the environment when resolve() is called. Requests are signed
// with SigV4 by libcurl (remote/curl_request.hpp).
#pragma once

#include <string>
#include <string_view>

#include "modelzip/error.hpp"

namespace modelzip::remote {

struct Endpoint {
  std::string url;    // what the user gave (errors, cache identity)
  std::string http;   // the http(s) URL of the object
  std::string sigv4;  // CURLOPT_AWS_SIGV4 for S3 with credentials, else empty
  std::string user, password, session_token;
  // S3 only (empty for http URLs):
  std::string bucket, key;
  std::string bucket_http;  // the bucket's URL (bucket-level requests)
  bool s3() const noexcept { return !bucket.empty(); }
};

// Throws Error(invalid_argument) for a malformed s3:// URL.
Endpoint resolve(const std::string& url);

// `value` with every byte but unreserved characters (and '/' if
// `keep_slash`) percent-encoded: paths keep '/', query values do not.
std::string percent_encode(std::string_view value, bool keep_slash);
// `key` with every byte but unreserved characters and '/' percent-encoded.
std::string percent_encode_path(std::string_view key);

// Throws Error(code, message) naming `url` as the archive.
[[noreturn]] void fail(ErrorCode code, const std::string& url, const std::string& message);

}  // namespace modelzip::remote
