// Checkpoint: everything a training job needs to resume from a tag -- the
// graph, the training configuration, the parameters and the updater
// (optimizer) state -- saved and loaded as one unit.
//
// Layout of a checkpoint tag <tag>/ in the archive:
//   graph.fb            the graph (schemas/graph.fbs), always present
//   trainingConfig.fb   the training config (schemas/training.fbs), optional
//   params.txt, params/ one parameter per VARIABLE and CONSTANT variable,
//                       named like the variable
//   updater.txt, updater/  per trainable variable, the updater's state arrays
//                       (e.g. Adam's "M" and "V"), optional
//
// Consistency rules (check_checkpoint; load_checkpoint applies them to what
// it reads and reports a broken rule as Error(corrupt) naming the tag;
// Archive::verify reports every broken rule of every tag with graph.fb):
//  - the graph and the config are valid (graph.hpp, training.hpp);
//  - every variable that has a value has a parameter of the same data type
//    and shape, and every parameter is such a variable;
//  - config mappings name PLACEHOLDER variables, config loss variables name
//    variables;
//  - updater state requires a training config, exists only for trainable
//    variables, has exactly the state names of the config's updater (all of
//    them, for every trainable variable, once any state is present), a
//    floating-point data type and the variable's shape.
//
// Thread safety: functions share no state; a Writer or Archive passed in is
// used as their own contracts say.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/archive.hpp"
#include "modelzip/export.hpp"
#include "modelzip/graph/graph.hpp"
#include "modelzip/graph/training.hpp"
#include "modelzip/tensor.hpp"
#include "modelzip/writer.hpp"

namespace modelzip {

// Entry names relative to the tag folder.
inline constexpr std::string_view kGraphEntryName = "graph.fb";
inline constexpr std::string_view kTrainingConfigEntryName = "trainingConfig.fb";

// variable -> state name -> array.
using UpdaterState = std::map<std::string, std::map<std::string, Tensor>>;

struct MODELZIP_API Checkpoint {
  graph::Graph graph{};
  std::optional<training::TrainingConfig> training{};  // none: inference only
  std::map<std::string, Tensor> params{};              // variable name -> value
  UpdaterState updater_state{};
};

// Throws Error(invalid_argument) naming the first consistency rule broken.
MODELZIP_API void check_checkpoint(const Checkpoint& checkpoint, const Limits& limits = {});

struct MODELZIP_API CheckpointSaveOptions {
  // Compression of new parameter and updater-state blobs.
  ParamOptions param_options{};
  // Compression of graph.fb and trainingConfig.fb.
  Compression metadata_compression = Compression::store;
  // Parameters written as references to the parameter of the same name in
  // the existing tag `share_from_tag` instead of as data: the caller states
  // that they did not change (their tensors must still be in
  // Checkpoint::params, for the consistency checks). The Writer's dedup
  // (WriterOptions::dedup, on by default) finds unchanged blobs by content
  // as well; explicit sharing skips hashing and comparing them.
  std::string share_from_tag{};
  std::vector<std::string> unchanged_params{};
};

// The tag contents of `checkpoint` (checked first): the one way to write a
// checkpoint. A NewTag composes with everything that stages a tag, e.g.
//   writer.add_tag("step-10", checkpoint_tag(c));  // or replace_tag
//   writer.commit();
// and BackgroundSave::start, so there is no separate save function. The
// tensors are not copied: their Bytes must stay valid until the commit that
// writes the tag returns.
MODELZIP_API NewTag checkpoint_tag(const Checkpoint& checkpoint,
                                   const CheckpointSaveOptions& options = {});

// The graph of `tag` (empty: newest). Error(not_found) if the tag has no
// graph.fb.
MODELZIP_API graph::Graph load_graph(const Archive& archive, std::string_view tag = {});
// The training config of `tag` (empty: newest); nullopt if it has none.
MODELZIP_API std::optional<training::TrainingConfig> load_training_config(
    const Archive& archive, std::string_view tag = {});

// The whole checkpoint of `tag` (empty: newest), checked for consistency.
// Parameters and updater state are zero-copy views when `mode` allows (they
// keep the mapping alive). Errors name the archive, tag and entry.
MODELZIP_API Checkpoint load_checkpoint(const Archive& archive, std::string_view tag = {},
                                        ReadMode mode = ReadMode::zero_copy);

// A braced list of strings where the tag goes (`load_checkpoint(archive,
// {"a", "b"})`, which would make the tag string_view("a", "b"): undefined
// behaviour) does not compile (error.hpp, detail::braced_list_is_a_tag).
template <std::size_t N>
requires(N >= 2) graph::Graph load_graph(const Archive&, const char* const (&)[N]) {
  static_assert(detail::braced_list_is_a_tag<N>,
                "load_graph(archive, {\"a\", \"b\"}): a tag is one string, as in "
                "load_graph(archive, \"step-1\")");
  return {};
}
template <std::size_t N>
requires(N >=
         2) std::optional<training::TrainingConfig> load_training_config(const Archive&,
                                                                         const char* const (&)[N]) {
  static_assert(detail::braced_list_is_a_tag<N>,
                "load_training_config(archive, {\"a\", \"b\"}): a tag is one string, as in "
                "load_training_config(archive, \"step-1\")");
  return {};
}
template <std::size_t N>
requires(N >= 2) Checkpoint
    load_checkpoint(const Archive&, const char* const (&)[N], ReadMode = ReadMode::zero_copy) {
  static_assert(detail::braced_list_is_a_tag<N>,
                "load_checkpoint(archive, {\"a\", \"b\"}): a tag is one string, as in "
                "load_checkpoint(archive, \"step-1\")");
  return {};
}

}  // namespace modelzip
