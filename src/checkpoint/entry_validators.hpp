// The registry of validators for the kinds of tag entry whose content other
// layers own: a tag's metadata.toml (format, registered here), and the
// finalfusion embedding files and graph and training-config FlatBuffers that
// the layers above checkpoint own. Archive::verify, Writer::commit and the
// collective writer check an entry with the validator of its kind.
//
// checkpoint does not include those layers: the top layer fills the registry
// through register_upper_entry_validators (defined in
// src/graph/entry_validation.cpp), which the registry calls once, on its
// first use. Thread-safe: the registry is fixed once built.
//
// Each validator throws modelzip::Error for invalid content.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "modelzip/bytes.hpp"
#include "modelzip/limits.hpp"

namespace modelzip {

using EntryValidator = void (*)(const Bytes& contents, const Limits& limits);

// The kinds of tag entry that have a validator.
enum class EntryKind : std::size_t {
  tag_metadata,     // <tag>/metadata.toml
  graph,            // <tag>/graph.fb
  training_config,  // <tag>/trainingConfig.fb
  embedding,        // <tag>/params/<n>.fifu, <tag>/updater/<n>.fifu
};
inline constexpr std::size_t kEntryKinds = 4;

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

 private:
  std::array<EntryValidator, kEntryKinds> by_kind_{};
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

}  // namespace modelzip
