#include "core/error_wire.hpp"

#include <charconv>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/fail.hpp"

namespace modelzip::detail {
namespace {

constexpr std::string_view kMagic = "modelzip-error 1";
constexpr std::size_t kFields =
    9;  // magic, code, errno, message, archive, entry, tag, line, offset
constexpr ErrorCode kCodes[] = {ErrorCode::io,
                                ErrorCode::corrupt,
                                ErrorCode::not_found,
                                ErrorCode::invalid_argument,
                                ErrorCode::already_exists,
                                ErrorCode::unsupported,
                                ErrorCode::limit_exceeded,
                                ErrorCode::cancelled};

void put(std::string& out, std::string_view field) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out += '|';
  for (char ch : field) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c <= 0x7E && c != '%' && c != '|') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
}

std::string number(std::optional<std::uint64_t> n) {
  return n ? std::to_string(*n) : std::string();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string unescape(std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '%') {
      out += field[i];
      continue;
    }
    if (i + 2 >= field.size()) fail_corrupt("malformed error text: a '%' escape is cut short");
    const int hi = hex_digit(field[i + 1]), lo = hex_digit(field[i + 2]);
    if (hi < 0 || lo < 0) fail_corrupt("malformed error text: a '%' escape is not two hex digits");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

template <class Int>
Int parse_int(std::string_view field, const char* what) {
  Int v{};
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size())
    fail_corrupt(std::string("malformed error text: bad ") + what);
  return v;
}

std::optional<std::uint64_t> parse_optional(std::string_view field, const char* what) {
  if (field.empty()) return std::nullopt;
  return parse_int<std::uint64_t>(field, what);
}

}  // namespace

std::string encode_error(const Error& error) {
  const ErrorContext& c = error.context();
  std::string out(kMagic);
  put(out, error_code_name(error.code()));
  put(out, std::to_string(error.system_error()));
  put(out, error.message());
  put(out, c.archive);
  put(out, c.entry);
  put(out, c.tag);
  put(out, number(c.line));
  put(out, number(c.offset));
  return out;
}

Error decode_error(std::string_view text) {
  std::vector<std::string_view> fields;
  for (std::size_t start = 0;;) {
    const std::size_t bar = text.find('|', start);
    fields.push_back(text.substr(start, bar == std::string_view::npos ? bar : bar - start));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  if (fields.size() != kFields || fields[0] != kMagic)
    fail_corrupt("malformed error text: not " + std::to_string(kFields) + " fields after \"" +
                 std::string(kMagic) + "\"");
  std::optional<ErrorCode> code;
  for (ErrorCode k : kCodes)
    if (fields[1] == error_code_name(k)) code = k;
  if (!code) fail_corrupt("malformed error text: unknown error code");
  const int errnum = parse_int<int>(fields[2], "errno value");
  ErrorContext context{.archive = unescape(fields[4]),
                       .entry = unescape(fields[5]),
                       .tag = unescape(fields[6]),
                       .line = parse_optional(fields[7], "line"),
                       .offset = parse_optional(fields[8], "offset")};
  std::string message = unescape(fields[3]);
  if (errnum == 0) return Error(*code, std::move(message), std::move(context));
  if (*code != ErrorCode::io)
    fail_corrupt("malformed error text: an errno value on a code other than io");
  return Error::from_errno({}, errnum, context).reworded(std::move(message), std::move(context));
}

}  // namespace modelzip::detail
