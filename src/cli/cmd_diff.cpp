#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/json.hpp"
#include "cli/open_archive.hpp"
#include "cli/terminal.hpp"
#include "core/float16.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"

namespace modelzip::cli {
namespace {

enum class Change { added, removed, shared, same, changed };

std::string_view change_name(Change c) {
  switch (c) {
    case Change::added:
      return "added";
    case Change::removed:
      return "removed";
    case Change::shared:
      return "shared";
    case Change::same:
      return "same";
    case Change::changed:
      return "changed";
  }
  return "";
}

// The MX types (FORMAT.md section 6), compared by the values they stand for
// as the other float types are.
bool is_mx(DType type) {
  return type == DType::float8_e8m0fnu || type == DType::float4_e2m1fn_x2;
}

// How many values a dense floating tensor holds: its elements, but two per
// element (byte) of float4_e2m1fn_x2.
std::uint64_t value_count(const Tensor& t) {
  return t.dtype() == DType::float4_e2m1fn_x2 ? t.numel() * 2 : t.numel();
}

// Value i (< value_count(t)) of a dense floating tensor as double; of a
// float4_e2m1fn_x2 tensor, value i is the low nibble of byte i / 2 for even
// i, the high nibble for odd i.
double element(const Tensor& t, std::uint64_t i) {
  const std::byte* p = t.values().data();
  switch (t.dtype()) {
    case DType::float32: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
    case DType::float64: {
      double d;
      std::memcpy(&d, p + i * 8, 8);
      return d;
    }
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return detail::half_to_float(h);
    }
    case DType::bfloat16: {
      std::uint16_t h;
      std::memcpy(&h, p + i * 2, 2);
      return detail::bfloat16_to_float(h);
    }
    case DType::float8_e4m3fn:
      return detail::float8_e4m3fn_to_float(static_cast<std::uint8_t>(p[i]));
    case DType::float8_e5m2:
      return detail::float8_e5m2_to_float(static_cast<std::uint8_t>(p[i]));
    case DType::float8_e8m0fnu:
      return detail::float8_e8m0fnu_to_float(static_cast<std::uint8_t>(p[i]));
    case DType::float4_e2m1fn_x2:
      return detail::float4_e2m1fn_x2_value(p, i);
    default:
      return 0;
  }
}

// |a_i - b_i| for dense complex tensors of the same type: hypot of the
// differences of the parts, NaN when either difference is NaN (hypot would
// give infinity for an infinite other part).
double complex_abs_diff(const Tensor& a, const Tensor& b, std::uint64_t i) {
  const bool wide = a.dtype() == DType::complex128;
  auto part = [&](const Tensor& t, std::uint64_t k) -> double {
    const std::byte* p = t.values().data();
    if (wide) {
      double d;
      std::memcpy(&d, p + k * 8, 8);
      return d;
    }
    float f;
    std::memcpy(&f, p + k * 4, 4);
    return f;
  };
  const double re = part(a, 2 * i) - part(b, 2 * i), im = part(a, 2 * i + 1) - part(b, 2 * i + 1);
  if (std::isnan(re) || std::isnan(im)) return NAN;
  return std::hypot(re, im);
}

// "float32 [64, 10], 2.5 KiB" (an embedding: "embedding, 1.2 MiB").
std::string describe(const ParamInfo& p) {
  std::string what = p.kind == BlobKind::embedding
                         ? std::string("embedding")
                         : std::string(dtype_name(p.dtype)) + " " + shape_text(p.shape);
  return what + ", " + human_bytes(p.nbytes);
}

struct Row {
  std::string name;
  std::string state;  // updater state name; empty for parameters
  Change change;
  std::string detail;
  std::optional<double> max_abs_diff;
};

// A parameter or an updater state array (keyed by variable and state name).
using Key = std::pair<std::string, std::string>;

// Compares the arrays of one kind (parameters or updater state) of two tags.
void compare(const Archive& archive, const std::string& tag_a, const std::string& tag_b,
             bool updater, std::vector<Row>& rows) {
  std::map<Key, ParamInfo> a, b;
  for (auto& p : updater ? archive.updater_states(tag_a) : archive.params(tag_a))
    a.emplace(Key{p.name, p.state}, p);
  for (auto& p : updater ? archive.updater_states(tag_b) : archive.params(tag_b))
    b.emplace(Key{p.name, p.state}, p);
  auto read = [&](const Key& k, const std::string& tag) {
    return updater ? archive.updater_state(k.first, k.second, tag, ReadMode::copy)
                   : archive.tensor(k.first, tag, ReadMode::copy);
  };
  for (const auto& [key, pa] : a)
    if (!b.count(key)) rows.push_back({key.first, key.second, Change::removed, describe(pa), {}});
  for (const auto& [key, pb] : b) {
    const auto& [name, state] = key;
    auto it = a.find(key);
    if (it == a.end()) {
      rows.push_back({name, state, Change::added, describe(pb), {}});
      continue;
    }
    const ParamInfo& pa = it->second;
    if (pa.blob == pb.blob) {
      rows.push_back({name, state, Change::shared, pb.blob, {}});
      continue;
    }
    if (pa.kind != BlobKind::tensor || pb.kind != BlobKind::tensor) {
      bool same = archive.entry(pa.blob, ReadMode::copy).as_string_view() ==
                  archive.entry(pb.blob, ReadMode::copy).as_string_view();
      rows.push_back({name, state, same ? Change::same : Change::changed, "embedding", {}});
      continue;
    }
    Tensor ta = read(key, tag_a), tb = read(key, tag_b);
    if (ta == tb) {
      rows.push_back({name, state, Change::same, "equal bytes in separate blobs", {}});
      continue;
    }
    Row r{name, state, Change::changed, {}, {}};
    // A quantized variant against its float source (modelzip quantize):
    // the error of the values the integers stand for.
    std::string dequantized;
    if ((ta.layout() == Layout::quantized || tb.layout() == Layout::quantized) &&
        ta.dtype() == tb.dtype() && ta.shape() == tb.shape()) {
      for (const Tensor* t : {&ta, &tb})
        if (const Quantization* q = t->quantization())
          dequantized += std::string(dequantized.empty() ? " (" : ", ") + (t == &ta ? "a" : "b") +
                         " dequantized from " + std::string(quant_storage_name(q->storage)) + " " +
                         std::string(quant_scheme_name(q->scheme));
      dequantized += ")";
      ta = ta.dequantize();
      tb = tb.dequantize();
    }
    if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape() || ta.layout() != tb.layout()) {
      r.detail = std::string(dtype_name(ta.dtype())) + " " + shape_text(ta.shape()) + " -> " +
                 std::string(dtype_name(tb.dtype())) + " " + shape_text(tb.shape());
    } else if ((dtype_is_floating(ta.dtype()) || dtype_is_complex(ta.dtype()) ||
                is_mx(ta.dtype())) &&
               ta.layout() == Layout::dense) {
      const bool complex = dtype_is_complex(ta.dtype());
      double m = 0;
      for (std::uint64_t i = 0, n = complex ? ta.numel() : value_count(ta); i < n; ++i) {
        double d =
            complex ? complex_abs_diff(ta, tb, i) : std::fabs(element(ta, i) - element(tb, i));
        if (std::isnan(d) || d > m) m = std::isnan(d) ? NAN : d;
        if (std::isnan(m)) break;
      }
      r.max_abs_diff = m;
      r.detail = "max |a - b| = " + json_number(m) + dequantized;
    } else {
      r.detail = "values differ";
    }
    rows.push_back(std::move(r));
  }
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {}, {"--json"});
  args.expect_positionals(3, 3, {"ARCHIVE", "TAG_A", "TAG_B"});
  Archive archive = open_archive(args.path_at(0, "ARCHIVE"));
  const std::string tag_a = args.tag_at(1, "TAG_A"), tag_b = args.tag_at(2, "TAG_B");
  std::vector<Row> rows;
  compare(archive, tag_a, tag_b, false, rows);
  compare(archive, tag_a, tag_b, true, rows);
  const bool differ = std::any_of(rows.begin(), rows.end(), [](const Row& r) {
    return r.change != Change::shared && r.change != Change::same;
  });
  if (args.flag("--json")) {
    std::cout << "[";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::cout << (i ? ",\n " : "") << "{\"name\": " << json_string(r.name);
      if (!r.state.empty()) std::cout << ", \"state\": " << json_string(r.state);
      std::cout << ", \"change\": " << json_string(change_name(r.change));
      if (r.max_abs_diff) std::cout << ", \"max_abs_diff\": " << json_number(*r.max_abs_diff);
      std::cout << ", \"detail\": " << json_string(r.detail) << "}";
    }
    std::cout << "]\n";
  } else {
    const bool colour = colour_enabled(1);
    std::map<Change, int> count;
    for (const Row& r : rows) {
      ++count[r.change];
      std::string_view word = change_name(r.change);
      std::string shown = r.change == Change::added     ? paint(word, Colour::green, colour)
                          : r.change == Change::removed ? paint(word, Colour::red, colour)
                          : r.change == Change::changed ? paint(word, Colour::yellow, colour)
                                                        : std::string(word);
      std::cout << shown << "\t" << printable(r.name);
      if (!r.state.empty()) std::cout << " [" << printable(r.state) << "]";
      std::cout << "\t" << printable(r.detail) << "\n";
    }
    std::cerr << count[Change::added] << " added, " << count[Change::removed] << " removed, "
              << count[Change::changed] << " changed, " << count[Change::shared] << " shared, "
              << count[Change::same] << " same\n";
  }
  return differ ? 1 : 0;
}

}  // namespace

extern const Command kDiffCommand{
    "diff",
    "Compare the parameters and optimizer state of two tags",
    "modelzip diff ARCHIVE TAG_A TAG_B [--json]",
    "One line per parameter, then per updater state array (shown as VAR [STATE]):\n"
    "added, removed, shared (same blob), same (equal bytes in separate blobs) or\n"
    "changed (for float, MX and complex tensors of equal type and shape, with the\n"
    "largest absolute difference; float4_e2m1fn_x2: over both FP4 values of each\n"
    "byte; complex: |z| = hypot(re, im), NaN when a part's difference is NaN).\n"
    "A count goes to standard error. On a terminal, added, removed and\n"
    "changed are coloured.\n"
    "Exit status (like diff and git diff --exit-code): 0 when every array is shared or\n"
    "same, 1 when something was added, removed or changed, 2 on trouble (a missing\n"
    "tag, a damaged archive, wrong usage).\n"
    "Options:\n  --json   a JSON array of {name[, state], change, detail[, max_abs_diff]}\n"
    "\nExamples:\n  modelzip diff model.zip step-100 step-200\n"
    "  modelzip diff model.zip step-100 step-200 | grep ^changed\n"
    "  modelzip diff model.zip a b >/dev/null 2>&1 && echo identical\n",
    run,
    2};

}  // namespace modelzip::cli
