// What the tensor-file converter fuzz targets do with tensors they managed
// to read (`modelzip import`): touch every byte, write them back in a
// format that holds them and read that back.
//
// Invariant: what a reader accepts, the writer of its format writes, and
// the reader reads back to equal tensors (converted data is canonical:
// little-endian, row-major). An Error here is a finding.
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "modelzip/convert.hpp"

namespace modelzip::fuzz {

inline Bytes stream_bytes(const std::ostringstream& out) {
  return Bytes::copy_of(out.str());
}

// Every tensor written as .npy and read back.
inline void check_npy_round_trip(const std::vector<convert::NamedTensor>& tensors) {
  for (const convert::NamedTensor& named : tensors) {
    keep(touch(named.tensor));
    std::ostringstream out;
    convert::write_npy(out, named.tensor);
    const auto again = convert::read_npy(stream_bytes(out), named.name);
    FUZZ_CHECK(again.size() == 1 && again[0].tensor == named.tensor);
  }
}

inline std::map<std::string, Tensor> by_name(const std::vector<convert::NamedTensor>& tensors) {
  std::map<std::string, Tensor> map;
  for (const auto& named : tensors) map.emplace(named.name, named.tensor);
  return map;
}

// Quantized tensors as plain arrays (what `modelzip import` does after
// reading): when `file` joins (convert::arrays_to_quantized), every joined
// tensor is touched (and so dequantized), and splitting the result and
// joining it again gives the same tensors.
inline void check_quantized_join(const convert::TensorFile& file) {
  if (by_name(file.tensors).size() != file.tensors.size()) return;  // npz: duplicate members
  convert::TensorFile joined = file;
  if (!attempt([&] { convert::arrays_to_quantized(joined); })) return;
  for (const auto& named : joined.tensors) keep(touch(named.tensor));
  convert::TensorFile again;
  again.format = file.format;
  again.metadata = joined.metadata;
  FUZZ_CHECK(attempt([&] {
    again.tensors = convert::quantized_to_arrays(joined.tensors, file.format, again.metadata);
    convert::arrays_to_quantized(again);
  }));
  FUZZ_CHECK(again.metadata == joined.metadata);
  FUZZ_CHECK(by_name(again.tensors) == by_name(joined.tensors));
}

}  // namespace modelzip::fuzz
