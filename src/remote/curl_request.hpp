// The libcurl pieces every remote request shares, reads and writes alike:
// one-time global initialization, the options of an easy handle (time-outs,
// CA file, user agent, protocols, SigV4 signing), response header parsing and
// the wording of transfer failures. Callers own the handles and lists.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "remote/endpoint.hpp"
#include "remote/settings.hpp"

namespace modelzip::remote {

// x-amz-content-sha256 of an empty body, and of a body not hashed (S3
// accepts UNSIGNED-PAYLOAD; the body is checked by Content-MD5 or a
// checksum header instead).
inline constexpr const char* kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
inline constexpr const char* kUnsignedPayload = "UNSIGNED-PAYLOAD";

// curl_global_init, once per process (thread-safe).
void global_init();

// Appends "Name: value" to `list` (the list stays valid when out of memory).
void add_header(curl_slist*& list, const std::string& header);

// Sets the options every request has: `http` as the URL, `errbuf` (at least
// CURL_ERROR_SIZE bytes), connect and low-speed time-outs, the deadline of a
// request that moves up to kDeadlineUnit bytes (set_deadline), the CA file, the
// user agent, http(s) only, redirects only for unsigned requests (at most 5,
// never from https to http), and for
// S3 the SigV4 signature with `payload_sha256` and the session token
// appended to `headers` (which the caller still has to set and free).
void configure(CURL* easy, const std::string& http, const Endpoint& endpoint,
               const Settings& settings, char* errbuf, curl_slist*& headers,
               std::string_view payload_sha256 = kEmptyPayloadSha256);

// A request is given settings.request_timeout_ms per kDeadlineUnit bytes it
// moves (sends, receives or has the server copy), at least that once: reads
// are cut into requests of at most this size, so for them it is the time
// one request may take from its start (DNS, connection, headers included)
// to its last byte.
inline constexpr std::uint64_t kDeadlineUnit = std::uint64_t{8} << 20;

// The requests in flight at once that the setting is sized for (reads, and
// S3 parts by default): a link of kDeadlineShare x kDeadlineUnit per
// request_timeout_ms never meets the deadline (docs/remote.md).
inline constexpr int kDeadlineShare = 4;

// Sets CURLOPT_TIMEOUT_MS for a request that moves `bytes`; returns it (ms).
// `in_flight`: the requests of its writer that share the link with it (S3
// parts in flight); above kDeadlineShare the deadline grows in proportion,
// so that the link speed the setting needs stays that of kDeadlineShare.
long set_deadline(CURL* easy, const Settings& settings, std::uint64_t bytes, int in_flight = 1);

// Why a transfer ended in CURLE_OPERATION_TIMEDOUT after `elapsed_ms` whose
// deadline was `deadline_ms`: "timed out: <request> not done within N s:
// <moved> (<setting>)" when the deadline passed (within 0.1 s), else the
// connect or low-speed time-out that did, with `detail` (describe()).
// `request` names the request ("bytes 0-99", "the request"), `moved` the
// bytes it moved ("10 of 100 bytes received"); `setting` says what to change
// for a deadline other than set_deadline()'s (null: MODELZIP_REQUEST_TIMEOUT).
std::string timed_out(const Settings& settings, long deadline_ms, long elapsed_ms,
                      const std::string& request, const std::string& moved,
                      const std::string& detail, const char* setting = nullptr);

// Milliseconds as seconds for a message: "2", "0.5", "1.25".
std::string seconds_text(long ms);

// An answer's body kept in memory, at most `max` bytes: capture() makes it
// the easy handle's CURLOPT_WRITEFUNCTION / CURLOPT_WRITEDATA (it must
// outlive the transfer); a longer body ends the transfer
// (CURLE_WRITE_ERROR) with `overflow` set and `text` holding what came
// before the piece that passed `max`.
struct CappedBody {
  explicit CappedBody(std::size_t max_bytes) : max(max_bytes) {}
  void capture(CURL* easy);

  std::size_t max;
  std::string text;
  bool overflow = false;
};

// The pause before attempt `attempt` + 1 after a transient failure: 250 ms,
// doubling with each attempt, or longer where the answer said Retry-After
// (whole seconds; at most kMaxRetryAfterSeconds of it are honoured, so a
// server cannot hold a request longer than that per attempt).
inline constexpr std::uint64_t kMaxRetryAfterSeconds = 10;
std::chrono::milliseconds retry_pause(int attempt, std::optional<std::uint64_t> retry_after);

// Failures worth another attempt: refused or reset connections, truncated
// answers.
bool transient(CURLcode code) noexcept;

// "<curl's message> (<strerror(os_errno)>)" for a failed transfer.
std::string describe(CURLcode code, const char* errbuf, long os_errno);

// " (Forbidden)" and the like for a few statuses, else "".
std::string status_text(long status);

// One response header line: a status line ("HTTP/1.1 206 ...") or a field.
struct HeaderLine {
  bool status_line = false;
  long status = 0;    // status lines only (0 if unreadable)
  std::string name;   // lower case
  std::string value;  // trimmed
};
std::optional<HeaderLine> parse_header_line(std::string_view line);

// Decimal digits only (no sign, space or suffix), within 64 bits.
std::optional<std::uint64_t> parse_u64(std::string_view text);

// Text a server sent, made fit for an error message: control characters
// written as \xNN (no terminal escapes or line breaks from a server reach the
// user), and at most `max` bytes kept (cut at a UTF-8 boundary) followed by
// "... (N bytes)".
std::string printable(std::string_view text, std::size_t max = 256);

// A Content-Range value of a single range, "bytes FIRST-LAST/TOTAL" or
// "bytes FIRST-LAST/*" (RFC 9110 section 14.4), FIRST <= LAST < TOTAL;
// nullopt for anything else (other units, spaces, a missing or extra part).
struct ContentRange {
  std::uint64_t first = 0, last = 0;
  std::optional<std::uint64_t> total;  // nullopt: "*" (unknown)
};
std::optional<ContentRange> parse_content_range(std::string_view value);

}  // namespace modelzip::remote
