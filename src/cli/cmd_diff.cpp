#include <cmath>
#include <cstring>
#include <iostream>
#include <map>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/json.hpp"
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

// Element i of a dense floating tensor as double.
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
    default:
      return 0;
  }
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
  Change change;
  std::string detail;
  std::optional<double> max_abs_diff;
};

int run(const std::vector<std::string>& argv) {
  Args args(argv, {}, {"--json"});
  args.expect_positionals(3, 3);
  Archive archive = Archive::open(args.at(0, "ARCHIVE"));
  const std::string tag_a = args.at(1, "TAG_A"), tag_b = args.at(2, "TAG_B");
  std::map<std::string, ParamInfo> a, b;
  for (auto& p : archive.params(tag_a)) a.emplace(p.name, p);
  for (auto& p : archive.params(tag_b)) b.emplace(p.name, p);
  std::vector<Row> rows;
  for (const auto& [name, pa] : a)
    if (!b.count(name)) rows.push_back({name, Change::removed, describe(pa), {}});
  for (const auto& [name, pb] : b) {
    auto it = a.find(name);
    if (it == a.end()) {
      rows.push_back({name, Change::added, describe(pb), {}});
      continue;
    }
    const ParamInfo& pa = it->second;
    if (pa.blob == pb.blob) {
      rows.push_back({name, Change::shared, pb.blob, {}});
      continue;
    }
    if (pa.kind != BlobKind::tensor || pb.kind != BlobKind::tensor) {
      bool same = archive.entry(pa.blob, ReadMode::copy).as_string_view() ==
                  archive.entry(pb.blob, ReadMode::copy).as_string_view();
      rows.push_back({name, same ? Change::same : Change::changed, "embedding", {}});
      continue;
    }
    Tensor ta = archive.tensor(name, tag_a), tb = archive.tensor(name, tag_b);
    if (ta == tb) {
      rows.push_back({name, Change::same, "equal bytes in separate blobs", {}});
      continue;
    }
    Row r{name, Change::changed, {}, {}};
    if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape() || ta.layout() != tb.layout()) {
      r.detail = std::string(dtype_name(ta.dtype())) + " " + shape_text(ta.shape()) + " -> " +
                 std::string(dtype_name(tb.dtype())) + " " + shape_text(tb.shape());
    } else if (dtype_is_floating(ta.dtype()) && ta.layout() == Layout::dense) {
      double m = 0;
      for (std::uint64_t i = 0; i < ta.numel(); ++i) {
        double d = std::fabs(element(ta, i) - element(tb, i));
        if (std::isnan(d) || d > m) m = std::isnan(d) ? NAN : d;
        if (std::isnan(m)) break;
      }
      r.max_abs_diff = m;
      r.detail = "max |a - b| = " + json_number(m);
    } else {
      r.detail = "values differ";
    }
    rows.push_back(std::move(r));
  }
  if (args.flag("--json")) {
    std::cout << "[";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::cout << (i ? ",\n " : "") << "{\"name\": " << json_string(r.name)
                << ", \"change\": " << json_string(change_name(r.change));
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
      std::cout << shown << "\t" << r.name << "\t" << r.detail << "\n";
    }
    std::cerr << count[Change::added] << " added, " << count[Change::removed] << " removed, "
              << count[Change::changed] << " changed, " << count[Change::shared] << " shared, "
              << count[Change::same] << " same\n";
  }
  return 0;
}

}  // namespace

extern const Command kDiffCommand{
    "diff", "Compare the parameters of two tags", "modelzip diff ARCHIVE TAG_A TAG_B [--json]",
    "One line per parameter: added, removed, shared (same blob), same (equal bytes in\n"
    "separate blobs) or changed (for float tensors of equal shape, with the largest\n"
    "absolute difference). A count goes to standard error. On a terminal, added,\n"
    "removed and changed are coloured.\n"
    "Options:\n  --json   a JSON array of {name, change, detail[, max_abs_diff]}\n"
    "\nExamples:\n  modelzip diff model.zip step-100 step-200\n"
    "  modelzip diff model.zip step-100 step-200 | grep ^changed\n",
    run};

}  // namespace modelzip::cli
