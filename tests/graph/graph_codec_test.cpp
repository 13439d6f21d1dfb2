#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "expect_error_text.hpp"
#include "graph_fixtures.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;
using namespace modelzip::testing;

TEST_CASE("The MLP graph round-trips field by field") {
  Graph g = mlp_graph();
  Bytes fb = encode_graph(g);
  // Plain FlatBuffer with the MZGR identifier at bytes 4-7.
  REQUIRE(fb.size() > 8);
  CHECK(std::string(reinterpret_cast<const char*>(fb.data()) + 4, 4) == "MZGR");
  Graph d = decode_graph(fb);
  CHECK(d == g);
  REQUIRE(d.variables.size() == 16);
  CHECK(d.variables[0].name == "x");
  CHECK(d.variables[0].kind == VariableKind::placeholder);
  CHECK(d.variables[0].shape == Shape{-1, 2});
  CHECK(d.variables[2].kind == VariableKind::constant);
  CHECK(d.variables[3].is_trainable());
  CHECK_FALSE(d.variables[2].is_trainable());
  CHECK_FALSE(d.variables[7].shape.has_value());  // "xs": rank unknown
  const Op* mean = d.find_op("mean");
  REQUIRE(mean);
  CHECK(mean->i_arg("dimensions") == -1);
  CHECK(mean->b_arg("keepDims") == false);
  CHECK(mean->d_arg("dtype") == DType::float32);
  CHECK(mean->t_arg("scale") == 1.0);
  CHECK(mean->s_arg("reduction") == "mean");
  CHECK_FALSE(mean->i_arg("nope").has_value());
  CHECK(d.producer("h")->name == "act1");
  CHECK(d.producer("w1") == nullptr);
  CHECK(d.trainable_variables() == std::vector<std::string>{"w1", "b1", "w2", "b2"});
  CHECK(d.outputs == std::vector<std::string>{"y"});
  CHECK(d.loss_variables == std::vector<std::string>{"loss"});
}

TEST_CASE("Random graphs round-trip exactly (NaN arguments, odd names, unknown shapes)") {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 300; ++i) {
    Graph g = random_graph(rng);
    INFO("graph " << i);
    Bytes fb = encode_graph(g);
    Graph d = decode_graph(fb);
    CHECK(d == g);
    // Encoding is deterministic.
    Bytes again = encode_graph(d);
    CHECK(again.as_string_view() == fb.as_string_view());
  }
}

TEST_CASE("NaN op arguments compare by bits") {
  Op a, b;
  a.add_t_arg("x", std::nan(""));
  b.add_t_arg("x", std::nan(""));
  CHECK(a == b);
  b.t_args[0].value = 0.0;
  CHECK_FALSE(a == b);
  a.t_args[0].value = -0.0;
  CHECK_FALSE(a == b);  // -0.0 and 0.0 differ in bits
}

TEST_CASE("8-bit float variables round-trip and are trainable like the other float types") {
  Graph g = mlp_graph();
  g.variables[3].dtype = DType::float8_e4m3fn;  // w1
  g.variables[4].dtype = DType::float8_e5m2;    // b1
  Graph d = decode_graph(encode_graph(g));
  CHECK(d == g);
  CHECK(d.variables[3].dtype == DType::float8_e4m3fn);
  CHECK(d.variables[4].dtype == DType::float8_e5m2);
  CHECK(d.trainable_variables() == std::vector<std::string>{"w1", "b1", "w2", "b2"});
  for (DType t : kAllDTypes) {
    Variable v;
    v.dtype = t;
    CHECK(v.is_trainable() == (dtype_is_floating(t) || dtype_is_complex(t)));
  }
}

TEST_CASE("Complex variables round-trip and are trainable") {
  Graph g = mlp_graph();
  g.variables[3].dtype = DType::complex64;   // w1
  g.variables[4].dtype = DType::complex128;  // b1
  Graph d = decode_graph(encode_graph(g));
  CHECK(d == g);
  CHECK(d.variables[3].dtype == DType::complex64);
  CHECK(d.variables[4].dtype == DType::complex128);
  CHECK(d.trainable_variables() == std::vector<std::string>{"w1", "b1", "w2", "b2"});
  // A complex CONSTANT is not trainable (only VARIABLEs are).
  Variable k;
  k.kind = VariableKind::constant;
  k.dtype = DType::complex64;
  CHECK_FALSE(k.is_trainable());
}

TEST_CASE("The empty graph round-trips") {
  Graph g;
  CHECK(decode_graph(encode_graph(g)) == g);
}

TEST_CASE("validate_graph names the broken rule") {
  const auto bad = ErrorCode::invalid_argument;
  auto with = [](auto&& edit) {
    Graph g = mlp_graph();
    edit(g);
    return g;
  };
  auto check = [&](const Graph& g, const std::string& text) {
    expect_error([&] { validate_graph(g); }, bad, text);
    expect_error([&] { encode_graph(g); }, bad, text);
  };
  check(with([](Graph& g) { g.variables[1].name = "x"; }), "two variables are named 'x'");
  check(with([](Graph& g) { g.variables[1].name = ""; }), "variable 1 has an empty name");
  check(with([](Graph& g) { g.variables[1].name = "bad\xFF"; }), "not valid UTF-8 (byte 3)");
  check(with([](Graph& g) { g.ops[1].name = "scale_x"; }), "two ops are named 'scale_x'");
  check(with([](Graph& g) { g.ops[1].type = ""; }), "op 'mm1' has an empty op type");
  check(with([](Graph& g) { g.ops[1].inputs[1] = "w9"; }),
        "op 'mm1' input 1 names 'w9', which is not a variable of the graph");
  check(with([](Graph& g) { g.ops[1].outputs[0] = "nothing"; }),
        "op 'mm1' output 0 names 'nothing'");
  check(with([](Graph& g) { g.ops[1].control_deps = {"ghost"}; }),
        "op 'mm1' control dependency 0 names 'ghost'");
  check(with([](Graph& g) { g.ops[1].outputs.push_back("w1"); }),
        "op 'mm1' output 1 is 'w1', a variable (op outputs are arrays or sequences)");
  check(with([](Graph& g) { g.ops[1].outputs[0] = "xs"; }),
        "variable 'xs' is an output of both op 'scale_x' and op 'mm1'");
  check(with([](Graph& g) { g.ops.pop_back(); }),
        "variable 'loss' is an array but no op produces it");
  check(with([](Graph& g) { g.ops[1].add_b_arg("transposeX", true); }),
        "op 'mm1' has two boolean arguments named 'transposeX'");
  check(with([](Graph& g) { g.ops[1].add_i_arg("", 1); }),
        "op 'mm1' integer argument 0 has an empty name");
  check(with([](Graph& g) { g.ops[1].add_d_arg("t", static_cast<DType>(2)); }),
        "data type argument 't' has unsupported value 2");
  check(with([](Graph& g) { g.ops[1].add_s_arg("s", "\xC0\x80"); }),
        "string argument 's' is not valid UTF-8");
  check(with([](Graph& g) { g.variables[3].shape = std::nullopt; }),
        "variable 'w1' is a variable and needs a known shape, but its rank is unknown");
  check(with([](Graph& g) { g.variables[2].shape = Shape{-1}; }),
        "variable 'scale' is a constant and needs a known shape, but dimension 0 is unknown");
  check(with([](Graph& g) {
          g.variables[0].shape = Shape{-2, 2};
        }),
        "variable 'x' has dimension 0 = -2");
  check(with([](Graph& g) { g.variables[0].kind = static_cast<VariableKind>(7); }),
        "variable 'x' has unknown kind 7");
  check(with([](Graph& g) { g.variables[0].dtype = static_cast<DType>(4); }),
        "variable 'x' has unsupported data type 4");
  check(with([](Graph& g) { g.outputs.push_back("y"); }), "graph output 1 repeats 'y'");
  check(with([](Graph& g) { g.loss_variables = {"lost"}; }),
        "loss variable 0 names 'lost', which is not a variable of the graph");
  // Rank above the limit is a limit error.
  Graph deep = with([](Graph& g) { g.variables[0].shape = Shape(65, 1); });
  expect_error([&] { validate_graph(deep); }, ErrorCode::limit_exceeded, "rank 65");
  Limits small;
  small.max_rank = 1;
  expect_error([&] { validate_graph(mlp_graph(), small); }, ErrorCode::limit_exceeded,
               "variable 'x' has rank 2, above the limit of 1");
}

TEST_CASE("Sequences may be produced by ops or fed; arrays only by one op") {
  Graph g;
  g.add_sequence("seq", DType::int32);
  g.add_sequence("made", DType::float32);
  g.add_placeholder("p", DType::utf8, std::nullopt);
  g.add_op("make", "create_list", {"p"}, {"made"});
  Graph d = decode_graph(encode_graph(g));
  CHECK(d == g);
  CHECK_FALSE(d.variables[0].shape.has_value());
  CHECK_FALSE(d.variables[0].has_value());
}

// find_variable, find_op and producer pointed into the Graph whatever it
// was: `auto op = load_graph(archive).find_op("fc"); op->inputs` read a
// graph destroyed at the end of the statement (AddressSanitizer:
// heap-use-after-free). On a temporary they return a copy (or nullopt) now.
TEST_CASE("Lookups in a temporary Graph return copies that outlive it") {
  auto make = [] { return decode_graph(encode_graph(mlp_graph())); };
  const Graph g = mlp_graph();
  REQUIRE(!g.ops.empty());
  const Op& first = g.ops.front();
  REQUIRE(!first.outputs.empty());
  const std::string output = first.outputs.front();
  auto op = make().find_op(first.name);
  REQUIRE(op);
  CHECK(*op == first);
  auto producer = make().producer(output);
  REQUIRE(producer);
  CHECK(producer->name == first.name);
  auto variable = make().find_variable(output);
  REQUIRE(variable);
  CHECK(variable->name == output);
  CHECK_FALSE(make().find_op("no such op"));
  CHECK_FALSE(make().find_variable("no such variable"));
  CHECK_FALSE(make().producer("no such variable"));
  // On a graph that lives, pointers into it, as before.
  static_assert(std::is_same_v<decltype(g.find_op("x")), const Op*>);
  static_assert(std::is_same_v<decltype(g.find_variable("x")), const Variable*>);
  static_assert(std::is_same_v<decltype(g.producer("x")), const Op*>);
  static_assert(std::is_same_v<decltype(make().find_op("x")), std::optional<Op>>);
  CHECK(g.find_op(first.name) == &first);
}
