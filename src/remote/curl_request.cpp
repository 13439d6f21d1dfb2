#include "remote/curl_request.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <mutex>

namespace modelzip::remote {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

void add_header(curl_slist*& list, const std::string& header) {
  if (curl_slist* l = curl_slist_append(list, header.c_str())) list = l;
}

void configure(CURL* e, const std::string& http, const Endpoint& ep, const Settings& settings,
               char* errbuf, curl_slist*& headers, std::string_view payload_sha256) {
  curl_easy_setopt(e, CURLOPT_URL, http.c_str());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, ep.sigv4.empty() ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  // No redirect downgrades https to http (a man in the middle could then
  // answer).
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR,
                   http.starts_with("https://") ? "https" : "http,https");
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, settings.connect_timeout_ms);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, settings.low_speed_time_s);
  set_deadline(e, settings, 0);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "modelzip/" MODELZIP_VERSION);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, nullptr);  // bytes as stored, no gzip
  if (!settings.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, settings.ca_file.c_str());
  if (!ep.sigv4.empty()) {
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, ep.sigv4.c_str());
    curl_easy_setopt(e, CURLOPT_USERNAME, ep.user.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, ep.password.c_str());
    // The payload hash S3 requires, signed along.
    add_header(headers, "x-amz-content-sha256: " + std::string(payload_sha256));
    if (!ep.session_token.empty()) add_header(headers, "x-amz-security-token: " + ep.session_token);
  }
}

long set_deadline(CURL* e, const Settings& settings, std::uint64_t bytes, int in_flight) {
  const double units = std::max(1.0, static_cast<double>(bytes) / kDeadlineUnit) *
                       std::max(1.0, static_cast<double>(in_flight) / kDeadlineShare);
  // Capped where the product would not fit (5 GiB at 1e6 s: 2e13 ms fits).
  const double ms = std::min(units * static_cast<double>(settings.request_timeout_ms), 1e15);
  const long deadline = static_cast<long>(ms);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, deadline);
  return deadline;
}

std::string seconds_text(long ms) {
  std::string text = std::to_string(ms / 1000);
  if (const long rest = ms % 1000; rest != 0) {
    std::string fraction = std::to_string(1000 + rest).substr(1);  // "050" of 50 ms
    while (fraction.back() == '0') fraction.pop_back();
    text += "." + fraction;
  }
  return text;
}

std::string timed_out(const Settings& settings, long deadline_ms, long elapsed_ms,
                      const std::string& request, const std::string& moved,
                      const std::string& detail, const char* setting) {
  // libcurl's clock for the deadline starts a little before the one of the
  // time it reports.
  if (elapsed_ms + 100 >= deadline_ms)
    return "timed out: " + request + " not done within " + seconds_text(deadline_ms) +
           " s: " + moved + " (" +
           (setting ? std::string(setting)
                    : "MODELZIP_REQUEST_TIMEOUT or RemoteOptions::request_timeout, now " +
                          seconds_text(settings.request_timeout_ms) +
                          " s per 8 MiB a request moves: raise it for a slower link") +
           ")";
  return "timed out (no connection within " + seconds_text(settings.connect_timeout_ms) +
         " s, or under 1 KiB/s for " + std::to_string(settings.low_speed_time_s) + " s): " + detail;
}

void CappedBody::capture(CURL* e) {
  curl_write_callback keep = [](char* data, size_t size, size_t count, void* user) -> size_t {
    auto* body = static_cast<CappedBody*>(user);
    const size_t n = size * count;
    if (n > body->max - body->text.size()) {
      body->overflow = true;
      return 0;  // ends the transfer
    }
    body->text.append(data, n);
    return n;
  };
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, keep);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, this);
}

std::chrono::milliseconds retry_pause(int attempt, std::optional<std::uint64_t> retry_after) {
  const std::chrono::milliseconds backoff(250 << (attempt - 1));
  if (!retry_after) return backoff;
  return std::max(backoff,
                  std::chrono::milliseconds(1000 * std::min(*retry_after, kMaxRetryAfterSeconds)));
}

bool transient(CURLcode c) noexcept {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

std::string describe(CURLcode code, const char* errbuf, long os_errno) {
  std::string detail = errbuf && errbuf[0] ? errbuf : curl_easy_strerror(code);
  if (code == CURLE_UNSUPPORTED_PROTOCOL)
    detail +=
        " (a redirect is followed only to http:// or https://, and from https:// only to "
        "https://)";
  if (os_errno != 0 && detail.find(std::strerror(static_cast<int>(os_errno))) == std::string::npos)
    detail += std::string(" (") + std::strerror(static_cast<int>(os_errno)) + ")";
  return detail;
}

std::string status_text(long status) {
  switch (status) {
    case 401:
      return " (Unauthorized)";
    case 403:
      return " (Forbidden)";
    case 404:
      return " (Not Found)";
    case 405:
      return " (Method Not Allowed)";
    default:
      return "";
  }
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string printable(std::string_view text, std::size_t max) {
  static const char* hex = "0123456789abcdef";
  std::size_t keep = std::min(text.size(), max);
  while (keep < text.size() && keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80)
    --keep;  // not inside a UTF-8 sequence
  std::string out;
  for (unsigned char c : text.substr(0, keep)) {
    if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (keep < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::optional<ContentRange> parse_content_range(std::string_view v) {
  if (!v.starts_with("bytes ")) return std::nullopt;
  v.remove_prefix(6);
  const auto dash = v.find('-'), slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash)
    return std::nullopt;
  auto first = parse_u64(v.substr(0, dash));
  auto last = parse_u64(v.substr(dash + 1, slash - dash - 1));
  if (!first || !last || *first > *last) return std::nullopt;
  ContentRange r{*first, *last, std::nullopt};
  const std::string_view total = v.substr(slash + 1);
  if (total != "*") {
    r.total = parse_u64(total);
    if (!r.total || r.last >= *r.total) return std::nullopt;
  }
  return r;
}

std::optional<HeaderLine> parse_header_line(std::string_view line) {
  HeaderLine h;
  if (line.starts_with("HTTP/")) {  // a new response (after redirects, 100 Continue)
    h.status_line = true;
    auto sp = line.find(' ');
    if (sp != std::string_view::npos && line.size() >= sp + 4)
      h.status = static_cast<long>(parse_u64(line.substr(sp + 1, 3)).value_or(0));
    return h;
  }
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  h.name = lower(trim(line.substr(0, colon)));
  h.value = trim(line.substr(colon + 1));
  return h;
}

}  // namespace modelzip::remote
