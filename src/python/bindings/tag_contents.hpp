// tag_contents_from_python (bindings.hpp) with the tag's free-form metadata.
#pragma once

#include "bindings.hpp"
#include "format/tag_metadata.hpp"

namespace modelzip::python {

// As tag_contents_from_python of bindings.hpp; `tag_metadata`: None, or a
// mapping str -> str, the tag's free-form metadata. It and a torch state
// dict's module versions (its _metadata) are staged as <tag>/metadata.toml
// (FORMAT.md section 3.1). Needs the GIL.
NewTag tag_contents_from_python(const py::handle& arrays, const py::object& share,
                                const py::object& compress, const py::object& bfloat16,
                                const py::object& dtypes, const py::object& updater,
                                const py::object& training, const py::object& fetches,
                                const py::object& tag_metadata);

// <tag>/metadata.toml's contents (FORMAT.md section 3.1) from the Python
// values: `tag_metadata` (None, or a mapping str -> str, checked by
// modelzip._values.checked_tag_metadata) and `versions` (None, or a torch
// state dict's module versions as JSON text, as
// modelzip._values.state_dict_metadata gives them). Needs the GIL.
format::TagMetadata tag_metadata_from_python(const py::object& tag_metadata,
                                             const py::object& versions);

}  // namespace modelzip::python
