// Hostile sizes fail fast, before any allocation: this test replaces the
// global operator new of the test executable to record the largest single
// request while a hostile input is parsed.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "ff_test_support.hpp"
#include "modelzip/finalfusion/convert.hpp"

namespace {
std::atomic<std::size_t> g_largest{0};

void* allocate(std::size_t n) {
  std::size_t seen = g_largest.load(std::memory_order_relaxed);
  while (n > seen && !g_largest.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) {
  return allocate(n);
}
void* operator new[](std::size_t n) {
  return allocate(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

using namespace modelzip;
using namespace modelzip::finalfusion;

namespace {

struct Builder {
  std::string bytes;
  Builder& u32(std::uint32_t v) { return raw(&v, 4); }
  Builder& u64(std::uint64_t v) { return raw(&v, 8); }
  Builder& i32(std::int32_t v) { return raw(&v, 4); }
  Builder& i64(std::int64_t v) { return raw(&v, 8); }
  Builder& f64(double v) { return raw(&v, 8); }
  Builder& text(std::string_view s) {
    bytes += s;
    return *this;
  }
  Builder& raw(const void* p, std::size_t n) {
    bytes.append(static_cast<const char*>(p), n);
    return *this;
  }
  Builder& zeros(std::size_t n) {
    bytes.append(n, '\0');
    return *this;
  }
};

Builder fifu_header(std::initializer_list<std::uint32_t> ids) {
  Builder b;
  b.text("FiFu").u32(0).u32(static_cast<std::uint32_t>(ids.size()));
  for (auto id : ids) b.u32(id);
  return b;
}

template <class F>
void fails_without_allocating(std::string what, F&& parse) {
  CAPTURE(what);
  g_largest = 0;
  try {
    parse();
    FAIL("hostile input accepted");
  } catch (const Error& e) {
    CHECK((e.code() == ErrorCode::corrupt || e.code() == ErrorCode::unsupported));
    MESSAGE(what << ": " << std::string(e.what()));
  }
  CHECK(g_largest.load() < (1u << 20));
}

}  // namespace

TEST_SUITE("finalfusion") {
  TEST_CASE("hostile sizes are rejected before anything is allocated") {
    // NdArray declaring 2^40 x 300 (and 2^60 x 300, which overflows).
    for (std::uint64_t rows : {1ull << 40, 1ull << 60}) {
      auto b = fifu_header({1, 2});
      b.u32(1).u64(8).u64(0);  // SimpleVocab, no words
      b.u32(2).u64(8 + 4 + 4 + 1 + 64).u64(rows).u32(300).u32(10).zeros(1 + 64);
      fails_without_allocating("NdArray rows", [&] { Embeddings::read(Bytes::copy_of(b.bytes)); });
    }
    {
      auto b = fifu_header({1, 2});
      b.u32(1).u64(8 + 64).u64(1ull << 60).zeros(64);
      fails_without_allocating("SimpleVocab words",
                               [&] { Embeddings::read(Bytes::copy_of(b.bytes)); });
    }
    {
      auto b = fifu_header({8, 2});
      b.u32(8).u64(24 + 64).u64(0).u64(1ull << 60).u32(3).u32(6).zeros(64);
      fails_without_allocating("ExplicitSubwordVocab n-grams",
                               [&] { Embeddings::read(Bytes::copy_of(b.bytes)); });
    }
    {
      auto b = fifu_header({1, 4});
      b.u32(1).u64(8).u64(0);
      b.u32(4)
          .u64(36 + 2 + 64)
          .u32(0)
          .u32(1)
          .u32(50)
          .u32(100)
          .u32(256)
          .u64(1ull << 60)
          .u32(1)
          .u32(10);
      b.zeros(2 + 64);
      fails_without_allocating("QuantizedArray rows",
                               [&] { Embeddings::read(Bytes::copy_of(b.bytes)); });
    }
    {
      Builder b;
      b.text("FiFu").u32(0).u32(0xFFFFFFFFu);
      fails_without_allocating("header chunk count",
                               [&] { Embeddings::read(Bytes::copy_of(b.bytes)); });
    }
    {
      auto b = fifu_header({1, 2, 6});
      b.u32(1).u64(8).u64(0);
      // NdArray at 44: data would start at 72 -> 4 bytes of padding.
      b.u32(2).u64(8 + 4 + 4 + 4).u64(0).u32(0).u32(10).zeros(4);
      // NdNorms at 76: data at 100 -> 4 bytes of padding.
      b.u32(6).u64(8 + 4 + 4 + 64).u64(1ull << 61).u32(10).zeros(4 + 64);
      fails_without_allocating("NdNorms length",
                               [&] { Embeddings::read(Bytes::copy_of(b.bytes)); });
    }
    fails_without_allocating("word2vec header", [&] {
      read_word2vec_binary(Bytes::copy_of(std::string_view("1152921504606846976 300\nw ")));
    });
    fails_without_allocating("word2vec dims", [&] {
      read_word2vec_binary(Bytes::copy_of(std::string_view("2 4611686018427387904\nw ")));
    });
    fails_without_allocating("text dims header", [&] {
      read_text_dims(Bytes::copy_of(std::string_view("1000000000000 1\nw 1\n")));
    });
    fails_without_allocating("floret header", [&] {
      read_floret_text(Bytes::copy_of(std::string_view("1000000000000 1 3 6 2 1 < >\n0 1\n")));
    });
    {
      Builder b;
      b.u32(793712314).u32(12);
      for (std::int32_t v : {300, 5, 5, 5, 5, 1, 2, 2, 2000000, 3, 6, 100}) b.i32(v);
      b.f64(1e-4).i32(0x7FFFFFFF).i32(0x7FFFFFFF).i32(0).i64(0).i64(-1).zeros(64);
      fails_without_allocating("fastText dictionary",
                               [&] { read_fasttext(Bytes::copy_of(b.bytes)); });
    }
    {
      Builder b;
      b.u32(793712314).u32(12);
      for (std::int32_t v : {300, 5, 5, 5, 5, 1, 2, 2, 2000000, 3, 6, 100}) b.i32(v);
      b.f64(1e-4).i32(0).i32(0).i32(0).i64(0).i64(-1).zeros(1).i64(2000000).i64(300).zeros(64);
      fails_without_allocating("fastText matrix", [&] { read_fasttext(Bytes::copy_of(b.bytes)); });
    }
  }
}
