// tag_summary_json and tag_summary_text.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "checkpoint/archive_state.hpp"
#include "core/printable.hpp"
#include "core/suggestions.hpp"
#include "format/tag_metadata.hpp"
#include "graph/json_writer.hpp"
#include "graph/render.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "modelzip/graph/checkpoint.hpp"

namespace modelzip::graph {
namespace {

using detail::JsonWriter;

struct BlobStats {
  std::uint64_t count = 0, shared = 0, compressed = 0, bytes = 0, own_bytes = 0;
  std::map<std::string, std::uint64_t> dtypes;
  // Quantized parameters by "<storage> <scheme>" (e.g. "int4 block-symmetric").
  std::map<std::string, std::uint64_t> quantized;
  std::set<std::string> variables;  // updater: variables with state
  std::vector<std::string> states;  // updater: state names, first-seen order
};

BlobStats blob_stats(const std::vector<ParamInfo>& infos) {
  BlobStats s;
  for (const ParamInfo& p : infos) {
    ++s.count;
    s.bytes += p.nbytes;
    if (p.shared)
      ++s.shared;
    else
      s.own_bytes += p.nbytes;
    if (p.compressed) ++s.compressed;
    if (p.quantization)
      ++s.quantized[std::string(quant_storage_name(p.quantization->storage)) + " " +
                    std::string(quant_scheme_name(p.quantization->scheme))];
    ++s.dtypes[p.kind == BlobKind::embedding ? "embedding" : std::string(dtype_name(p.dtype))];
    if (!p.state.empty()) {
      s.variables.insert(p.name);
      if (std::find(s.states.begin(), s.states.end(), p.state) == s.states.end())
        s.states.push_back(p.state);
    }
  }
  return s;
}

struct TagFacts {
  std::string tag;
  std::size_t position = 0;  // 1-based
  std::size_t tag_count = 0;
  bool newest = false;
  BlobStats params;
  std::optional<BlobStats> updater;
  std::optional<Graph> graph;
  std::optional<training::TrainingConfig> training;
  // Embedding parameters: name and summary, or why it cannot be read.
  struct Embedding {
    std::string name;
    std::optional<finalfusion::FileSummary> summary;
    std::string error;
  };
  std::vector<Embedding> embeddings;
  // <tag>/metadata.toml (FORMAT.md section 3.1): the metadata kept from the
  // files the tag was imported from; nullopt without the entry. A malformed
  // entry leaves it empty and says why in file_metadata_error.
  std::optional<format::TagMetadata> file_metadata;
  std::string file_metadata_error;
};

TagFacts gather(const Archive& archive, std::string_view tag) {
  TagFacts f;
  f.tag = tag.empty() ? archive.newest_tag() : archive.find_tag(tag).value_or(std::string(tag));
  const auto& tags = archive.tags();
  auto it = std::find(tags.begin(), tags.end(), f.tag);
  if (it == tags.end())
    throw Error(ErrorCode::not_found, "no such tag" + modelzip::detail::did_you_mean(tag, tags),
                ErrorContext{.archive = archive.name(), .tag = std::string(tag)});
  f.position = static_cast<std::size_t>(it - tags.begin()) + 1;
  f.tag_count = tags.size();
  f.newest = f.position == f.tag_count;
  const auto params = archive.params(f.tag);
  f.params = blob_stats(params);
  for (const ParamInfo& p : params) {
    if (p.kind != BlobKind::embedding) continue;
    TagFacts::Embedding e{p.name, std::nullopt, {}};
    try {
      e.summary = finalfusion::summarize(archive.embedding_file(p.name, f.tag));
    } catch (const Error& error) {
      e.error = error.what();
    }
    f.embeddings.push_back(std::move(e));
  }
  const std::string metadata_entry = f.tag + "/" + std::string(format::kTagMetadataFile);
  if (archive.has_entry(metadata_entry)) {
    f.file_metadata.emplace();
    try {
      f.file_metadata =
          format::parse_tag_metadata(archive.entry(metadata_entry, ReadMode::copy).as_string_view(),
                                     checkpoint::ArchiveState(archive).limits());
    } catch (const Error& error) {
      f.file_metadata_error =
          error.with_context({.archive = archive.name(), .entry = metadata_entry}).what();
    }
  }
  if (archive.has_entry(f.tag + "/updater.txt"))
    f.updater = blob_stats(archive.updater_states(f.tag));
  if (archive.has_entry(f.tag + "/" + std::string(kGraphEntryName)))
    f.graph = load_graph(archive, f.tag);
  f.training = load_training_config(archive, f.tag);
  return f;
}

std::map<std::string, std::size_t> kind_counts(const Graph& g) {
  std::map<std::string, std::size_t> m;
  for (const auto& v : g.variables) ++m[std::string(variable_kind_name(v.kind))];
  return m;
}
std::map<std::string, std::size_t> op_type_counts(const Graph& g) {
  std::map<std::string, std::size_t> m;
  for (const auto& op : g.ops) ++m[op.type];
  return m;
}

std::string human_bytes(std::uint64_t n) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) return std::to_string(n) + " B";
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

using modelzip::detail::printable_name;

// The text summary escapes every string of the archive with printable_name
// (names, values, the archive's path) and nothing else: the CLI prints it
// as it is, escaping only what is still raw (control characters).
template <class Map>
std::string counts_text(const Map& m) {
  std::string s;
  for (const auto& [k, n] : m)
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + printable_name(k);
  return s;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + printable_name(items[i]);
  return s;
}

void write_blob_stats(JsonWriter& w, const BlobStats& s, bool updater) {
  w.begin_object();
  w.key("count").value(s.count);
  if (updater) {
    w.key("variables").value(static_cast<std::uint64_t>(s.variables.size()));
    w.key("states").begin_array(true);
    for (const auto& n : s.states) w.value(n);
    w.end_array();
  }
  w.key("shared").value(s.shared);
  w.key("compressed").value(s.compressed);
  w.key("bytes").value(s.bytes);
  w.key("own_bytes").value(s.own_bytes);
  w.key("dtypes").begin_object(true);
  for (const auto& [k, n] : s.dtypes) w.key(k).value(n);
  w.end_object();
  w.key("quantized").begin_object(true);
  for (const auto& [k, n] : s.quantized) w.key(k).value(n);
  w.end_object();
  w.end_object();
}

}  // namespace

std::string tag_summary_json(const Archive& archive, std::string_view tag) {
  // An archive without tags (FORMAT.md section 4.1) has only its metadata:
  // "tag", "position", "newest" and the per-tag sections are null.
  const bool no_tags = archive.tags().empty() && tag.empty();
  std::optional<TagFacts> facts;
  if (!no_tags) facts = gather(archive, tag);
  const Metadata& m = archive.metadata();
  JsonWriter w;
  w.begin_object();
  w.key("archive").value(archive.name());
  if (no_tags) {
    w.key("tag").null();
    w.key("position").null();
    w.key("tags").value(std::uint64_t{0});
    w.key("newest").null();
  } else {
    w.key("tag").value(facts->tag);
    w.key("position").value(static_cast<std::uint64_t>(facts->position));
    w.key("tags").value(static_cast<std::uint64_t>(facts->tag_count));
    w.key("newest").value(facts->newest);
  }
  w.key("metadata").begin_object();
  w.key("format_version").value(m.format_version);
  w.key("writer").value(m.writer);
  auto optional = [&](std::string_view key, const std::optional<std::string>& v) {
    w.key(key);
    if (v)
      w.value(*v);
    else
      w.null();
  };
  optional("model_name", m.model_name);
  optional("model_version", m.model_version);
  optional("quantization", m.quantization);
  optional("description", m.description);
  w.end_object();
  if (no_tags) {
    for (const char* section :
         {"params", "embeddings", "file_metadata", "updater", "graph", "training"})
      w.key(section).null();
    w.end_object();
    return w.take();
  }
  const TagFacts& f = *facts;
  w.key("params");
  write_blob_stats(w, f.params, false);
  w.key("embeddings").begin_object();
  for (const auto& e : f.embeddings) {
    w.key(e.name);
    if (e.summary) {
      w.raw(finalfusion::summary_json(*e.summary));
    } else {
      w.begin_object(true);
      w.key("error").value(e.error);
      w.end_object();
    }
  }
  w.end_object();
  w.key("file_metadata");
  if (!f.file_metadata) {
    w.null();
  } else if (!f.file_metadata_error.empty()) {
    w.begin_object(true);
    w.key("error").value(f.file_metadata_error);
    w.end_object();
  } else {
    w.begin_object();
    w.key("safetensors").begin_object();
    for (const auto& [key, value] : f.file_metadata->safetensors) w.key(key).value(value);
    w.end_object();
    w.end_object();
  }
  w.key("updater");
  if (f.updater)
    write_blob_stats(w, *f.updater, true);
  else
    w.null();
  w.key("graph");
  if (f.graph) {
    w.begin_object();
    w.key("variables").value(static_cast<std::uint64_t>(f.graph->variables.size()));
    w.key("kinds").begin_object(true);
    for (const auto& [k, n] : kind_counts(*f.graph)) w.key(k).value(static_cast<std::uint64_t>(n));
    w.end_object();
    w.key("ops").value(static_cast<std::uint64_t>(f.graph->ops.size()));
    w.key("op_types").begin_object(true);
    for (const auto& [k, n] : op_type_counts(*f.graph))
      w.key(k).value(static_cast<std::uint64_t>(n));
    w.end_object();
    w.key("outputs").begin_array(true);
    for (const auto& s : f.graph->outputs) w.value(s);
    w.end_array();
    w.key("loss_variables").begin_array(true);
    for (const auto& s : f.graph->loss_variables) w.value(s);
    w.end_array();
    w.end_object();
  } else {
    w.null();
  }
  w.key("training");
  if (f.training) {
    std::string doc = training_config_json(*f.training);
    doc.pop_back();  // the trailing newline
    // Re-indent the nested document by one level.
    std::string nested;
    for (char c : doc) {
      nested += c;
      if (c == '\n') nested += "  ";
    }
    w.raw(nested);
  } else {
    w.null();
  }
  w.end_object();
  return w.take();
}

std::string tag_summary_text(const Archive& archive, std::string_view tag) {
  const bool no_tags = archive.tags().empty() && tag.empty();
  std::optional<TagFacts> facts;
  if (!no_tags) facts = gather(archive, tag);
  const Metadata& m = archive.metadata();
  std::string s;
  auto line = [&](std::string_view label, const std::string& text) {
    std::string l(label);
    l.resize(std::max<std::size_t>(l.size(), 10), ' ');
    s += l + text + "\n";
  };
  line("archive", printable_name(archive.name()));
  if (no_tags)
    line("tag", "none (the archive has no tags)");
  else
    line("tag", printable_name(facts->tag) + " (" + std::to_string(facts->position) + " of " +
                    std::to_string(facts->tag_count) + (facts->newest ? ", newest)" : ")"));
  line("format",
       "version " + std::to_string(m.format_version) + ", written by " + printable_name(m.writer));
  if (m.model_name || m.model_version)
    line("model", printable_name(m.model_name.value_or("")) +
                      (m.model_name && m.model_version ? " " : "") +
                      printable_name(m.model_version.value_or("")));
  if (m.quantization) line("quant", printable_name(*m.quantization));
  if (m.description) line("about", printable_name(*m.description));
  if (no_tags) return s;
  const TagFacts& f = *facts;

  auto blob_line = [&](const BlobStats& b) {
    std::string t = std::to_string(b.count) + " (" + std::to_string(b.count - b.shared) + " own, " +
                    std::to_string(b.shared) + " shared";
    if (b.compressed) t += ", " + std::to_string(b.compressed) + " deflated";
    t += "), " + human_bytes(b.bytes);
    if (b.shared) t += " (" + human_bytes(b.own_bytes) + " in this tag)";
    if (!b.dtypes.empty()) t += "; " + counts_text(b.dtypes);
    if (!b.quantized.empty()) t += "; quantized: " + counts_text(b.quantized);
    return t;
  };
  line("params", blob_line(f.params));
  for (const auto& e : f.embeddings)
    line("embedding",
         printable_name(e.name) + ": " +
             (e.summary ? finalfusion::summary_text(*e.summary) : "unreadable: " + e.error));
  if (f.file_metadata && !f.file_metadata_error.empty()) {
    line("files", "metadata unreadable: " + f.file_metadata_error);
  } else if (f.file_metadata && !f.file_metadata->safetensors.empty()) {
    // One line per key, escaped: a value is any string of a safetensors file.
    line("files", "safetensors __metadata__ (" +
                      std::to_string(f.file_metadata->safetensors.size()) +
                      " keys; export "
                      "writes it back)");
    for (const auto& [key, value] : f.file_metadata->safetensors)
      line("", "  " + printable_name(key) + " = " + printable_name(value));
  }
  if (f.updater)
    line("updater",
         blob_line(*f.updater) + "; " + std::to_string(f.updater->variables.size()) +
             " variables, states " +
             (f.updater->states.empty() ? std::string("none") : joined(f.updater->states)));
  else
    line("updater", "none");
  if (f.graph) {
    line("graph",
         std::to_string(f.graph->variables.size()) + " variables (" +
             counts_text(kind_counts(*f.graph)) + "), " + std::to_string(f.graph->ops.size()) +
             " ops" +
             (f.graph->ops.empty() ? "" : " (" + counts_text(op_type_counts(*f.graph)) + ")"));
    if (!f.graph->outputs.empty()) line("", "outputs: " + joined(f.graph->outputs));
    if (!f.graph->loss_variables.empty()) line("", "loss: " + joined(f.graph->loss_variables));
  } else {
    line("graph", "none");
  }
  if (f.training) {
    std::string text = training_config_text(*f.training);
    bool first = true;
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      line(first ? "training" : "", text.substr(start, end - start));
      first = false;
      start = end + 1;
    }
  } else {
    line("training", "none");
  }
  return s;
}

}  // namespace modelzip::graph
