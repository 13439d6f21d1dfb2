// The registry of validators for the kinds of tag entry whose content other
// layers own: a tag's metadata.toml (format, registered here), and the
// finalfusion embedding files and graph and training-config FlatBuffers that
// the layers above checkpoint own. Archive::verify, Writer::commit and the
// collective writer check an entry with the validator of its kind;
// Archive::params reads an embedding's shape with the shape reader of its
// kind (the layer that owns the format owns its framing). The
// registry also holds the tag validator: the rules across several entries of
// one tag (graph checkpoints, schemas/GRAPH.md section 4), which
// Archive::verify applies to every tag whose tables are intact, and the
// staged-tag validator: the same rules for a tag with graph.fb that a commit
// is about to write (Writer::commit refuses the tag when they are broken).
//
// checkpoint does not include those layers: the top layer fills the registry
// through register_upper_entry_validators (defined in
// src/graph/entry_validation.cpp), which the registry calls once, on its
// first use. Thread-safe: the registry is fixed once built.
//
// Each validator throws modelzip::Error for invalid content.
#pragma once

#include <any>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "modelzip/archive.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip {

// Returns what it decoded when the staged-tag validator reads that too
// (graph.fb: a graph::Graph, trainingConfig.fb: a training::TrainingConfig),
// so that a commit decodes those entries once; else an empty std::any.
using EntryValidator = std::any (*)(const Bytes& contents, const Limits& limits);

// The kinds of tag entry that have a validator.
enum class EntryKind : std::size_t {
  tag_metadata,     // <tag>/metadata.toml
  graph,            // <tag>/graph.fb
  training_config,  // <tag>/trainingConfig.fb
  embedding,        // <tag>/params/<n>.fifu, <tag>/updater/<n>.fifu
};
inline constexpr std::size_t kEntryKinds = 4;

// Receives one problem of an entry's contents.
using EntryProblemSink = std::function<void(const Error& problem)>;
// Checks what the EntryValidator of its kind checks, for Archive::verify:
// passes each problem that leaves the rest checkable to `report` (which may
// throw) and goes on; throws a problem that does not (the entry cannot be
// decoded). Registered for the kinds whose entries can hold several
// independent problems (graph.fb, trainingConfig.fb). Returns what the
// EntryValidator of its kind would have returned when it found no problem
// (so that verify decodes the entry once: TagEntries), else an empty
// std::any.
using EntryChecker = std::any (*)(const Bytes& contents, const Limits& limits,
                                  const EntryProblemSink& report);

// Reads `length` bytes of an entry from byte `offset`; the range lies within
// the entry.
using EntryRangeRead = std::function<Bytes(std::uint64_t offset, std::uint64_t length)>;
// The shape that an entry of its kind gives its parameter in ParamInfo (an
// embedding's: {rows, dims} of its storage), read from the entry of `size`
// bytes through `read`, no further than the shape needs; empty when the
// content has none. Throws Error(corrupt) or Error(unsupported) when the
// content is not of its kind, and what `read` throws. Registered for the
// kinds whose parameters are not tensor blobs (embedding).
using EntryShapeReader = Shape (*)(std::uint64_t size, const EntryRangeRead& read);

// Receives one problem: the entry it concerns and what is wrong.
using ProblemSink = std::function<void(const std::string& entry, const std::string& message)>;
// What the entry checkers returned for a tag's graph.fb and
// trainingConfig.fb; empty: the tag validator reads and decodes the entry
// itself.
struct DecodedTagEntries {
  std::any graph, training_config;
};
// Checks the rules across the entries of `tag` (whose tables are intact),
// passing each broken rule to `report`. Throws modelzip::Error, naming the
// entry, when an entry the rules need cannot be read or decoded; the rules
// of that tag are then not checked.
using TagValidator = void (*)(const Archive& archive, const std::string& tag,
                              const DecodedTagEntries& decoded, const ProblemSink& report);

// A parameter (`state` empty) or updater state of a tag, as the rules across
// a tag's entries see it. The views point into the value's owner.
struct StoredValue {
  std::string_view name;
  std::string_view state;
  DType dtype = DType::float32;
  const Shape* shape = nullptr;
  bool tensor = true;  // false: an embedding (.fifu) blob
};
// A tag with graph.fb as a commit is about to write it: its FlatBuffer
// entries and the type of every parameter and updater state (shared ones:
// of the blob they share). `params` and `states` have distinct keys.
struct StagedTag {
  std::string_view tag;
  const Bytes* graph = nullptr;
  const Bytes* training_config = nullptr;  // null: none
  // What the entry validators of graph and training_config returned, or
  // empty: then the staged-tag validator decodes the entry itself.
  std::any decoded_graph, decoded_training_config;
  std::span<const StoredValue> params, states;
};
// Checks the rules across the entries of `tag`; throws Error(invalid_argument)
// naming the tag and the entry of the first broken rule, or what decoding
// graph.fb or trainingConfig.fb throws.
using StagedTagValidator = void (*)(const StagedTag& tag, const Limits& limits);

// The kind of the tag entry `entry_name` ("<tag>/graph.fb", ...), or nullopt.
std::optional<EntryKind> entry_kind_of(std::string_view entry_name);

class EntryValidators {
 public:
  void add(EntryKind kind, EntryValidator validator) noexcept {
    by_kind_[static_cast<std::size_t>(kind)] = validator;
  }
  // The validator of `kind`, or nullptr when none is registered.
  EntryValidator of(EntryKind kind) const noexcept {
    return by_kind_[static_cast<std::size_t>(kind)];
  }
  void add_checker(EntryKind kind, EntryChecker checker) noexcept {
    checkers_[static_cast<std::size_t>(kind)] = checker;
  }
  // The checker of `kind`, or nullptr when none is registered.
  EntryChecker checker_of(EntryKind kind) const noexcept {
    return checkers_[static_cast<std::size_t>(kind)];
  }
  void add_shape_reader(EntryKind kind, EntryShapeReader reader) noexcept {
    shape_readers_[static_cast<std::size_t>(kind)] = reader;
  }
  // The shape reader of `kind`, or nullptr when none is registered.
  EntryShapeReader shape_reader_of(EntryKind kind) const noexcept {
    return shape_readers_[static_cast<std::size_t>(kind)];
  }
  void set_tag_validator(TagValidator validator) noexcept { tag_validator_ = validator; }
  // The tag validator, or nullptr when none is registered.
  TagValidator tag_validator() const noexcept { return tag_validator_; }
  void set_staged_tag_validator(StagedTagValidator validator) noexcept {
    staged_tag_validator_ = validator;
  }
  // The staged-tag validator, or nullptr when none is registered.
  StagedTagValidator staged_tag_validator() const noexcept { return staged_tag_validator_; }

 private:
  std::array<EntryValidator, kEntryKinds> by_kind_{};
  std::array<EntryChecker, kEntryKinds> checkers_{};
  std::array<EntryShapeReader, kEntryKinds> shape_readers_{};
  TagValidator tag_validator_ = nullptr;
  StagedTagValidator staged_tag_validator_ = nullptr;
};

// Adds the validators the layers above checkpoint own. Defined by the top
// layer; called once, by entry_validators().
void register_upper_entry_validators(EntryValidators& registry);

// The registry, built on first use.
const EntryValidators& entry_validators();

// The validator for `kind`, or nullptr.
EntryValidator find_entry_validator(EntryKind kind);
// The validator for the entry `entry_name`, or nullptr when its kind has none.
EntryValidator find_entry_validator(std::string_view entry_name);
// The checker for the entry `entry_name`, or nullptr when its kind has none.
EntryChecker find_entry_checker(std::string_view entry_name);

}  // namespace modelzip
