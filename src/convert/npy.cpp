// NumPy .npy reading and writing (format described in numpy/lib/format.py).
#include <charconv>
#include <cstring>
#include <optional>
#include <ostream>
#include <vector>

#include "convert/npy_format.hpp"
#include "convert/tensor_bytes.hpp"
#include "core/byte_swap.hpp"
#include "core/checked.hpp"
#include "core/fail.hpp"
#include "core/printable.hpp"
#include "core/utf8.hpp"
#include "io/atomic_write.hpp"
#include "modelzip/convert.hpp"

namespace modelzip::convert {
namespace detail {
namespace {

using modelzip::detail::ByteReader;
using modelzip::detail::checked_mul;

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
constexpr std::uint64_t kAlignment = 64;
// numpy writes version 2.0 headers only for dtypes with very many fields;
// every header modelzip can read is far below this.
constexpr std::uint64_t kMaxHeaderBytes = 1 << 20;

using modelzip::detail::fail_corrupt;

// One value of the header's Python literal.
struct PyValue {
  enum class Kind { string, boolean, none, integer, tuple, list, dict } kind = Kind::none;
  std::string text;          // string
  bool boolean = false;      // boolean
  std::int64_t integer = 0;  // integer
  bool negative = false;
  std::vector<PyValue> items;  // tuple, list
  std::uint64_t offset = 0;
};

// Parser of the subset of Python literals numpy writes in a header
// (ast.literal_eval input): a dict of string keys, strings, True, False,
// None, integers (an 'L' suffix from Python 2 files allowed), tuples and
// lists. Nested structures are only parsed to report structured dtypes.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::uint64_t base) : text_(text), base_(base) {}

  struct Header {
    std::optional<PyValue> descr, fortran_order, shape;
  };

  Header parse() {
    skip_space();
    expect('{');
    Header h;
    for (bool first = true;;) {
      skip_space();
      if (peek() == '}') break;
      if (!first) {
        expect(',');
        skip_space();
        if (peek() == '}') break;
      }
      first = false;
      const std::uint64_t key_at = offset();
      if (peek() != '\'' && peek() != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      PyValue value = parse_value(0);
      std::optional<PyValue>* slot = key == "descr"           ? &h.descr
                                     : key == "fortran_order" ? &h.fortran_order
                                     : key == "shape"         ? &h.shape
                                                              : nullptr;
      if (!slot)
        fail_corrupt(".npy header: unexpected key " + modelzip::detail::quote_name(key),
                     {.offset = key_at});
      if (*slot)
        fail_corrupt(".npy header: duplicate key " + modelzip::detail::quote_name(key),
                     {.offset = key_at});
      *slot = std::move(value);
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header dict");
    if (!h.descr || !h.fortran_order || !h.shape)
      fail_corrupt(".npy header: the header dict must hold 'descr', 'fortran_order' and 'shape'",
                   {.offset = base_});
    return h;
  }

 private:
  std::uint64_t offset() const { return base_ + pos_; }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  [[noreturn]] void fail(const std::string& what) const {
    fail_corrupt(".npy header: " + what, {.offset = offset()});
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  std::string parse_string() {
    const char quote = text_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      const char c = text_[pos_];
      if (c == '\\') fail("escape sequences in header strings are not supported");
      if (c == '\n' || c == '\r') fail("unterminated string");
      ++pos_;
    }
    if (pos_ == text_.size()) fail("unterminated string");
    std::string s(text_.substr(start, pos_ - start));
    ++pos_;
    return s;
  }

  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    const std::size_t end = pos_ + word.size();
    if (end < text_.size()) {
      const char c = text_[end];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') return false;
    }
    pos_ = end;
    return true;
  }

  PyValue parse_value(int depth) {
    if (depth > 32) fail("header nesting too deep");
    PyValue v;
    v.offset = offset();
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = PyValue::Kind::string;
      v.text = parse_string();
    } else if (consume_word("True") || consume_word("False")) {
      v.kind = PyValue::Kind::boolean;
      v.boolean = text_[v.offset - base_] == 'T';
    } else if (consume_word("None")) {
      v.kind = PyValue::Kind::none;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      parse_integer(v);
    } else if (c == '(' || c == '[') {
      parse_sequence(v, depth);
    } else if (c == '{') {
      // Only in structured dtypes' metadata; parsed to be skipped.
      v.kind = PyValue::Kind::dict;
      ++pos_;
      for (bool first = true;;) {
        skip_space();
        if (peek() == '}') break;
        if (!first) {
          expect(',');
          skip_space();
          if (peek() == '}') break;
        }
        first = false;
        v.items.push_back(parse_value(depth + 1));
        skip_space();
        expect(':');
        skip_space();
        v.items.push_back(parse_value(depth + 1));
      }
      ++pos_;
    } else {
      fail("unexpected character in the header");
    }
    return v;
  }

  void parse_integer(PyValue& v) {
    v.kind = PyValue::Kind::integer;
    if (peek() == '-') {
      v.negative = true;
      ++pos_;
    }
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    std::string_view digits = text_.substr(start, pos_ - start);
    if (digits.empty()) fail("expected digits");
    if (digits.size() > 1 && digits[0] == '0') fail("integer with a leading zero");
    std::uint64_t magnitude = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
    if (ec != std::errc() || end != digits.data() + digits.size() ||
        magnitude > static_cast<std::uint64_t>(INT64_MAX))
      fail_corrupt(".npy header: integer " + std::string(digits) + " is too large",
                   {.offset = v.offset});
    v.integer =
        v.negative ? -static_cast<std::int64_t>(magnitude) : static_cast<std::int64_t>(magnitude);
    if (peek() == 'L') ++pos_;  // Python 2 long literal
  }

  void parse_sequence(PyValue& v, int depth) {
    const char open = text_[pos_++];
    const char close = open == '(' ? ')' : ']';
    bool trailing_comma = false;
    for (bool first = true;;) {
      skip_space();
      if (peek() == close) break;
      if (!first) {
        expect(',');
        trailing_comma = true;
        skip_space();
        if (peek() == close) break;
      }
      first = false;
      trailing_comma = false;
      v.items.push_back(parse_value(depth + 1));
    }
    ++pos_;
    if (open == '[') {
      v.kind = PyValue::Kind::list;
    } else if (v.items.size() == 1 && !trailing_comma) {
      // "(3)" is the integer 3 in Python, not a tuple.
      PyValue inner = std::move(v.items[0]);
      inner.offset = v.offset;
      v = std::move(inner);
    } else {
      v.kind = PyValue::Kind::tuple;
    }
  }

  std::string_view text_;
  std::uint64_t base_;
  std::size_t pos_ = 0;
};

enum class ByteOrder { little, big };

struct NpyDtype {
  DType dtype = DType::float32;  // DType::utf8 for 'U'
  std::uint64_t item_size = 0;   // bytes per element in the file
  ByteOrder order = ByteOrder::little;
};

NpyDtype parse_descr(const PyValue& descr) {
  if (descr.kind == PyValue::Kind::list)
    throw Error(ErrorCode::unsupported, ".npy: structured dtypes are not supported",
                ErrorContext{.offset = descr.offset});
  if (descr.kind != PyValue::Kind::string)
    fail_corrupt(".npy header: 'descr' is not a string", {.offset = descr.offset});
  std::string_view s = descr.text;
  auto unsupported = [&](const std::string& why) -> NpyDtype {
    throw Error(ErrorCode::unsupported,
                ".npy: dtype " + modelzip::detail::quote_name(descr.text) + " " + why,
                ErrorContext{.offset = descr.offset});
  };
  NpyDtype d;
  if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
    d.order = s[0] == '>' ? ByteOrder::big : ByteOrder::little;
    s.remove_prefix(1);
  }
  if (s == "O" || s == "O8")
    return unsupported(
        "is an object array (pickled Python objects), which modelzip cannot read; save the data "
        "with a numeric or string dtype");
  if (!s.empty() && s[0] == 'U') {
    std::string_view count = s.substr(1);
    std::uint64_t chars = 0;
    auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), chars);
    if (count.empty() || ec != std::errc() || end != count.data() + count.size())
      return unsupported("is not a supported unicode dtype");
    if (chars == 0)  // items of no bytes: the shape alone could claim any size
      return unsupported("(zero-length strings) is not supported");
    if (chars > (UINT64_MAX / 4))
      fail_corrupt(".npy header: unicode item size overflows", {.offset = descr.offset});
    d.dtype = DType::utf8;
    d.item_size = chars * 4;
    return d;
  }
  struct Known {
    std::string_view code;
    DType dtype;
  };
  static constexpr Known kKnown[] = {
      {"b1", DType::bool_},     {"i1", DType::int8},        {"i2", DType::int16},
      {"i4", DType::int32},     {"i8", DType::int64},       {"u1", DType::uint8},
      {"u2", DType::uint16},    {"u4", DType::uint32},      {"u8", DType::uint64},
      {"f2", DType::float16},   {"f4", DType::float32},     {"f8", DType::float64},
      {"c8", DType::complex64}, {"c16", DType::complex128},
  };
  for (const auto& k : kKnown)
    if (s == k.code) {
      d.dtype = k.dtype;
      d.item_size = dtype_size(k.dtype);
      return d;
    }
  return unsupported(
      "is not supported (supported: b1 i1 i2 i4 i8 u1 u2 u4 u8 f2 f4 f8 c8 c16 and U<n>)");
}

Shape parse_shape(const PyValue& shape, const Limits& limits) {
  if (shape.kind != PyValue::Kind::tuple)
    fail_corrupt(".npy header: 'shape' is not a tuple", {.offset = shape.offset});
  check_rank(shape.items.size(), limits, ".npy shape", shape.offset);
  Shape out;
  for (const auto& d : shape.items) {
    if (d.kind != PyValue::Kind::integer)
      fail_corrupt(".npy header: 'shape' holds a non-integer", {.offset = d.offset});
    if (d.negative)
      fail_corrupt(".npy header: negative dimension " + std::to_string(d.integer),
                   {.offset = d.offset});
    out.push_back(d.integer);
  }
  return out;
}

// Unicode items (UCS-4, `chars` code units each) to a utf8 tensor.
Tensor unicode_tensor(std::span<const std::byte> data, const Shape& shape, std::uint64_t chars,
                      ByteOrder order, std::uint64_t data_offset) {
  const std::uint64_t numel = shape_numel(shape);
  std::vector<std::byte> offsets((numel + 1) * 8);
  std::string values;
  modelzip::detail::store_le<std::uint64_t>(offsets.data(), 0);
  for (std::uint64_t i = 0; i < numel; ++i) {
    const std::byte* item = data.data() + i * chars * 4;
    auto unit = [&](std::uint64_t k) {
      std::uint32_t u = modelzip::detail::load_le<std::uint32_t>(item + k * 4);
      return order == ByteOrder::big ? __builtin_bswap32(u) : u;
    };
    std::uint64_t end = chars;
    while (end > 0 && unit(end - 1) == 0) --end;  // numpy strips trailing NULs
    for (std::uint64_t k = 0; k < end; ++k) {
      const std::uint32_t cp = unit(k);
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        throw Error(ErrorCode::corrupt,
                    ".npy: unicode item " + std::to_string(i) + " holds " + std::to_string(cp) +
                        ", which is not a Unicode scalar value",
                    ErrorContext{.offset = data_offset + (i * chars + k) * 4});
      modelzip::detail::utf8_append(values, static_cast<char32_t>(cp));
    }
    modelzip::detail::store_le<std::uint64_t>(offsets.data() + (i + 1) * 8, values.size());
  }
  return Tensor::strings(shape, Bytes::take(std::move(offsets)), Bytes::copy_of(values));
}

}  // namespace

Tensor parse_npy(const Bytes& file, const Limits& limits) {
  ByteReader r(file.span());
  auto magic = r.string(kMagicSize, ".npy magic");
  if (std::memcmp(magic.data(), kMagic, kMagicSize) != 0)
    throw Error(ErrorCode::corrupt, "not a .npy file (bad magic)", ErrorContext{.offset = 0});
  const auto major = r.read<std::uint8_t>(".npy version");
  const auto minor = r.read<std::uint8_t>(".npy version");
  if (major < 1 || major > 3 || minor != 0)
    throw Error(ErrorCode::unsupported,
                ".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                    " is not supported (1.0, 2.0, 3.0 are)",
                ErrorContext{.offset = 6});
  const std::uint64_t header_len = major == 1 ? r.read<std::uint16_t>(".npy header length")
                                              : r.read<std::uint32_t>(".npy header length");
  if (header_len > kMaxHeaderBytes)
    throw Error(ErrorCode::limit_exceeded,
                ".npy header of " + std::to_string(header_len) + " bytes exceeds the limit of " +
                    std::to_string(kMaxHeaderBytes),
                ErrorContext{.offset = r.absolute_position()});
  const std::uint64_t header_at = r.position();
  std::string_view header = r.string(header_len, ".npy header");
  // Version 3.0 headers are UTF-8, earlier ones latin-1; every supported
  // header is ASCII, so the bytes are parsed as they are.
  auto h = HeaderParser(header, header_at).parse();
  const NpyDtype dtype = parse_descr(*h.descr);
  if (h.fortran_order->kind != PyValue::Kind::boolean)
    fail_corrupt(".npy header: 'fortran_order' is not True or False",
                 {.offset = h.fortran_order->offset});
  const bool fortran = h.fortran_order->boolean;
  Shape shape = parse_shape(*h.shape, limits);

  const std::uint64_t data_at = r.position();
  const std::uint64_t size = checked_byte_size(shape, dtype.item_size, ".npy data size");
  if (size != r.remaining())
    throw Error(ErrorCode::corrupt,
                ".npy data: the header describes " + std::to_string(size) + " bytes (shape " +
                    shape_text(shape) + "), the file holds " + std::to_string(r.remaining()),
                ErrorContext{.offset = data_at});

  if (dtype.dtype == DType::utf8) {
    std::span<const std::byte> raw = file.span().subspan(data_at, size);
    Bytes reordered;
    if (fortran && shape.size() > 1) {
      reordered = fortran_to_c_order(raw, shape, dtype.item_size);
      raw = reordered.span();
    }
    return unicode_tensor(raw, shape, dtype.item_size / 4, dtype.order, data_at);
  }

  const std::size_t element = dtype.item_size;
  Bytes values;
  const bool swap = dtype.order == ByteOrder::big && element > 1;
  if (swap) {  // complex: each part on its own
    values = modelzip::detail::byteswapped(file.span().subspan(data_at, size),
                                           modelzip::detail::byte_swap_unit(dtype.dtype));
    if (fortran && shape.size() > 1) values = fortran_to_c_order(values.span(), shape, element);
  } else if (fortran && shape.size() > 1) {
    values = fortran_to_c_order(file.span().subspan(data_at, size), shape, element);
  } else {
    values = aligned_slice(file, data_at, size, element);
  }
  return Tensor::dense(dtype.dtype, std::move(shape), std::move(values));
}

std::string npy_descr(DType dtype) {
  switch (dtype) {
    case DType::bool_:
      return "|b1";
    case DType::int8:
      return "|i1";
    case DType::uint8:
    case DType::float8_e4m3fn:  // raw bit patterns (numpy has no 8-bit floats)
    case DType::float8_e5m2:
    case DType::float8_e8m0fnu:
    case DType::float4_e2m1fn_x2:  // one byte per pair of FP4 values, shape in bytes
      return "|u1";
    case DType::int16:
      return "<i2";
    case DType::int32:
      return "<i4";
    case DType::int64:
      return "<i8";
    case DType::uint16:
      return "<u2";
    case DType::uint32:
      return "<u4";
    case DType::uint64:
      return "<u8";
    case DType::float16:
      return "<f2";
    case DType::float32:
      return "<f4";
    case DType::float64:
      return "<f8";
    case DType::bfloat16:
      return "<u2";  // raw bit patterns (numpy has no bfloat16)
    case DType::complex64:
      return "<c8";
    case DType::complex128:
      return "<c16";
    case DType::utf8:
      break;
  }
  throw Error(ErrorCode::unsupported, ".npy strings need their length: use npy_parts");
}

std::string npy_header(const std::string& descr, const Shape& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) dict += ", ";
    dict += std::to_string(shape[i]);
  }
  if (shape.size() == 1) dict += ",";
  dict += "), }";
  // Magic, version, length, dict, padding spaces and '\n' fill a multiple of
  // 64 bytes (numpy's ARRAY_ALIGN).
  std::uint64_t prefix = kMagicSize + 2 + 2;
  int major = 1;
  std::uint64_t total = modelzip::detail::align_up(prefix + dict.size() + 1, kAlignment);
  if (total - prefix > 0xFFFF) {
    major = 2;
    prefix = kMagicSize + 2 + 4;
    total = modelzip::detail::align_up(prefix + dict.size() + 1, kAlignment);
  }
  const std::uint64_t header_len = total - prefix;
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';

  std::string header(kMagic, kMagicSize);
  header += static_cast<char>(major);
  header += '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    header += static_cast<char>((header_len >> (8 * i)) & 0xFF);
  header += dict;
  return header;
}

NpyParts npy_parts(const Tensor& tensor) {
  if (tensor.layout() != Layout::dense)
    throw Error(ErrorCode::unsupported, tensor.layout() == Layout::quantized
                                            ? ".npy cannot hold quantized tensors (dequantize "
                                              "them, or export the integers and scales)"
                                            : ".npy cannot hold sparse COO tensors");
  if (tensor.dtype() != DType::utf8)
    return {npy_header(npy_descr(tensor.dtype()), tensor.shape()), tensor.values()};
  const std::uint64_t n = tensor.numel();
  std::vector<std::vector<char32_t>> items(n);
  std::uint64_t chars = 1;  // numpy never writes '<U0'
  for (std::uint64_t i = 0; i < n; ++i) {
    items[i] = modelzip::detail::utf8_decode(tensor.string_at(i));
    if (!items[i].empty() && items[i].back() == 0)
      throw Error(ErrorCode::unsupported, ".npy cannot hold string " + std::to_string(i) +
                                              ": it ends in U+0000, which numpy strips");
    chars = std::max<std::uint64_t>(chars, items[i].size());
  }
  std::vector<std::byte> out(checked_mul(checked_mul(n, chars, "string data"), 4, "string data"));
  for (std::uint64_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < items[i].size(); ++k)
      modelzip::detail::store_le<std::uint32_t>(out.data() + (i * chars + k) * 4,
                                                static_cast<std::uint32_t>(items[i][k]));
  return {npy_header("<U" + std::to_string(chars), tensor.shape()), Bytes::take(std::move(out))};
}

}  // namespace detail

namespace {

std::vector<NamedTensor> read_npy_bytes(const Bytes& data, std::string name, const Limits& limits) {
  std::vector<NamedTensor> out;
  out.push_back({std::move(name), detail::parse_npy(data, limits)});
  return out;
}

}  // namespace

std::vector<NamedTensor> read_npy(const Bytes& data, std::string name, const Limits& limits,
                                  std::string_view source) {
  return detail::read_from(source, [&] { return read_npy_bytes(data, std::move(name), limits); });
}

void write_npy(std::ostream& out, const Tensor& tensor) {
  auto parts = detail::npy_parts(tensor);
  detail::write_bytes(out, parts.header);
  detail::write_bytes(out, parts.data.span());
}

void write_npy(const std::filesystem::path& path, const Tensor& tensor) {
  auto parts = detail::npy_parts(tensor);
  io::write_file_atomically(
      path,
      [&](std::ostream& out) {
        detail::write_bytes(out, parts.header);
        detail::write_bytes(out, parts.data.span());
      },
      true);
}

}  // namespace modelzip::convert
