// Shared by the libFuzzer targets of tests/fuzz/: how a target treats the
// outcome of feeding untrusted bytes to modelzip.
//
// Contract of every target: LLVMFuzzerTestOneInput returns 0 for every
// input. A modelzip::Error is the expected answer to malformed bytes and is
// swallowed by `attempt`. Anything else is a bug the fuzzer (or the replay
// driver) must report: a crash, a sanitizer finding, an exception of another
// type (left to propagate), or a broken invariant (FUZZ_CHECK aborts).
//
// Thread safety: the helpers have no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::fuzz {

// Prints `what` and aborts: an invariant that must hold for input modelzip
// accepted does not.
[[noreturn]] inline void invariant_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", file, line, what);
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) ::modelzip::fuzz::invariant_failed(#cond, __FILE__, __LINE__); \
  } while (0)

// Runs `f`. Returns true if it returned, false if it threw modelzip::Error;
// any other exception propagates.
template <class F>
bool attempt(F&& f) {
  try {
    f();
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Like attempt, for a reader of a whole untrusted file that knows where it
// is in it: an Error(corrupt) must also name the line or the byte offset
// where the input is wrong (the error model), else the invariant fails.
template <class F>
bool attempt_located(F&& f) {
  try {
    f();
    return true;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::corrupt && !e.context().line && !e.context().offset) {
      const std::string what =
          "an Error(corrupt) names no line or offset: " + std::string(e.what());
      invariant_failed(what.c_str(), __FILE__, __LINE__);
    }
    return false;
  }
}

// A copy of the input in memory of exactly `size` bytes (so AddressSanitizer
// sees every read past the end) starting at a 64-byte boundary (so the
// zero-copy paths that need aligned data are taken, as for a mapped file).
inline Bytes input_bytes(const std::uint8_t* data, std::size_t size) {
  constexpr std::align_val_t kAlignment{64};
  auto deleter = [](std::byte* p) { ::operator delete(p, kAlignment); };
  std::shared_ptr<std::byte> memory(
      static_cast<std::byte*>(::operator new(size == 0 ? 1 : size, kAlignment)), deleter);
  if (size != 0) std::memcpy(memory.get(), data, size);
  return Bytes::borrow(std::span<const std::byte>(memory.get(), size), memory);
}

inline std::string_view input_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Reads every byte of `bytes` (so a view past the end of its buffer is
// found by AddressSanitizer) and returns a value depending on all of them.
inline std::uint64_t touch(const Bytes& bytes) {
  std::uint64_t sum = 0;
  for (std::byte b : bytes.span()) sum = sum * 31 + static_cast<std::uint8_t>(b);
  return sum;
}

// Every byte of the tensor; a quantized one is also dequantized (which reads
// every integer, scale and zero point through the scheme's indexing).
inline std::uint64_t touch(const Tensor& tensor) {
  std::uint64_t sum = touch(tensor.values()) ^ touch(tensor.offsets()) ^ touch(tensor.indices());
  if (const Quantization* q = tensor.quantization())
    sum ^= touch(q->scales) ^ touch(q->zero_points) ^
           touch(tensor.dequantize(DType::float32).values());
  return sum;
}

// Keeps a computed value alive so the reads that produced it are not
// optimised away.
inline void keep(std::uint64_t value) {
  static volatile std::uint64_t sink;
  sink = sink + value;
}

}  // namespace modelzip::fuzz
