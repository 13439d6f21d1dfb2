// Whole checkpoints: graph.fb + trainingConfig.fb + params + updater state.
#include "modelzip/graph/checkpoint.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "checkpoint/archive_state.hpp"
#include "core/shape_text.hpp"
#include "core/suggestions.hpp"
#include "graph/flatbuffer_input.hpp"
#include "graph/rules.hpp"
#include "modelzip/error.hpp"

namespace modelzip {
namespace {

using graph::detail::fail;
using graph::detail::quote_name;
using modelzip::detail::shape_text;

std::string names_text(std::span<const std::string_view> names) {
  if (names.empty()) return "none";
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

void check_consistency(const Checkpoint& c, const Limits& limits, ErrorCode code) {
  graph::detail::check_graph(c.graph, limits, code);
  if (c.training) {
    graph::detail::check_training_config(*c.training, code);
    graph::detail::check_config_against_graph(*c.training, c.graph, code);
  }

  std::unordered_map<std::string_view, const graph::Variable*> vars;
  for (const auto& v : c.graph.variables) vars.emplace(v.name, &v);

  for (const auto& v : c.graph.variables) {
    if (!v.has_value()) continue;
    const std::string what = std::string(graph::variable_kind_name(v.kind)) + " " +
                             quote_name(v.name) + " (" + std::string(dtype_name(v.dtype)) + " " +
                             shape_text(*v.shape) + ")";
    auto it = c.params.find(v.name);
    if (it == c.params.end()) fail(code, what + " has no parameter");
    const Tensor& t = it->second;
    if (t.dtype() != v.dtype)
      fail(code, "parameter " + quote_name(v.name) + " is " + std::string(dtype_name(t.dtype())) +
                     ", but " + what + " is not");
    if (t.shape() != *v.shape)
      fail(code, "parameter " + quote_name(v.name) + " has shape " + shape_text(t.shape()) +
                     ", but " + what + " does not");
  }
  for (const auto& [name, tensor] : c.params) {
    auto it = vars.find(name);
    if (it == vars.end())
      fail(code, "parameter " + quote_name(name) + " is not a variable of the graph");
    if (!it->second->has_value())
      fail(code, "parameter " + quote_name(name) + " names a " +
                     std::string(graph::variable_kind_name(it->second->kind)) +
                     ", which has no stored value");
  }

  if (c.updater_state.empty()) return;
  if (!c.training)
    fail(code, "the checkpoint has updater state but no training config (which names the updater)");
  const auto& updater = c.training->updater;
  const auto state_names = training::updater_state_names(updater);
  const std::string updater_text = "updater " + std::string(training::updater_name(updater)) +
                                   " (state: " + names_text(state_names) + ")";
  for (const auto& [var_name, states] : c.updater_state) {
    auto it = vars.find(var_name);
    if (it == vars.end())
      fail(code,
           "updater state for " + quote_name(var_name) + ", which is not a variable of the graph");
    const graph::Variable& v = *it->second;
    if (!v.is_trainable())
      fail(code, "updater state for " + quote_name(var_name) + ", a " +
                     std::string(graph::variable_kind_name(v.kind)) + " of type " +
                     std::string(dtype_name(v.dtype)) +
                     " (only trainable variables: floating-point or complex VARIABLEs have "
                     "updater state)");
    for (const auto& [state, tensor] : states) {
      const std::string what = "updater state " + quote_name(state) + " of " + quote_name(var_name);
      if (std::find(state_names.begin(), state_names.end(), state) == state_names.end())
        fail(code, what + " is not a state of " + updater_text);
      if (!dtype_is_floating(tensor.dtype()) && !dtype_is_complex(tensor.dtype()))
        fail(code, what + " is " + std::string(dtype_name(tensor.dtype())) +
                       ", not a floating-point or complex type");
      if (tensor.shape() != *v.shape)
        fail(code, what + " has shape " + shape_text(tensor.shape()) + ", the variable " +
                       shape_text(*v.shape));
    }
  }
  for (const auto& v : c.graph.variables) {
    if (!v.is_trainable()) continue;
    auto it = c.updater_state.find(v.name);
    for (std::string_view state : state_names)
      if (it == c.updater_state.end() || !it->second.count(std::string(state)))
        fail(code, "trainable variable " + quote_name(v.name) + " has no updater state " +
                       quote_name(state) + " (" + updater_text + " keeps every state for every " +
                       "trainable variable once any is saved)");
  }
}

std::string resolve_tag(const Archive& archive, std::string_view tag) {
  if (tag.empty()) return archive.newest_tag();
  auto found = archive.find_tag(tag);
  if (!found)
    throw Error(ErrorCode::not_found,
                "no such tag" + modelzip::detail::did_you_mean(tag, archive.tags()),
                ErrorContext{.archive = archive.name(), .tag = std::string(tag)});
  return *found;
}

template <class F>
auto with_entry_context(const Archive& archive, const std::string& entry, const std::string& tag,
                        F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = archive.name(), .entry = entry, .tag = tag});
  }
}

}  // namespace

void check_checkpoint(const Checkpoint& checkpoint, const Limits& limits) {
  check_consistency(checkpoint, limits, ErrorCode::invalid_argument);
}

NewTag checkpoint_tag(const Checkpoint& c, const CheckpointSaveOptions& options) {
  check_consistency(c, Limits{}, ErrorCode::invalid_argument);
  std::unordered_set<std::string_view> unchanged(options.unchanged_params.begin(),
                                                 options.unchanged_params.end());
  if (!unchanged.empty() && options.share_from_tag.empty())
    throw Error(ErrorCode::invalid_argument,
                "unchanged parameters are listed but share_from_tag is empty");
  for (std::string_view name : unchanged)
    if (!c.params.count(std::string(name)))
      throw Error(ErrorCode::invalid_argument, "unchanged parameter " + quote_name(name) +
                                                   " is not a parameter of the checkpoint");

  NewTag tag;
  tag.set_entry(std::string(kGraphEntryName), graph::encode_graph(c.graph),
                options.metadata_compression);
  if (c.training)
    tag.set_entry(std::string(kTrainingConfigEntryName),
                  training::encode_training_config(*c.training), options.metadata_compression);
  // Graph order: params.txt lists parameters as the graph lists variables.
  for (const auto& v : c.graph.variables) {
    if (!v.has_value()) continue;
    if (unchanged.count(v.name))
      tag.share(v.name, options.share_from_tag, v.name);
    else
      tag.add(v.name, c.params.at(v.name), options.param_options);
  }
  if (c.training) {
    const auto names = training::updater_state_names(c.training->updater);
    for (const auto& v : c.graph.variables) {
      auto it = c.updater_state.find(v.name);
      if (it == c.updater_state.end()) continue;
      for (std::string_view state : names)
        tag.add_updater_state(v.name, std::string(state), it->second.at(std::string(state)),
                              options.param_options);
    }
  }
  return tag;
}

graph::Graph load_graph(const Archive& archive, std::string_view tag) {
  const std::string t = resolve_tag(archive, tag);
  const std::string entry = t + "/" + std::string(kGraphEntryName);
  if (!archive.has_entry(entry))
    throw Error(ErrorCode::not_found, "tag '" + t + "' has no graph.fb (not a graph checkpoint)",
                ErrorContext{.archive = archive.name(), .entry = entry, .tag = t});
  return with_entry_context(archive, entry, t, [&] {
    return graph::decode_graph(archive.entry(entry), checkpoint::ArchiveState(archive).limits());
  });
}

std::optional<training::TrainingConfig> load_training_config(const Archive& archive,
                                                             std::string_view tag) {
  const std::string t = resolve_tag(archive, tag);
  const std::string entry = t + "/" + std::string(kTrainingConfigEntryName);
  if (!archive.has_entry(entry)) return std::nullopt;
  return with_entry_context(archive, entry, t, [&] {
    return training::decode_training_config(archive.entry(entry),
                                            checkpoint::ArchiveState(archive).limits());
  });
}

Checkpoint load_checkpoint(const Archive& archive, std::string_view tag, ReadMode mode) {
  const std::string t = resolve_tag(archive, tag);
  Checkpoint c;
  c.graph = load_graph(archive, t);
  c.training = load_training_config(archive, t);
  const std::string params_entry = t + "/params.txt";
  for (const ParamInfo& p : archive.params(t)) {
    if (p.kind != BlobKind::tensor)
      throw Error(ErrorCode::corrupt,
                  "parameter " + quote_name(p.name) +
                      " is an embedding; the parameters of a graph checkpoint are tensors",
                  ErrorContext{.archive = archive.name(), .entry = params_entry, .tag = t});
    c.params.emplace(p.name, archive.tensor(p.name, t, mode));
  }
  for (const ParamInfo& s : archive.updater_states(t))
    c.updater_state[s.name][s.state] = archive.updater_state(s.name, s.state, t, mode);
  try {
    check_consistency(c, checkpoint::ArchiveState(archive).limits(), ErrorCode::corrupt);
  } catch (const Error& e) {
    throw e.with_context(ErrorContext{.archive = archive.name(), .tag = t});
  }
  return c;
}

}  // namespace modelzip
