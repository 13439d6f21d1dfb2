// Fuzz target: a <tag>/graph.fb buffer, decoded by graph::decode_graph and
// rendered as `modelzip graph` does (JSON and DOT).
//
// Invariants: a decoded graph passes validate_graph (decoding checks every
// rule), and encoding it gives bytes that decode and encode to the same bytes.
#include <cstdint>

#include "fuzz_support.hpp"
#include "graph/render.hpp"
#include "modelzip/graph/graph.hpp"

using namespace modelzip;
using namespace modelzip::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  graph::Graph decoded;
  if (!attempt([&] { decoded = graph::decode_graph(input_bytes(data, size)); })) return 0;
  FUZZ_CHECK(attempt([&] { graph::validate_graph(decoded); }));
  keep(graph::graph_json(decoded).size() + graph::graph_dot(decoded).size());
  Bytes encoded, reencoded;
  FUZZ_CHECK(attempt([&] {
    encoded = graph::encode_graph(decoded);
    reencoded = graph::encode_graph(graph::decode_graph(encoded));
  }));
  FUZZ_CHECK(encoded.as_string_view() == reencoded.as_string_view());
  return 0;
}
