// modelzip quantize: a quantized variant of a tag as a new tag (issue 18),
// through modelzip::quantize_tag (one append; what it leaves alone is
// referenced from the source tag, never copied).
#include <filesystem>
#include <iostream>

#include "cli/args.hpp"
#include "cli/command.hpp"
#include "cli/json.hpp"
#include "cli/open_archive.hpp"
#include "cli/progress_bar.hpp"
#include "cli/terminal.hpp"
#include "modelzip/quantize.hpp"

namespace modelzip::cli {
namespace {

std::string json_names(const std::vector<std::string>& names) {
  std::string s = "[";
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + json_string(names[i]);
  return s + "]";
}

int run(const std::vector<std::string>& argv) {
  Args args(argv, {"--from", "--tag", "--scheme", "--params", "--min-elements"}, {"--json"});
  args.expect_positionals(1, 1, {"ARCHIVE"});
  const std::string& path = args.path_at(0, "ARCHIVE");
  require_existing_archive(path);  // an http(s) URL: "remote archives are read-only"
  auto from = args.value("--from");
  auto tag = args.value("--tag");
  auto scheme_name = args.value("--scheme");
  if (!from) throw UsageError("--from TAG is required (the tag to quantize)");
  if (!tag) throw UsageError("--tag NEW is required (the name of the quantized tag)");
  if (!scheme_name)
    throw UsageError(
        "--scheme is required: int8-per-tensor, int8-per-channel, int8-block32 or int4-block32");
  auto scheme = quantize_recipe_from_name(*scheme_name);
  if (!scheme)
    throw UsageError("unknown --scheme " + quoted_name(*scheme_name) +
                     " (int8-per-tensor, int8-per-channel, int8-block32, int4-block32)");
  QuantizeOptions options;
  options.scheme = *scheme;
  options.params = args.values("--params");
  options.min_elements = static_cast<std::uint64_t>(
      args.number_or("--min-elements", static_cast<long long>(options.min_elements), 0,
                     1'000'000'000'000'000'000LL));
  const auto before = archive_size(path);
  QuantizeResult r;
  {
    ProgressBar bar("quantizing");  // erased when it goes out of scope
    options.progress = bar.callback();
    r = quantize_tag(path, *from, *tag, options);
    options.progress = {};
  }
  const auto after = archive_size(path);
  const std::uint64_t added = after > before ? after - before : 0;
  if (args.flag("--json")) {
    std::cout << "{\"tag\": " << json_string(*tag) << ", \"from\": " << json_string(*from)
              << ", \"scheme\": " << json_string(*scheme_name)
              << ", \"quantized\": " << json_names(r.quantized)
              << ", \"referenced\": " << json_names(r.referenced)
              << ", \"source_bytes\": " << r.source_bytes
              << ", \"quantized_bytes\": " << r.quantized_bytes << ", \"bytes_added\": " << added
              << ", \"appended\": " << json_bool(r.appended) << "}\n";
    return 0;
  }
  std::cout << "tag " << quoted_name(*tag) << " from " << quoted_name(*from) << " (" << *scheme_name
            << "): " << r.quantized.size() << " parameter(s) quantized, " << r.referenced.size()
            << " referenced\n";
  for (const auto& name : r.quantized) std::cout << "  quantized  " << printable(name) << "\n";
  std::cout << "weights " << human_bytes(r.source_bytes) << " -> "
            << human_bytes(r.quantized_bytes);
  if (r.source_bytes)
    std::cout << " ("
              << static_cast<double>(r.quantized_bytes) / static_cast<double>(r.source_bytes)
              << "x)";
  std::cout << "; archive " << human_bytes(before) << " -> " << human_bytes(after) << " ("
            << (r.appended ? "appended" : "rewritten") << ")\n";
  return 0;
}

}  // namespace

extern const Command kQuantizeCommand{
    "quantize",
    "Add a quantized variant of a tag as a new tag",
    "modelzip quantize ARCHIVE --from TAG --tag NEW --scheme SCHEME [--params GLOB]...",
    "Creates tag NEW from tag TAG in one append: the selected parameters are stored\n"
    "quantized, every other one is a reference to TAG's blob (never a copy).\n"
    "Updater state, graph.fb and trainingConfig.fb are not carried over. Each value\n"
    "dequantizes within half a quantization step of the original (schemas/FORMAT.md\n"
    "section 6.1).\n"
    "Without --params: dense float16/bfloat16/float32/float64 tensors of rank >= 2\n"
    "with at least --min-elements elements whose name contains none of 'bias',\n"
    "'norm', 'embed' (any case): the weight matrices and convolution kernels. Never\n"
    "finalfusion embeddings, integer, 8-bit float (float8_e4m3fn, float8_e5m2),\n"
    "complex or already quantized tensors; naming one of those with --params is an\n"
    "error.\n"
    "Options:\n"
    "  --from TAG        the tag to quantize (required)\n"
    "  --tag NEW         the new tag (required)\n"
    "  --scheme S        (required) int8-per-tensor: affine int8, one scale and zero point;\n"
    "                    int8-per-channel: affine int8 per output channel (axis 0);\n"
    "                    int8-block32 / int4-block32: symmetric 8 / 4 bits, one float16\n"
    "                    scale per 32 values along each row\n"
    "  --params GLOB     quantize the parameters matching GLOB instead (shell pattern; *\n"
    "                    also matches / and .); repeatable; each must match something\n"
    "  --min-elements N  the default selection's size threshold (default 1024)\n"
    "  --json            print the result as a JSON object: tag, from, scheme,\n"
    "                    quantized and referenced (lists of parameter names),\n"
    "                    source_bytes and quantized_bytes (of the quantized\n"
    "                    parameters, before and after), bytes_added (the archive's\n"
    "                    growth), appended (true, or false when it was rewritten)\n\n"
    "Example:\n"
    "  modelzip quantize model.zip --from step-100 --tag step-100-int8 --scheme int8-per-channel\n",
    run,
    1,
    true};

}  // namespace modelzip::cli
