#include "remote/endpoint.hpp"

#include <algorithm>
#include <cctype>

#include "remote/settings.hpp"

namespace modelzip::remote {

void fail(ErrorCode code, const std::string& url, const std::string& message) {
  throw Error(code, message, ErrorContext{.archive = url});
}

std::string percent_encode(std::string_view value, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string percent_encode_path(std::string_view key) {
  return percent_encode(key, true);
}

Endpoint resolve(const std::string& url) {
  Endpoint ep;
  ep.url = url;
  if (!url.starts_with("s3://")) {
    ep.http = url;
    return ep;
  }
  std::string_view rest = std::string_view(url).substr(5);
  auto slash = rest.find('/');
  std::string bucket(rest.substr(0, slash));
  std::string key(slash == std::string_view::npos ? "" : rest.substr(slash + 1));
  bool bucket_ok = !bucket.empty() && std::all_of(bucket.begin(), bucket.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
  });
  if (!bucket_ok || key.empty())
    fail(ErrorCode::invalid_argument, url,
         "an S3 URL is s3://BUCKET/KEY (bucket: lower-case letters, digits, '-', '.')");
  // libcurl (as every HTTP client) removes "." and ".." path segments
  // (RFC 3986 section 5.2.4): such a key would read and write another object.
  for (std::size_t at = 0; at <= key.size();) {
    const std::size_t end = std::min(key.find('/', at), key.size());
    const std::string_view segment(key.data() + at, end - at);
    if (segment == "." || segment == "..")
      fail(ErrorCode::invalid_argument, url,
           "S3 keys with a '.' or '..' path segment are not supported (HTTP clients remove "
           "them from the URL, so another key would be read or written)");
    at = end + 1;
  }
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (region.empty()) region = "us-east-1";
  std::string endpoint = env("AWS_ENDPOINT_URL");
  while (endpoint.ends_with('/')) endpoint.pop_back();
  if (!endpoint.empty())  // S3-compatible stores: path-style addressing
    ep.bucket_http = endpoint + "/" + bucket;
  else
    ep.bucket_http = "https://" + bucket + ".s3." + region + ".amazonaws.com";
  ep.http = ep.bucket_http + "/" + percent_encode_path(key);
  ep.bucket = std::move(bucket);
  ep.key = std::move(key);
  ep.user = env("AWS_ACCESS_KEY_ID");
  ep.password = env("AWS_SECRET_ACCESS_KEY");
  ep.session_token = env("AWS_SESSION_TOKEN");
  if (!ep.user.empty()) ep.sigv4 = "aws:amz:" + region + ":s3";
  return ep;
}

}  // namespace modelzip::remote
