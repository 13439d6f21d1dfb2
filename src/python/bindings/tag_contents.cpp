// The contents of a new tag from the arguments of Writer.add_tag (and
// modelzip.save_async): arrays, shared parameters, compression and raw-bits
// (dtypes=, bfloat16=) selections, updater state, training config.
#include "tag_contents.hpp"

#include <pybind11/stl.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "arrays.hpp"
#include "bindings.hpp"
#include "checkpoint/tag_metadata.hpp"
#include "modelzip/error.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "modelzip/graph/checkpoint.hpp"

namespace modelzip::python {
namespace {

constexpr std::string_view kTiesEntryName = "ties.json";  // modelzip/_ties.py

std::string name_of(const py::handle& key, const char* what) {
  if (!py::isinstance<py::str>(key))
    throw py::type_error(std::string(what) + " must be str, not " +
                         py::str(py::type::of(key).attr("__name__")).cast<std::string>());
  return key.cast<std::string>();
}

using StateKey = std::pair<std::string, std::string>;  // (variable, state) or (tag, param)

StateKey state_key(const py::handle& key, const char* what) {
  if (!py::isinstance<py::tuple>(key) || py::len(key) != 2)
    throw py::type_error(std::string(what) + " must be pairs of str");
  return {name_of(key[py::int_(0)], what), name_of(key[py::int_(1)], what)};
}

// The arrays an option (compress=, dtypes=) applies to: all, or
// parameter names (str) and updater states ((variable, state) tuples).
struct Selection {
  bool all = false;
  std::set<std::string> params;
  std::set<StateKey> states;

  bool has(const std::string& name) const { return all || params.count(name); }
  bool has(const StateKey& key) const { return all || states.count(key); }
  // Throws ValueError naming an entry that is not among `present`.
  void check_within(const Selection& present, const char* option) const {
    for (const auto& n : params)
      if (!present.params.count(n))
        throw py::value_error(std::string(option) + " names '" + n +
                              "', which is not among the arrays of this tag");
    for (const auto& k : states)
      if (!present.states.count(k))
        throw py::value_error(std::string(option) + " names updater state ('" + k.first + "', '" +
                              k.second + "'), which is not in updater");
  }
};

Selection selection_of(const py::object& option, const char* what) {
  Selection out;
  if (py::isinstance<py::bool_>(option)) {
    out.all = option.cast<bool>();
    return out;
  }
  if (py::isinstance<py::str>(option))
    throw py::type_error(std::string(what) + " must be a collection of names, not a str");
  for (py::handle n : option) {
    if (py::isinstance<py::tuple>(n))
      out.states.insert(state_key(n, what));
    else
      out.params.insert(name_of(n, what));
  }
  return out;
}

}  // namespace

NewTag tag_contents_from_python(const py::handle& arrays, const py::object& share,
                                const py::object& compress, const py::object& bfloat16,
                                const py::object& dtypes, const py::object& updater,
                                const py::object& training, const py::object& fetches,
                                const py::object& tag_metadata) {
  const Selection compressed = selection_of(compress, "compress");
  // {name or (variable, state): dtype name} of the arrays given as raw bits (_values.py).
  const py::dict raw_bits(helper("_values", "raw_bits_marks")(bfloat16, dtypes));
  const char* marks_option = dtypes.is_none() ? "bfloat16" : "dtypes";
  const Selection marked = selection_of(py::list(raw_bits), marks_option);
  auto raw_bits_of = [&](const py::object& key) -> py::object {
    return raw_bits.empty() ? py::none() : raw_bits.attr("get")(key);
  };
  auto options = [&](bool deflate) {
    return ParamOptions{deflate ? Compression::deflate : Compression::store};
  };
  py::object to_savable = helper("_values", "to_savable");
  NewTag contents;
  Selection present;
  if (!py::hasattr(arrays, "items"))
    throw py::type_error(helper("_values", "not_a_mapping")(arrays).cast<std::string>());
  // items(), with a torch state dict's dtypes and tuples expanded and the Python values that
  // are not arrays recorded, except those marked as raw bits (_values.py).
  const py::list items(helper("_values", "expand_torch_objects")(arrays, raw_bits));
  // CUDA tensors fetched into host memory together (pinned staging, overlapped copies); the
  // ties below are found among the tensors as given.
  const py::object fetch_into = helper("_values", "fetch_device_tensors");
  auto fetch = [&](const py::handle& pairs) { return fetch_into(pairs, fetches); };
  for (py::handle item : py::list(fetch(items))) {
    py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
    std::string name = name_of(pair[0], "parameter names");
    present.params.insert(name);
    py::tuple savable = to_savable(name, pair[1], raw_bits_of(py::str(name)));
    if (py::cast<std::string>(savable[0]) == "embedding") {
      const auto& e = savable[1].cast<const finalfusion::Embeddings&>();
      Bytes file;
      {
        ReleasedGil release;
        file = e.to_bytes();
      }
      contents.add_embedding(name, std::move(file));
    } else {
      contents.add(name, tensor_from_savable(savable, name), options(compressed.has(name)));
    }
  }
  if (!updater.is_none()) {
    for (py::handle item : py::list(fetch(updater.attr("items")()))) {
      py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
      const StateKey key = state_key(pair[0], "updater keys");
      present.states.insert(key);
      py::tuple savable = to_savable(key.first + "/" + key.second, pair[1],
                                     raw_bits_of(py::make_tuple(key.first, key.second)));
      if (py::cast<std::string>(savable[0]) == "embedding")
        throw py::type_error("updater state " + key.first + "/" + key.second + " must be an array");
      contents.add_updater_state(key.first, key.second,
                                 tensor_from_savable(savable, key.first + "/" + key.second),
                                 options(compressed.has(key)));
    }
  }
  if (!share.is_none()) {
    for (py::handle item : share.attr("items")()) {
      py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
      std::string name = name_of(pair[0], "shared parameter names");
      const StateKey from = state_key(pair[1], "share values (tag, parameter)");
      contents.share(name, from.first, from.second);
    }
  }
  // Torch tensors that are one tensor (tied weights): FORMAT.md 5.1.
  if (const py::object ties = helper("_ties", "torch_ties")(items); !ties.is_none())
    contents.set_entry(std::string(kTiesEntryName), Bytes::copy_of(ties.cast<std::string>()));
  if (!training.is_none())
    contents.set_entry(std::string(kTrainingConfigEntryName),
                       training::encode_training_config(training_config_from_python(training)));
  // <tag>/metadata.toml (FORMAT.md 3.1): the free-form pairs given, and a torch state dict's
  // module versions (its _metadata).
  checkpoint::stage_tag_metadata(
      contents,
      tag_metadata_from_python(tag_metadata, helper("_values", "state_dict_metadata")(arrays)));
  compressed.check_within(present, "compress");
  marked.check_within(present, marks_option);
  return contents;
}

format::TagMetadata tag_metadata_from_python(const py::object& tag_metadata,
                                             const py::object& versions) {
  format::TagMetadata metadata;
  if (!tag_metadata.is_none())
    metadata.safetensors = helper("_values", "checked_tag_metadata")(tag_metadata)
                               .cast<std::map<std::string, std::string>>();
  if (!versions.is_none())
    metadata.torch.emplace("state_dict_metadata", versions.cast<std::string>());
  return metadata;
}

NewTag tag_contents_from_python(const py::handle& arrays, const py::object& share,
                                const py::object& compress, const py::object& bfloat16,
                                const py::object& dtypes, const py::object& updater,
                                const py::object& training, const py::object& fetches) {
  return tag_contents_from_python(arrays, share, compress, bfloat16, dtypes, updater, training,
                                  fetches, py::none());
}

}  // namespace modelzip::python
