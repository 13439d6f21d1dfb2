// Work limits: no input may make modelzip allocate far more than its own
// size (or, for deflated entries, the sizes it declares, which are checked
// against deflate's maximal ratio first), or loop far longer than its size
// warrants. Each scenario of issue 6 is built in memory, then parsed while
// allocation_counter.cpp counts the heap; the peak must stay under a bound
// k * size + C whose constants are justified beside each test.
//
// C: parsing allocates small fixed things (error messages, the archive's
// bookkeeping, libstdc++'s first-use buffers); 1 MiB covers them with room.
#include <doctest/doctest.h>

#include <flatbuffers/flatbuffers.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "../zip/expect_error.hpp"
#include "allocation_counter.hpp"
#include "graph_generated.h"
#include "hostile_archives.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/convert.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/graph/graph.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

constexpr std::int64_t kConstant = 1 << 20;

struct Outcome {
  std::optional<Error> error;
  std::int64_t peak = 0;
};

// Runs `f` while counting; the input must be built before.
Outcome measure(const std::function<void()>& f) {
  Outcome out;
  PeakHeap heap;
  try {
    f();
  } catch (const Error& e) {
    out.error = e;
  }
  out.peak = heap.peak();
  return out;
}

Bytes zip_bytes(const ZipSpec& spec) {
  return Bytes::copy_of(build_zip(spec).bytes);
}

std::string u32s(std::uint32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}
std::string u64s(std::uint64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 8);
}

// The process's peak resident memory (VmHWM) in KiB, or nullopt.
std::optional<std::int64_t> peak_rss_kib() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return std::nullopt;
  std::optional<std::int64_t> kib;
  char line[256];
  while (std::fgets(line, sizeof line, status))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::strtoll(line + 6, nullptr, 10);
  std::fclose(status);
  return kib;
}

// The process's peak resident memory in KiB (VmHWM), after resetting it to
// the current resident memory; nullopt where Linux's clear_refs or
// /proc/self/status cannot be used.
std::optional<std::int64_t> reset_peak_rss() {
  FILE* clear = std::fopen("/proc/self/clear_refs", "w");
  if (!clear) return std::nullopt;
  const bool reset = std::fputs("5", clear) >= 0;
  if (std::fclose(clear) != 0 || !reset) return std::nullopt;
  return peak_rss_kib();
}

void require_error(const Outcome& o, ErrorCode code, const std::string& part) {
  REQUIRE_MESSAGE(o.error.has_value(), "hostile input accepted");
  const std::string what = o.error->what();
  CHECK_MESSAGE(o.error->code() == code, what);
  CHECK_MESSAGE(what.find(part) != std::string::npos, what);
}

}  // namespace

TEST_SUITE("hostile") {
  TEST_CASE("The allocation counter sees what it is meant to see") {
    // Guards the other tests: a counter that saw nothing would pass them all.
    Outcome o = measure([] {
      std::string s(10 << 20, 'x');
      CHECK(s.back() == 'x');
    });
    CHECK(o.peak >= (10 << 20));
    CHECK(o.peak < (11 << 20));
  }

  TEST_CASE("tags.txt of a million lines") {
    SUBCASE("empty lines, deflated: rejected at line 2 without splitting the rest") {
      // 16 MiB of text deflated to about 16 KiB (an honest ratio near
      // 1000:1). Reading it needs the text itself (declared, 16 MiB + 3);
      // nothing may grow with the number of lines. Bound: text + C.
      const std::string text = "t1\n" + std::string(16u << 20, '\n');
      ZipSpec s = minimal_archive();
      entry(s, "tags.txt").method = 8;
      set_entry(s, "tags.txt", text);
      Bytes zip = zip_bytes(s);
      Outcome o = measure([&] { Archive::from_memory(zip, "m.zip"); });
      require_error(o, ErrorCode::corrupt, "must not be empty");
      CHECK(o.error->context().line == std::optional<std::uint64_t>(2));
      CHECK(o.peak <= static_cast<std::int64_t>(text.size()) + kConstant);
    }
    SUBCASE("a million distinct tags: linear in the number of tags") {
      // Tags "t1" (the minimal archive's), then "a0".."a999999", stored:
      // 7.9 MB of text, none of the a-tags with a params.txt, so opening
      // fails at "a0" after building the tag list. Per tag the archive keeps: the tag (std::string,
      // 32 bytes, short tags inline), one hash-map node in the tag index and one in the duplicate
      // check (each about 64 bytes with the bucket), and vector growth can hold the old and new
      // array at once (3 x 32). Bound: 256 bytes per line + C.
      std::string text = "t1\n";
      constexpr std::size_t kLines = 1'000'000;
      for (std::size_t i = 0; i < kLines; ++i) text += "a" + std::to_string(i) + "\n";
      ZipSpec s = minimal_archive();
      set_entry(s, "tags.txt", text);
      Bytes zip = zip_bytes(s);
      Outcome o = measure([&] { Archive::from_memory(zip, "m.zip"); });
      require_error(o, ErrorCode::corrupt, "has no params.txt");
      MESSAGE("a million tags: peak " << o.peak << " bytes for " << text.size() << " of text");
      CHECK(o.peak <= static_cast<std::int64_t>(kLines) * 256 + kConstant);
    }
  }

  TEST_CASE("params.txt with absurd line counts") {
    SUBCASE("eight million comment lines, deflated: a valid archive, memory of the text only") {
      // 16 MiB of "#\n" deflated (about 16 KiB). Comments are skipped; the
      // only memory that may scale is the decompressed text. The table
      // parser may also reserve room for up to 2^16 rows from the line count
      // before reading them (about 100 bytes each with their index), a
      // constant of at most 8 MiB. Bound: text + 8 MiB + C.
      const std::string text = "w 0\n" + [] {
        std::string c;
        c.reserve(16u << 20);
        while (c.size() < (16u << 20)) c += "#\n";
        return c;
      }();
      ZipSpec s = minimal_archive();
      entry(s, "t1/params.txt").method = 8;
      set_entry(s, "t1/params.txt", text);
      Bytes zip = zip_bytes(s);
      Outcome o = measure([&] {
        Archive a = Archive::from_memory(zip, "m.zip");
        CHECK(a.params("t1").size() == 1);
      });
      REQUIRE_MESSAGE(!o.error, std::string(o.error ? o.error->what() : ""));
      CHECK(o.peak <= static_cast<std::int64_t>(text.size()) + (8 << 20) + kConstant);
    }
    SUBCASE("a million rows sharing one blob: linear in the number of rows") {
      // Rows "p<i> 0" (all referencing t1/params/0.fb, which sharing allows):
      // 9.9 MB stored. Per row the archive keeps a BlobRow (its keys vector
      // with one short string, the reference with an empty tag, the line:
      // about 128 bytes with the keys' array), one hash-map node in the
      // duplicate check and one in the row index (about 64 bytes each), and
      // vector growth (old + new array: 2 x 88). Bound: 512 bytes per row + C.
      std::string text;
      constexpr std::size_t kRows = 1'000'000;
      for (std::size_t i = 0; i < kRows; ++i) text += "p" + std::to_string(i) + " 0\n";
      ZipSpec s = minimal_archive();
      set_entry(s, "t1/params.txt", text);
      Bytes zip = zip_bytes(s);
      Outcome o = measure([&] { Archive::from_memory(zip, "m.zip"); });
      REQUIRE_MESSAGE(!o.error, std::string(o.error ? o.error->what() : ""));
      MESSAGE("a million rows: peak " << o.peak << " bytes for " << text.size() << " of text");
      CHECK(o.peak <= static_cast<std::int64_t>(kRows) * 512 + kConstant);
    }
  }

  TEST_CASE("Deflate bombs") {
    SUBCASE("a declared ratio beyond deflate's maximum is refused before inflating") {
      // 1 GiB declared from a few bytes. Bound: C (nothing inflated).
      ZipSpec s = minimal_archive();
      auto& e = entry(s, "t1/params/0.fb");
      e.method = 8;
      e.uncompressed_size = 1ull << 30;
      Bytes zip = zip_bytes(s);
      Outcome o = measure([&] { Archive::from_memory(zip, "m.zip"); });
      require_error(o, ErrorCode::limit_exceeded, "zip bomb");
      CHECK(o.error->context().entry == "t1/params/0.fb");
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("a stream inflating past its declared size stops at the declared size") {
      // tags.txt declares 3 bytes; its stream inflates to 64 MiB. The reader
      // may allocate the declared size only. Bound: C.
      ZipSpec s = minimal_archive();
      auto& e = entry(s, "tags.txt");
      e.method = 8;
      e.raw_data = deflate_raw(std::string(64u << 20, '\n'));
      e.uncompressed_size = 3;
      Bytes zip = zip_bytes(s);
      Outcome o = measure([&] { Archive::from_memory(zip, "m.zip"); });
      require_error(o, ErrorCode::corrupt, "more data than its declared size");
      CHECK(o.error->context().entry == "tags.txt");
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("a blob declaring more than its data holds costs memory for the data only") {
      // 1 GiB declared over 1 MiB of deflate data (within deflate's ratio)
      // that inflates to 1 MiB. The declared size is allocated (the heap
      // counter sees it) but only the pages the data reaches are touched:
      // the resident peak grows by about the data, not by the lie.
      ZipSpec s = minimal_archive();
      auto& e = entry(s, "t1/params/0.fb");
      e.method = 8;
      std::string noise(1u << 20, '\0');
      std::uint32_t x = 99;
      for (char& c : noise) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
      e.raw_data = deflate_raw(good_blob() + noise);
      e.uncompressed_size = 1ull << 30;
      Bytes zip = zip_bytes(s);
      Archive a = Archive::from_memory(zip, "m.zip");
#ifdef __GLIBC__
      // meson test sets MALLOC_PERTURB_, which fills every allocation: off
      // here, as in a program.
      mallopt(M_PERTURB, 0);
#endif
      for (ReadMode mode : {ReadMode::zero_copy, ReadMode::copy}) {
        const std::optional<std::int64_t> before = reset_peak_rss();
        REQUIRE_ERROR_AS(err, a.tensor("w", "t1", mode), ErrorCode::corrupt, "t1/params/0.fb");
        const std::optional<std::int64_t> after = peak_rss_kib();
        if (!before || !after) {
          MESSAGE("no /proc/self/clear_refs: the resident peak is not checked");
          continue;
        }
        // (256 MiB: room for a sanitizer's shadow memory of the allocation.)
        CHECK_MESSAGE(*after - *before < (256 << 10), "resident peak grew by ", *after - *before,
                      " KiB");
      }
#ifdef __GLIBC__
      if (const char* perturb = std::getenv("MALLOC_PERTURB_"))
        mallopt(M_PERTURB, std::atoi(perturb));
#endif
    }
    SUBCASE("the same bomb as a tensor blob, read with copy and zero-copy") {
      ZipSpec s = minimal_archive();
      auto& e = entry(s, "t1/params/0.fb");
      e.method = 8;
      std::string bomb = good_blob();
      const std::uint64_t declared = bomb.size();
      bomb += std::string(64u << 20, '\0');
      e.raw_data = deflate_raw(bomb);
      e.uncompressed_size = declared;
      Bytes zip = zip_bytes(s);
      Archive a = Archive::from_memory(zip, "m.zip");
      for (ReadMode mode : {ReadMode::zero_copy, ReadMode::copy}) {
        Outcome o = measure([&] { a.tensor("w", "t1", mode); });
        require_error(o, ErrorCode::corrupt, "more data than its declared size");
        CHECK(o.peak <= kConstant);
      }
    }
  }

  TEST_CASE("A part of a large deflated entry costs the part and a small buffer") {
    // 16 MiB deflated (numbered lines, so that every part is distinct).
    // entry_part decompresses from the entry's start to the part's end, the
    // bytes before the part through a buffer of 64 KiB (kSkipChunk). Bound:
    // the part's length + C, whatever the offset (the whole entry included).
    std::string data;
    data.reserve(16u << 20);
    for (std::uint32_t i = 0; data.size() < (16u << 20); ++i) data += std::to_string(i) + "\n";
    data.resize(16u << 20);
    ZipSpec s = minimal_archive();
    s.entries.push_back(deflated("big.bin", data));
    Bytes zip = zip_bytes(s);
    const Archive a = Archive::from_memory(zip, "m.zip");
    const std::uint64_t size = data.size();
    for (const auto& part :
         std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 100},
                                                              {size / 2, 100},
                                                              {size - 100, 100},
                                                              {size - (1u << 20), 1u << 20},
                                                              {0, size}}) {
      const std::uint64_t offset = part.first, length = part.second;
      INFO(offset, " ", length);
      Bytes got;
      Outcome o = measure([&] { got = a.entry_part("big.bin", offset, length); });
      REQUIRE_FALSE(o.error);
      CHECK(o.peak <= static_cast<std::int64_t>(length) + kConstant);
      CHECK(got.as_string_view() == std::string_view(data).substr(offset, length));
    }
  }

  TEST_CASE("Tensor blobs declaring huge shapes and element counts") {
    SUBCASE("2^60 elements over 8 bytes of data are refused without allocating") {
      ZipSpec s = minimal_archive();
      set_entry(s, "t1/params/0.fb", blob_with([](BlobSpec& b) {
                  b.shape = {{1ll << 30, 1ll << 30}};
                }));
      Bytes zip = zip_bytes(s);
      Archive a = Archive::from_memory(zip, "m.zip");
      Outcome o = measure([&] { a.load("t1"); });
      require_error(o, ErrorCode::corrupt, "the header implies");
      CHECK(o.peak <= kConstant);
      Outcome info = measure([&] { a.params("t1"); });
      require_error(info, ErrorCode::corrupt, "the header implies");
      CHECK(info.peak <= kConstant);
    }
    SUBCASE("a zero dimension beside 2^62 is a valid empty tensor, read in constant memory") {
      ZipSpec s = minimal_archive();
      set_entry(s, "t1/params/0.fb", blob_with([](BlobSpec& b) {
                  b.shape = {{1ll << 62, 0}};
                  b.values = {{0, 0}};
                }));
      Bytes zip = zip_bytes(s);
      Archive a = Archive::from_memory(zip, "m.zip");
      Outcome o = measure([&] {
        Tensor t = a.tensor("w", "t1");
        CHECK(t.numel() == 0);
      });
      REQUIRE_MESSAGE(!o.error, std::string(o.error ? o.error->what() : ""));
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("a sparse tensor claiming nnz 2^40 is refused before its indices are read") {
      ZipSpec s = minimal_archive();
      set_entry(s, "t1/params/0.fb", blob_with([](BlobSpec& b) {
                  b.layout = 1;
                  b.shape = {{1ll << 31, 1ll << 31}};
                  b.nnz = 1ull << 40;
                  b.indices = {{b.values->first + 64, (1ull << 40) * 16}};
                  b.values->second = (1ull << 40) * 4;
                }));
      Bytes zip = zip_bytes(s);
      Archive a = Archive::from_memory(zip, "m.zip");
      Outcome o = measure([&] { a.load("t1"); });
      require_error(o, ErrorCode::corrupt, "outside the data area");
      CHECK(o.peak <= kConstant);
    }
  }

  TEST_CASE("FlatBuffers sharing one sub-table many times (a DAG) do not multiply work") {
    // graph.fb whose ops vector holds N references to one Op, whose inputs
    // vector holds M references to one string: N * M strings from a buffer
    // of about 4 * (N + M) bytes. A buffer without shared sub-objects has at
    // most one vector element per 4 bytes, so decoding may produce at most
    // size / 4 elements. Bound: 64 bytes per buffer byte + C.
    constexpr int kN = 2000, kM = 2000;
    flatbuffers::FlatBufferBuilder fbb;
    auto x = fbb.CreateString("x");
    std::vector<flatbuffers::Offset<flatbuffers::String>> inputs(kM, x);
    auto in_vec = fbb.CreateVector(inputs);
    auto op = modelzip::fb::CreateOp(fbb, fbb.CreateString("op"), fbb.CreateString("add"), in_vec);
    std::vector<flatbuffers::Offset<modelzip::fb::Op>> ops(kN, op);
    auto ops_vec = fbb.CreateVector(ops);
    auto var = modelzip::fb::CreateVariable(fbb, x, modelzip::fb::VariableKind::PLACEHOLDER);
    auto vars = fbb.CreateVector(std::vector<flatbuffers::Offset<modelzip::fb::Variable>>{var});
    fbb.Finish(modelzip::fb::CreateGraph(fbb, 1, vars, ops_vec), modelzip::fb::GraphIdentifier());
    Bytes buf = Bytes::copy_of(
        std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()));
    Outcome o = measure([&] { graph::decode_graph(buf); });
    require_error(o, ErrorCode::limit_exceeded, "sub-objects are shared");
    CHECK(o.peak <= static_cast<std::int64_t>(buf.size()) * 64 + kConstant);
  }

  TEST_CASE("A FlatBuffer string referenced from many slots does not expand without bound") {
    // One 60 000-byte string referenced 1000 times from one op's inputs: a
    // buffer of about 64 KB that would decode to 60 MB of strings. Vectors
    // are not shared (each element occupies its own 4 bytes), so only the
    // string limit (Limits::max_flatbuffer_expansion = 64 times the buffer)
    // can refuse it. Bound: 2 x buffer (an aligned copy) + C.
    flatbuffers::FlatBufferBuilder fbb;
    auto x = fbb.CreateString(std::string(60'000, 'x'));
    auto in_vec = fbb.CreateVector(std::vector<flatbuffers::Offset<flatbuffers::String>>(1000, x));
    auto op = modelzip::fb::CreateOp(fbb, fbb.CreateString("op"), fbb.CreateString("add"), in_vec);
    auto ops_vec = fbb.CreateVector(std::vector<flatbuffers::Offset<modelzip::fb::Op>>{op});
    auto var = modelzip::fb::CreateVariable(fbb, x, modelzip::fb::VariableKind::PLACEHOLDER);
    auto vars = fbb.CreateVector(std::vector<flatbuffers::Offset<modelzip::fb::Variable>>{var});
    fbb.Finish(modelzip::fb::CreateGraph(fbb, 1, vars, ops_vec), modelzip::fb::GraphIdentifier());
    Bytes buf = Bytes::copy_of(
        std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()));
    Outcome o = measure([&] { graph::decode_graph(buf); });
    require_error(o, ErrorCode::limit_exceeded, "strings, counted at every reference");
    CHECK(o.peak <= static_cast<std::int64_t>(buf.size()) * 2 + kConstant);
    // The same graph is accepted when the limit allows the expansion (the
    // refusal above is the limit's doing, not a fault of the buffer).
    Limits generous;
    generous.max_flatbuffer_expansion = 2000;
    CHECK_NOTHROW(graph::decode_graph(buf, generous));
  }

  TEST_CASE("finalfusion files declaring huge vocabularies and matrices") {
    // Bound: C; the file itself is given as Bytes (not counted).
    auto fifu = [](const std::string& chunks, std::initializer_list<std::uint32_t> ids) {
      std::string b = "FiFu" + u32s(0) + u32s(static_cast<std::uint32_t>(ids.size()));
      for (auto id : ids) b += u32s(id);
      return Bytes::copy_of(b + chunks);
    };
    SUBCASE("SimpleVocab of 2^60 words") {
      Bytes f = fifu(u32s(1) + u64s(8 + 64) + u64s(1ull << 60) + std::string(64, 'x'), {1});
      Outcome o = measure([&] { finalfusion::Embeddings::read(f); });
      require_error(o, ErrorCode::corrupt, "1152921504606846976");
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("a million words declared, each 4 bytes of length only: linear, then refused") {
      // 2^20 words of length 0 (4 bytes each) are a legal vocabulary as far
      // as the vocab chunk goes (the empty words then repeat and are
      // refused). Bound: per word a std::string (32) and index node (64),
      // plus vector growth: 256 bytes per 4-byte word + C.
      constexpr std::uint64_t kWords = 1u << 20;
      std::string words(kWords * 4, '\0');
      Bytes f = fifu(u32s(1) + u64s(8 + words.size()) + u64s(kWords) + words, {1});
      Outcome o = measure([&] { finalfusion::Embeddings::read(f); });
      REQUIRE(o.error.has_value());
      CHECK(o.peak <= static_cast<std::int64_t>(kWords) * 256 + kConstant);
    }
    SUBCASE("NdArray of 2^40 x 300") {
      std::string vocab = u32s(1) + u64s(8 + 5) + u64s(1) + u32s(1) + "a";
      std::string body = u64s(1ull << 40) + u32s(300) + u32s(10) + std::string(64, '\0');
      Bytes f = fifu(vocab + u32s(2) + u64s(body.size()) + body, {1, 2});
      Outcome o = measure([&] { finalfusion::Embeddings::read(f); });
      REQUIRE(o.error.has_value());
      CHECK(o.error->code() == ErrorCode::corrupt);
      CHECK(o.peak <= kConstant);
    }
  }

  TEST_CASE("Converter inputs declaring huge headers, shapes and word counts") {
    // Bound: C for all (each is refused from its header).
    SUBCASE("safetensors header of 2^62 bytes") {
      Bytes f = Bytes::copy_of(u64s(1ull << 62) + "{}");
      Outcome o = measure([&] { convert::read_safetensors(f); });
      require_error(o, ErrorCode::limit_exceeded, "header");
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("safetensors shape of 2^80 elements") {
      std::string json =
          R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})";
      Bytes f = Bytes::copy_of(u64s(json.size()) + json + std::string(8, '\0'));
      Outcome o = measure([&] { convert::read_safetensors(f); });
      REQUIRE(o.error.has_value());
      CHECK(o.error->code() == ErrorCode::corrupt);
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("safetensors metadata nested a million levels deep") {
      std::string json = R"({"__metadata__":)" + std::string(1'000'000, '[') + "}";
      Bytes f = Bytes::copy_of(u64s(json.size()) + json);
      Outcome o = measure([&] { convert::read_safetensors(f); });
      REQUIRE(o.error.has_value());
      CHECK(o.error->code() == ErrorCode::corrupt);
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("npy header declaring 2^80 elements") {
      std::string dict =
          "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }";
      while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
      dict += '\n';
      std::string f = std::string("\x93NUMPY\x01\x00", 8);
      put16(f, dict.size());
      Bytes file = Bytes::copy_of(f + dict + std::string(8, '\0'));
      Outcome o = measure([&] { convert::read_npy(file, "x"); });
      REQUIRE(o.error.has_value());
      CHECK(o.error->code() == ErrorCode::corrupt);
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("npy header length of 4 GiB (version 2)") {
      std::string f = std::string("\x93NUMPY\x02\x00", 8) + u32s(0xFFFFFFF0u) + "{}";
      Bytes file = Bytes::copy_of(f);
      Outcome o = measure([&] { convert::read_npy(file, "x"); });
      REQUIRE(o.error.has_value());
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("word2vec binary declaring 3 billion words") {
      Bytes f = Bytes::copy_of("3000000000 300\nw " + std::string(1200, '\0'));
      Outcome o = measure([&] { finalfusion::read_word2vec_binary(f); });
      require_error(o, ErrorCode::corrupt, "3000000000");
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("word2vec text declaring 3 billion words") {
      Bytes f = Bytes::copy_of("3000000000 2\nw 1 2\n");
      Outcome o = measure([&] { finalfusion::read_text_dims(f); });
      require_error(o, ErrorCode::corrupt, "3000000000");
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("fastText declaring 2^31 - 1 words and a 2^31 x 2^31 matrix") {
      std::string f = u32s(793712314) + u32s(12);
      for (std::uint32_t v : {0x7FFFFFFFu, 5u, 5u, 1u, 5u, 1u, 2u, 2u, 0x7FFFFFFFu, 3u, 6u, 100u})
        f += u32s(v);
      f += std::string(8, '\0');
      f += u32s(0x7FFFFFFFu) + u32s(0x7FFFFFFFu) + u32s(0) + u64s(0) + u64s(~0ull);
      f += std::string(64, 'w');
      Bytes file = Bytes::copy_of(f);
      Outcome o = measure([&] { finalfusion::read_fasttext(file); });
      require_error(o, ErrorCode::corrupt, "2147483647");
      CHECK(o.peak <= kConstant);
    }
    SUBCASE("BTF declaring 2^60 tensors") {
      Bytes f = Bytes::copy_of(u64s(1ull << 60) + u64s(16));
      Outcome o = measure([&] { convert::read_btf(f); });
      REQUIRE(o.error.has_value());
      CHECK(o.error->code() == ErrorCode::corrupt);
      CHECK(o.peak <= kConstant);
    }
  }
}
