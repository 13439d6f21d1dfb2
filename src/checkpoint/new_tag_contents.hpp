// What a NewTag holds: the parameters, updater states and tag-level entries
// added to it, each list in the order added. Read by the writers (local,
// background and collective commits); filled only through NewTag's methods.
#pragma once

#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/tensor.hpp"
#include "modelzip/writer.hpp"

namespace modelzip {

struct NewTag::Contents {
  struct Param {
    std::string name;
    enum class Source { tensor, embedding, shared } source = Source::tensor;
    Tensor tensor;
    Bytes file;  // embedding
    std::string from_tag, from_param;
    ParamOptions options;
  };
  struct UpdaterState {
    std::string variable, state;
    bool shared = false;
    Tensor tensor;
    std::string from_tag;
    ParamOptions options;
  };
  struct Entry {
    std::string relative_name;
    Bytes contents;
    Compression compression;
  };

  std::vector<Param> params;
  std::vector<UpdaterState> updater_states;
  std::vector<Entry> entries;
  // The names in `params` and the (variable, state) keys in
  // `updater_states`: NewTag refuses a duplicate without a scan of the
  // lists (a tag of n parameters is built in O(n log n), not O(n^2)).
  std::unordered_set<std::string> param_names;
  std::set<std::pair<std::string, std::string>> state_keys;

  // The contents of `tag` (empty lists when nothing was added to it). The
  // reference is valid while `tag` lives unchanged.
  static const Contents& of(const NewTag& tag) noexcept;
};

}  // namespace modelzip
