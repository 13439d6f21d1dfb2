// Shared checks for the FlatBuffer entries of src/graph (graph.fb,
// trainingConfig.fb): size limits, identifier, the verifier, alignment, and
// conversion of verified strings. Internal to modelzip.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fail.hpp"
#include "core/flatbuffer_alignment.hpp"
#include "core/printable.hpp"
#include "core/utf8.hpp"
#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::graph::detail {

using modelzip::detail::fail;

// Checks `bytes` (an untrusted entry) and returns a buffer that accessors
// may read: `bytes` itself when 8-byte aligned, else an owned aligned copy.
// `what` names the entry kind in messages ("graph.fb"); `verify` is the
// generated Verify<Root>Buffer function.
// `before_verify` (optional) sees the aligned buffer before the verifier
// does; it may throw (e.g. a work bound the verifier itself lacks).
// (FlatBuffers 2.0.8's Verifier has no size option: the size limit is checked
// here.) Errors: limit_exceeded (size over Limits::max_flatbuffer_bytes), corrupt
// (too short, wrong identifier, verification failure).
template <class VerifyFn>
Bytes verified_buffer(const Bytes& bytes, const Limits& limits, std::string_view what,
                      const char* identifier, VerifyFn verify,
                      const std::function<void(const Bytes&)>& before_verify = {}) {
  if (bytes.size() > limits.max_flatbuffer_bytes)
    throw Error(ErrorCode::limit_exceeded, std::string(what) + ": " + std::to_string(bytes.size()) +
                                               " bytes exceed the FlatBuffer limit of " +
                                               std::to_string(limits.max_flatbuffer_bytes));
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE)
    fail(ErrorCode::corrupt, std::string(what) + ": larger than a FlatBuffer can be");
  if (bytes.size() < 8)
    fail(ErrorCode::corrupt, std::string(what) + ": " + std::to_string(bytes.size()) +
                                 " bytes are too short for a FlatBuffer");
  if (!flatbuffers::BufferHasIdentifier(bytes.data(), identifier))
    fail(ErrorCode::corrupt,
         std::string(what) + ": file identifier is not \"" + identifier + "\" (bytes 4-7)");
  Bytes buf = reinterpret_cast<std::uintptr_t>(bytes.data()) % 8 == 0 ? bytes : bytes.to_owned();
  if (before_verify) before_verify(buf);
  flatbuffers::Verifier::Options options;
  options.max_depth = limits.max_flatbuffer_depth;
  options.max_tables = limits.max_flatbuffer_tables;
  options.check_alignment = true;
  flatbuffers::Verifier verifier(reinterpret_cast<const std::uint8_t*>(buf.data()), buf.size(),
                                 options);
  if (!verify(verifier))
    fail(ErrorCode::corrupt, std::string(what) +
                                 ": FlatBuffer fails verification (bad offsets, sizes, "
                                 "missing required fields or nesting/table limits exceeded)");
  return buf;
}

// Throws Error(corrupt) naming `what` when the elements of `v` are not
// aligned (see core/flatbuffer_alignment.hpp); `v` may be null (absent).
template <class V>
void require_aligned_elements(const V* v, std::size_t alignment, const std::string& what) {
  if (!modelzip::detail::flatbuffer_elements_aligned(v, alignment))
    fail(ErrorCode::corrupt,
         what + ": vector elements are not " + std::to_string(alignment) + "-byte aligned");
}

// A verified string as std::string; `what` names it in the error when it is
// not valid UTF-8.
inline std::string utf8_string(const flatbuffers::String* s, const std::string& what) {
  if (s == nullptr) return {};
  std::string out(s->string_view());
  if (auto bad = modelzip::detail::utf8_invalid_at(out))
    fail(ErrorCode::corrupt, what + " is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
  return out;
}

inline std::vector<std::string> utf8_strings(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v,
    const std::string& what) {
  std::vector<std::string> out;
  if (v == nullptr) return out;
  out.reserve(v->size());
  for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i)
    out.push_back(utf8_string(v->Get(i), what + " " + std::to_string(i)));
  return out;
}

// Builder side: a vector of strings, or a null offset (absent) when empty.
inline flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>>
string_vector(flatbuffers::FlatBufferBuilder& fbb, const std::vector<std::string>& v) {
  if (v.empty()) return 0;
  return fbb.CreateVectorOfStrings(v);
}

inline Bytes finished_bytes(const flatbuffers::FlatBufferBuilder& fbb) {
  return Bytes::copy_of(
      std::span(reinterpret_cast<const std::byte*>(fbb.GetBufferPointer()), fbb.GetSize()));
}

using modelzip::detail::quote_name;

}  // namespace modelzip::graph::detail
