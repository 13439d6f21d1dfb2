// modelzip._modelzip._StagingArea: staging memory (detail::StagingLease)
// that Python fills itself, as a writable numpy array. The fetch of CUDA
// tensors (_device_save.py) lands their bytes in such areas:
// - a background save adopts them (BackgroundSaveOptions::adopt) instead of
//   copying those bytes again (adopted_areas);
// - a blocking save writes while they are still being filled: each area has
//   a detail::FillGate the fetch marks filled range by range, and the
//   commit waits on it (fill_gates, under a FillGate::Scope).
//
// Ownership: the save's Bytes views keep the lease alive, never a Python
// object, so background threads need no GIL. The arrays (and torch tensors
// viewing them) keep the Python object alive.
#pragma once

#include <memory>
#include <vector>

#include "bindings.hpp"
#include "checkpoint/fill_gate.hpp"

namespace modelzip::python {

void bind_staging_areas(py::module_& m);

// The bytes of each _StagingArea of `areas` (an iterable), for
// BackgroundSaveOptions::adopt (each keeps its area's staging memory alive;
// `keep_staging`: the memory then goes back to the pool). Needs the GIL.
std::vector<Bytes> adopted_areas(const py::handle& areas, bool keep_staging);

// The FillGate of each _StagingArea of `areas`. Needs the GIL.
std::vector<std::shared_ptr<const detail::FillGate>> fill_gates(const py::handle& areas);

}  // namespace modelzip::python
