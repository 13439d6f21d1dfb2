#include "remote/stale_uploads.hpp"

#include <charconv>
#include <exception>

#include "core/fail.hpp"
#include "remote/settings.hpp"

namespace modelzip::remote {
namespace {

// Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's algorithm).
long long days_from_civil(long long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long long>(doe) - 719468;
}

bool number(std::string_view text, std::size_t at, std::size_t length, unsigned& out) {
  if (at + length > text.size()) return false;
  const char* first = text.data() + at;
  auto [end, ec] = std::from_chars(first, first + length, out);
  return ec == std::errc() && end == first + length;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_s3_time(std::string_view t) {
  unsigned y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (t.size() < 19 || t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' ||
      !number(t, 0, 4, y) || !number(t, 5, 2, mo) || !number(t, 8, 2, d) || !number(t, 11, 2, h) ||
      !number(t, 14, 2, mi) || !number(t, 17, 2, s) || mo < 1 || mo > 12 || d < 1 || d > 31 ||
      h > 23 || mi > 59 || s > 60)
    return std::nullopt;
  const long long seconds = days_from_civil(y, mo, d) * 86400 + h * 3600LL + mi * 60LL + s;
  // A time the clock cannot hold (libstdc++: nanoseconds, years 1677 to 2262)
  // is no time S3 gives: rejected, not converted with an overflow.
  using Clock = std::chrono::system_clock;
  constexpr long long kMax =
      std::chrono::duration_cast<std::chrono::seconds>(Clock::duration::max()).count();
  constexpr long long kMin =
      std::chrono::duration_cast<std::chrono::seconds>(Clock::duration::min()).count();
  if (seconds > kMax || seconds < kMin) return std::nullopt;
  return Clock::time_point(std::chrono::seconds(seconds));
}

std::chrono::seconds stale_upload_age(const std::string& url) {
  const std::string text = env("MODELZIP_S3_STALE_UPLOAD_AGE");
  if (text.empty()) return kDefaultStaleUploadAge;
  unsigned long long n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n > 100ULL * 365 * 86400)
    detail::fail_invalid("MODELZIP_S3_STALE_UPLOAD_AGE='" + text +
                             "' is not a whole number of seconds (0 to 100 years)",
                         ErrorContext{.archive = url});
  return std::chrono::seconds(static_cast<long long>(n));
}

std::vector<S3PendingUpload> list_stale_uploads(
    const S3Multipart& s3, std::chrono::seconds older_than,
    std::chrono::system_clock::time_point now) noexcept {
  std::vector<S3PendingUpload> stale;
  try {
    for (S3PendingUpload& u : s3.list_uploads()) {
      const auto initiated = parse_s3_time(u.initiated);
      if (initiated && now - *initiated >= older_than) stale.push_back(std::move(u));
    }
  } catch (const std::exception&) {  // listing unsupported or refused: go on (see header)
  }
  return stale;
}

std::size_t abort_uploads(const S3Multipart& s3, const std::vector<S3PendingUpload>& uploads,
                          std::string_view except) noexcept {
  std::size_t aborted = 0;
  for (const S3PendingUpload& u : uploads) {
    if (u.upload_id == except) continue;
    try {
      s3.abort(u.upload_id);
      ++aborted;
    } catch (const std::exception&) {  // best effort (see header)
    }
  }
  return aborted;
}

std::size_t abort_stale_uploads(const S3Multipart& s3, std::chrono::seconds older_than,
                                std::chrono::system_clock::time_point now) noexcept {
  return abort_uploads(s3, list_stale_uploads(s3, older_than, now));
}

}  // namespace modelzip::remote
