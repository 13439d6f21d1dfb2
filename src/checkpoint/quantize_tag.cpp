// quantize_tag: a quantized variant of a tag as a new tag, in one commit,
// sharing every parameter it leaves alone (modelzip/quantize.hpp).
#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "core/printable.hpp"
#include "core/progress_tracker.hpp"
#include "core/quantization_rules.hpp"
#include "core/suggestions.hpp"
#include "format/tag_name.hpp"
#include "modelzip/error.hpp"
#include "modelzip/quantize.hpp"
#include "modelzip/writer.hpp"
#include "remote/remote_source.hpp"

namespace modelzip {
namespace {

bool contains_ascii_ci(std::string_view text, std::string_view word) {
  auto lower = [](unsigned char c) { return static_cast<char>(std::tolower(c)); };
  auto it = std::search(text.begin(), text.end(), word.begin(), word.end(),
                        [&](char a, char b) { return lower(a) == lower(b); });
  return it != text.end();
}

bool glob_matches(const std::string& glob, const std::string& name) {
  return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

bool quantize_by_default(const ParamInfo& p, std::uint64_t min_elements) {
  if (p.kind != BlobKind::tensor || p.layout != Layout::dense ||
      !detail::quantizable_type(p.dtype) || p.shape.size() < 2)
    return false;
  if (shape_numel(p.shape) < min_elements) return false;
  for (std::string_view word : {"bias", "norm", "embed"})
    if (contains_ascii_ci(p.name, word)) return false;
  return true;
}

QuantizeResult quantize_tag(const std::filesystem::path& path, std::string_view from_tag,
                            std::string new_tag, const QuantizeOptions& options) {
  // Before anything is fetched: only s3:// URLs are writable.
  if (!remote::can_upload(path.native())) remote::refuse_write(path.native());
  Archive archive = Archive::open(path);
  auto source = archive.find_tag(from_tag);
  if (!source)
    throw Error(ErrorCode::not_found,
                "no tag " + modelzip::detail::quote_name(from_tag) +
                    detail::did_you_mean(from_tag, archive.tags()),
                ErrorContext{.archive = archive.name()});
  if (auto damage = archive.tag_damage(*source)) throw *damage;
  const std::vector<ParamInfo> params = archive.params(*source);

  std::vector<bool> selected(params.size(), false);
  for (const auto& glob : options.params) {
    bool any = false;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (glob_matches(glob, params[i].name)) selected[i] = any = true;
    if (!any)
      throw Error(ErrorCode::invalid_argument,
                  "--params " + modelzip::detail::quote_name(glob) + " matches no parameter",
                  ErrorContext{.archive = archive.name(), .tag = *source});
  }
  if (options.params.empty())
    for (std::size_t i = 0; i < params.size(); ++i)
      selected[i] = quantize_by_default(params[i], options.min_elements);

  detail::ProgressTracker tracker(options.progress, "quantize",
                                  ErrorContext{.archive = archive.name(), .tag = *source});
  for (std::size_t i = 0; i < params.size(); ++i)
    if (selected[i]) tracker.add_to_total(params[i].nbytes);

  QuantizeResult result;
  NewTag tag;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    if (!selected[i]) {
      tag.share(p.name, *source, p.name);
      result.referenced.push_back(p.name);
      continue;
    }
    try {
      if (p.kind != BlobKind::tensor)
        throw Error(ErrorCode::invalid_argument,
                    "a finalfusion embedding cannot be quantized by this command");
      Tensor q = quantize(archive.tensor(p.name, *source), options.scheme);
      result.source_bytes += p.nbytes;
      result.quantized_bytes += q.nbytes();
      tag.add(p.name, std::move(q));
    } catch (const Error& e) {
      throw e
          .reworded("parameter " + modelzip::detail::quote_name(p.name) + ": " + e.message(),
                    e.context())
          .with_context(ErrorContext{.archive = archive.name(), .tag = *source});
    }
    result.quantized.push_back(p.name);
    tracker.advance(p.nbytes);
  }
  tracker.finish();

  WriterOptions wo;
  wo.durable = options.durable;
  if (options.progress)  // the commit asks it too, repeating the last report
    wo.progress = [&progress = options.progress,
                   last = Progress{result.source_bytes, result.source_bytes}](const Progress&) {
      return progress(last);
    };
  Writer writer = Writer::open(path, wo);
  try {
    writer.add_tag(std::move(new_tag), std::move(tag));
    writer.commit();
  } catch (const Error& e) {
    throw format::with_replace_hint(e, "");  // quantize_tag has no way to replace a tag
  }
  result.bytes_written = writer.last_stats().bytes_written;
  result.appended = writer.last_stats().appended;
  return result;
}

}  // namespace modelzip
