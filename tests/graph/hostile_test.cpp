// Hostile graph.fb and trainingConfig.fb buffers: truncations, byte flips,
// garbage, and hand-built buffers that pass the FlatBuffers verifier but
// break a rule. Each must end in a clean Error or a valid value.
#include <doctest/doctest.h>

#include <flatbuffers/flatbuffers.h>

#include <limits>
#include <random>

#include "../hostile/hostile_archives.hpp"
#include "expect_error_text.hpp"
#include "graph_fixtures.hpp"
#include "graph_generated.h"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"
#include "training_generated.h"

using namespace modelzip;
using namespace modelzip::testing;
namespace fbs = modelzip::fb;

namespace {

Bytes finished(flatbuffers::FlatBufferBuilder& fbb) {
  return Bytes::copy_of(
      std::span(reinterpret_cast<const std::byte*>(fbb.GetBufferPointer()), fbb.GetSize()));
}

// A graph.fb with the given variables (built raw) and ops.
Bytes graph_buffer(flatbuffers::FlatBufferBuilder& fbb,
                   std::vector<flatbuffers::Offset<fbs::Variable>> vars,
                   std::vector<flatbuffers::Offset<fbs::Op>> ops = {},
                   std::uint32_t min_reader_version = 1) {
  auto v = fbb.CreateVector(vars);
  auto o = fbb.CreateVector(ops);
  fbs::GraphBuilder g(fbb);
  g.add_min_reader_version(min_reader_version);
  g.add_variables(v);
  g.add_ops(o);
  fbb.Finish(g.Finish(), fbs::GraphIdentifier());
  return finished(fbb);
}

flatbuffers::Offset<fbs::Variable> var(flatbuffers::FlatBufferBuilder& fbb, const char* name,
                                       fbs::VariableKind kind = fbs::VariableKind::ARRAY,
                                       fbs::DataType dtype = fbs::DataType::FLOAT) {
  return fbs::CreateVariableDirect(fbb, name, kind, dtype);
}

// A graph of one op `name` (type `type`) whose argument names and values,
// built from `names` and `values`, `set_args(op builder, names, values)` sets.
template <class T, class SetArgs>
Bytes graph_of_op_args(const char* name, const char* type, const std::vector<std::string>& names,
                       const std::vector<T>& values, SetArgs set_args) {
  flatbuffers::FlatBufferBuilder fbb;
  auto n = fbb.CreateVectorOfStrings(names);
  auto vals = fbb.CreateVector(values);
  auto op_name = fbb.CreateString(name);
  auto op_type = fbb.CreateString(type);
  fbs::OpBuilder ob(fbb);
  ob.add_name(op_name);
  ob.add_op_type(op_type);
  set_args(ob, n, vals);
  return graph_buffer(fbb, {}, {ob.Finish()});
}

// Every cut of `whole` (the encoding of `value`) fails with Error, but for
// cuts of trailing alignment padding, which decode to `value` itself.
template <class T, class Decode>
void check_truncations(const Bytes& whole, const T& value, Decode decode) {
  std::size_t decoded = 0;
  for (std::size_t n = 0; n < whole.size(); ++n) {
    Bytes cut = Bytes::copy_of(whole.span().first(n));
    try {
      T d = decode(cut);
      CHECK(d == value);
      ++decoded;
      CHECK(whole.size() - n < 8);  // only trailing padding
    } catch (const Error&) {
    }
  }
  CHECK(decoded < 8);
}

// Decoding either throws Error or yields a value that is valid.
template <class Decode, class Validate>
void error_or_valid(const Bytes& b, Decode decode, Validate validate) {
  try {
    auto value = decode(b);
    validate(value);
  } catch (const Error&) {
  }
}

TrainingConfig rich_config() {
  TrainingConfig c;
  c.updater = AmsGrad{0.01, 0.8, 0.99, 1e-7};
  c.learning_rate_schedule = ramp(CycleSchedule{ScheduleType::epoch, 0.1, 1, 10, 2, 0.5}, 5);
  c.regularization = {Regularization{RegularizationType::l2, MapSchedule{{}, {{0, 1}, {3, 2}}}},
                      Regularization{RegularizationType::weight_decay, FixedSchedule{0.1}, false}};
  c.feature_mapping = {"x"};
  c.label_mapping = {"label"};
  c.loss_variables = {"loss"};
  c.iteration_count = 10;
  c.properties = {{"seed", "1"}};
  return c;
}

}  // namespace

// FlatBuffers may end in alignment padding, so a cut that removes only
// padding still decodes -- to the very same value. Any other cut must fail.
TEST_CASE("Every truncation of graph.fb and trainingConfig.fb fails cleanly") {
  const Graph graph = mlp_graph();
  check_truncations(encode_graph(graph), graph, [](const Bytes& b) { return decode_graph(b); });
  const TrainingConfig config = rich_config();
  check_truncations(encode_training_config(config), config,
                    [](const Bytes& b) { return decode_training_config(b); });
}

TEST_CASE("Byte flips give an Error or a valid value, never a crash") {
  auto flip_all = [](const Bytes& original, auto decode, auto validate) {
    std::size_t errors = 0, valid = 0;
    for (std::size_t i = 0; i < original.size(); ++i) {
      for (std::uint8_t x : {0x01, 0x80, 0xFF, 0x10}) {
        std::vector<std::byte> v(original.span().begin(), original.span().end());
        v[i] ^= std::byte{x};
        Bytes b = Bytes::take(std::move(v));
        try {
          auto value = decode(b);
          validate(value);
          ++valid;
        } catch (const Error&) {
          ++errors;
        }
      }
    }
    CHECK(errors > 0);
    CHECK(valid > 0);  // e.g. a flipped scalar that is still in range
  };
  flip_all(
      encode_graph(mlp_graph()), [](const Bytes& b) { return decode_graph(b); },
      [](const Graph& g) { validate_graph(g); });
  flip_all(
      encode_training_config(rich_config()),
      [](const Bytes& b) { return decode_training_config(b); },
      [](const TrainingConfig& c) { validate_training_config(c); });
}

TEST_CASE("Random bytes behind a valid identifier fail cleanly") {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 2000; ++i) {
    Bytes r = random_bytes(rng, 9 + rng() % 200);
    std::vector<std::byte> v(r.span().begin(), r.span().end());
    const char* id = i % 2 ? "MZGR" : "MZTC";
    for (int k = 0; k < 4; ++k) v[4 + k] = static_cast<std::byte>(id[k]);
    // A root offset that lands inside the buffer half of the time.
    if (rng() % 2) {
      v[0] = static_cast<std::byte>(8 + rng() % std::min<std::size_t>(v.size() - 8, 200));
      v[1] = v[2] = v[3] = std::byte{0};
    }
    Bytes b = Bytes::take(std::move(v));
    if (i % 2)
      error_or_valid(
          b, [](const Bytes& x) { return decode_graph(x); },
          [](const Graph& g) { validate_graph(g); });
    else
      error_or_valid(
          b, [](const Bytes& x) { return decode_training_config(x); },
          [](const TrainingConfig& c) { validate_training_config(c); });
  }
}

TEST_CASE("Framing errors: size, identifier, verifier") {
  Bytes g = encode_graph(mlp_graph());
  expect_error([] { decode_graph(Bytes::copy_of(std::string("MZGR"))); }, ErrorCode::corrupt,
               "4 bytes are too short for a FlatBuffer");
  std::string swapped(g.as_string_view());
  swapped[4] = 'X';
  expect_error([&] { decode_graph(Bytes::copy_of(swapped)); }, ErrorCode::corrupt,
               "graph.fb: file identifier is not \"MZGR\"");
  // A config is not a graph.
  expect_error([] { decode_graph(encode_training_config({})); }, ErrorCode::corrupt,
               "file identifier is not");
  Limits small;
  small.max_flatbuffer_bytes = 64;
  expect_error([&] { decode_graph(g, small); }, ErrorCode::limit_exceeded,
               "bytes exceed the FlatBuffer limit of 64");
  Limits few_tables;
  few_tables.max_flatbuffer_tables = 5;
  expect_error([&] { decode_graph(g, few_tables); }, ErrorCode::corrupt, "fails verification");
  // A misaligned copy decodes (copied into aligned memory first).
  std::vector<std::byte> shifted(g.size() + 1);
  std::memcpy(shifted.data() + 1, g.data(), g.size());
  Bytes whole = Bytes::take(std::move(shifted));
  CHECK(decode_graph(whole.slice(1, g.size())) == mlp_graph());
  // A variable without its required name fails the verifier.
  flatbuffers::FlatBufferBuilder fbb;
  auto start = fbb.StartTable();  // raw: the generated builder asserts required fields
  fbb.AddElement<std::int8_t>(fbs::Variable::VT_KIND, 3, 0);
  auto nameless = flatbuffers::Offset<fbs::Variable>(fbb.EndTable(start));
  expect_error([&] { decode_graph(graph_buffer(fbb, {nameless})); }, ErrorCode::corrupt,
               "fails verification");
}

TEST_CASE("Graph buffers that verify but break a rule") {
  SUBCASE("newer reader version") {
    flatbuffers::FlatBufferBuilder fbb;
    Bytes b = graph_buffer(fbb, {}, {}, 2);
    expect_error([&] { decode_graph(b); }, ErrorCode::unsupported,
                 "graph.fb needs reader version 2; this version reads 1");
  }
  SUBCASE("unknown variable kind") {
    flatbuffers::FlatBufferBuilder fbb;
    Bytes b = graph_buffer(fbb, {var(fbb, "a", static_cast<fbs::VariableKind>(9))});
    expect_error([&] { decode_graph(b); }, ErrorCode::unsupported,
                 "variable 'a' has kind 9, which this version does not know");
  }
  SUBCASE("unknown value kind (a map from a newer writer)") {
    flatbuffers::FlatBufferBuilder fbb;
    auto name = fbb.CreateString("table");
    fbs::VariableBuilder vb(fbb);
    vb.add_name(name);
    vb.add_kind(fbs::VariableKind::CONSTANT);
    vb.add_value_kind(static_cast<fbs::ValueKind>(1));
    Bytes b = graph_buffer(fbb, {vb.Finish()});
    expect_error([&] { decode_graph(b); }, ErrorCode::unsupported,
                 "variable 'table' holds a value of kind 1");
  }
  SUBCASE("unsupported data type") {
    flatbuffers::FlatBufferBuilder fbb;
    Bytes b =
        graph_buffer(fbb, {var(fbb, "a", fbs::VariableKind::PLACEHOLDER, fbs::DataType::FLOAT8)});
    expect_error([&] { decode_graph(b); }, ErrorCode::unsupported,
                 "variable 'a' has data type 2, which this version does not support");
  }
  SUBCASE("unknown rank with dimensions") {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<std::int64_t> dims{3};
    auto v = fbs::CreateVariableDirect(fbb, "p", fbs::VariableKind::PLACEHOLDER,
                                       fbs::DataType::FLOAT, &dims, false);
    Bytes b = graph_buffer(fbb, {v});
    expect_error([&] { decode_graph(b); }, ErrorCode::corrupt,
                 "variable 'p' has an unknown rank but lists dimensions");
  }
  SUBCASE("rank above the limit") {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<std::int64_t> dims(100, 1);
    auto v = fbs::CreateVariableDirect(fbb, "p", fbs::VariableKind::PLACEHOLDER,
                                       fbs::DataType::FLOAT, &dims);
    Bytes b = graph_buffer(fbb, {v});
    expect_error([&] { decode_graph(b); }, ErrorCode::limit_exceeded,
                 "variable 'p' has rank 100, above the limit of 64");
  }
  SUBCASE("argument names and values of different lengths") {
    Bytes b = graph_of_op_args("op", "t", {"a", "b"}, std::vector<std::int64_t>{1},
                               [](fbs::OpBuilder& ob, auto names, auto values) {
                                 ob.add_i_arg_names(names);
                                 ob.add_i_args(values);
                               });
    expect_error([&] { decode_graph(b); }, ErrorCode::corrupt,
                 "op 'op' has 2 i_args names but 1 values");
  }
  SUBCASE("data type argument of an unknown type") {
    Bytes b = graph_of_op_args("cast", "cast", {"dt"},
                               std::vector<fbs::DataType>{static_cast<fbs::DataType>(99)},
                               [](fbs::OpBuilder& ob, auto names, auto values) {
                                 ob.add_d_arg_names(names);
                                 ob.add_d_args(values);
                               });
    expect_error([&] { decode_graph(b); }, ErrorCode::unsupported,
                 "op 'cast' data type argument 'dt' has data type 99");
  }
  SUBCASE("op input naming no variable") {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<flatbuffers::String>> inputs{fbb.CreateString("a"),
                                                                 fbb.CreateString("ghost")};
    auto op = fbs::CreateOpDirect(fbb, "add", "add", &inputs);
    Bytes b = graph_buffer(fbb, {var(fbb, "a", fbs::VariableKind::PLACEHOLDER)}, {op});
    expect_error([&] { decode_graph(b); }, ErrorCode::corrupt,
                 "op 'add' input 1 names 'ghost', which is not a variable of the graph");
  }
  SUBCASE("invalid UTF-8 in a name") {
    flatbuffers::FlatBufferBuilder fbb;
    Bytes b = graph_buffer(fbb, {var(fbb, "ok\xED\xA0\x80", fbs::VariableKind::PLACEHOLDER)});
    expect_error([&] { decode_graph(b); }, ErrorCode::corrupt,
                 "variable 0 name is not valid UTF-8 (byte 2)");
  }
  SUBCASE("a constant without a known shape") {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<std::int64_t> dims{-1};
    auto v = fbs::CreateVariableDirect(fbb, "c", fbs::VariableKind::CONSTANT, fbs::DataType::FLOAT,
                                       &dims);
    Bytes b = graph_buffer(fbb, {v});
    expect_error([&] { decode_graph(b); }, ErrorCode::corrupt,
                 "variable 'c' is a constant and needs a known shape");
  }
}

TEST_CASE("Fields from a newer writer are ignored by this reader") {
  // A newer graph.fbs adds Variable field id 6 (a long) and Graph field id 5
  // (a string); a newer training.fbs adds TrainingConfig field id 15. Built
  // raw with the vtable slots those ids get (4 + 2 * id).
  flatbuffers::FlatBufferBuilder fbb;
  auto name = fbb.CreateString("w");
  std::vector<std::int64_t> dims{2};
  auto shape = fbb.CreateVector(dims);
  auto start = fbb.StartTable();
  fbb.AddOffset(fbs::Variable::VT_NAME, name);
  fbb.AddOffset(fbs::Variable::VT_SHAPE, shape);
  fbb.AddElement<std::int8_t>(fbs::Variable::VT_KIND, 3, 0);  // placeholder
  fbb.AddElement<std::int64_t>(4 + 2 * 6, 123456789, 0);
  auto v = flatbuffers::Offset<fbs::Variable>(fbb.EndTable(start));
  auto vars = fbb.CreateVector(std::vector{v});
  auto future = fbb.CreateString("something new");
  auto groot = fbb.StartTable();
  fbb.AddOffset(fbs::Graph::VT_VARIABLES, vars);
  fbb.AddOffset(4 + 2 * 5, future);
  fbb.Finish(flatbuffers::Offset<fbs::Graph>(fbb.EndTable(groot)), fbs::GraphIdentifier());
  Graph g = decode_graph(finished(fbb));
  REQUIRE(g.variables.size() == 1);
  CHECK(g.variables[0].name == "w");
  CHECK(g.variables[0].kind == VariableKind::placeholder);
  CHECK(g.variables[0].dtype == DType::float32);  // the schema default
  CHECK(g.variables[0].shape == Shape{2});

  flatbuffers::FlatBufferBuilder cb;
  auto adam = fbs::CreateAdam(cb, 0.5);
  auto croot = cb.StartTable();
  cb.AddElement<std::uint8_t>(fbs::TrainingConfig::VT_UPDATER_TYPE,
                              static_cast<std::uint8_t>(fbs::Updater::Adam), 0);
  cb.AddOffset(fbs::TrainingConfig::VT_UPDATER, adam.Union());
  cb.AddElement<double>(4 + 2 * 15, 3.5, 0);
  cb.Finish(flatbuffers::Offset<fbs::TrainingConfig>(cb.EndTable(croot)),
            fbs::TrainingConfigIdentifier());
  TrainingConfig c = decode_training_config(finished(cb));
  CHECK(std::get<Adam>(c.updater).learning_rate == 0.5);
  CHECK(std::get<Adam>(c.updater).beta2 == 0.999);  // default of the absent field
  CHECK(c.minimize);
  CHECK(c.iteration_count == 0);
}

TEST_CASE("Config buffers that verify but break a rule") {
  auto config = [](auto&& fill) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.ForceDefaults(true);
    fill(fbb);
    return finished(fbb);
  };
  auto with_updater = [](flatbuffers::FlatBufferBuilder& fbb, fbs::Updater type,
                         flatbuffers::Offset<void> table, auto&& more) {
    fbs::TrainingConfigBuilder b(fbb);
    b.add_updater_type(type);
    if (!table.IsNull()) b.add_updater(table);
    more(b);
    fbb.Finish(b.Finish(), fbs::TrainingConfigIdentifier());
  };
  auto nothing = [](fbs::TrainingConfigBuilder&) {};

  expect_error(
      [&] {
        decode_training_config(
            config([&](auto& fbb) { with_updater(fbb, fbs::Updater::NONE, 0, nothing); }));
      },
      ErrorCode::corrupt, "trainingConfig.fb has no updater");
  expect_error(
      [&] {
        decode_training_config(
            config([&](auto& fbb) { with_updater(fbb, fbs::Updater::Adam, 0, nothing); }));
      },
      ErrorCode::corrupt, "updater type 3 has no parameter table");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateSgd(fbb).Union();
          with_updater(fbb, static_cast<fbs::Updater>(50), t, nothing);
        }));
      },
      ErrorCode::unsupported, "updater type 50 is not known to this version");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateAdam(fbb, std::nan("")).Union();
          with_updater(fbb, fbs::Updater::Adam, t, nothing);
        }));
      },
      ErrorCode::corrupt, "updater Adam learning_rate is not finite");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateSgd(fbb).Union();
          with_updater(fbb, fbs::Updater::Sgd, t, [](auto& b) { b.add_min_reader_version(3); });
        }));
      },
      ErrorCode::unsupported, "trainingConfig.fb needs reader version 3");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateSgd(fbb).Union();
          auto s = fbs::CreateStepSchedule(fbb, static_cast<fbs::ScheduleType>(7)).Union();
          with_updater(fbb, fbs::Updater::Sgd, t, [&](auto& b) {
            b.add_learning_rate_schedule_type(fbs::Schedule::StepSchedule);
            b.add_learning_rate_schedule(s);
          });
        }));
      },
      ErrorCode::unsupported, "learning-rate schedule has schedule type 7");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateSgd(fbb).Union();
          auto s = fbs::CreateFixedSchedule(fbb, 1).Union();
          with_updater(fbb, fbs::Updater::Sgd, t, [&](auto& b) {
            b.add_learning_rate_schedule_type(static_cast<fbs::Schedule>(77));
            b.add_learning_rate_schedule(s);
          });
        }));
      },
      ErrorCode::unsupported, "learning-rate schedule is schedule kind 77");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateSgd(fbb).Union();
          auto s = fbs::CreateFixedSchedule(fbb, 1).Union();
          with_updater(fbb, fbs::Updater::Sgd, t, [&](auto& b) {
            b.add_learning_rate_schedule_type(fbs::Schedule::NONE);
            b.add_learning_rate_schedule(s);
          });
        }));
      },
      ErrorCode::corrupt, "learning-rate schedule has no schedule");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateSgd(fbb).Union();
          auto r = fbs::CreateRegularization(fbb, static_cast<fbs::RegularizationType>(9));
          auto regs = fbb.CreateVector(std::vector{r});
          with_updater(fbb, fbs::Updater::Sgd, t, [&](auto& b) { b.add_regularization(regs); });
        }));
      },
      ErrorCode::unsupported, "regularization 0 has type 9");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateSgd(fbb).Union();
          std::vector<flatbuffers::Offset<fbs::Property>> props{
              fbs::CreatePropertyDirect(fbb, "k", "1"), fbs::CreatePropertyDirect(fbb, "k", "2")};
          auto p = fbb.CreateVector(props);
          with_updater(fbb, fbs::Updater::Sgd, t, [&](auto& b) { b.add_properties(p); });
        }));
      },
      ErrorCode::corrupt, "property 'k' appears twice");
  expect_error(
      [&] {
        decode_training_config(config([&](auto& fbb) {
          auto t = fbs::CreateSgd(fbb).Union();
          with_updater(fbb, fbs::Updater::Sgd, t, [&](auto& b) { b.add_epoch_count(-3); });
        }));
      },
      ErrorCode::corrupt, "epoch_count -3 is negative");
  // Ramps nested 20 deep: within the verifier's depth, beyond the rules'.
  auto nested = [&](int depth, flatbuffers::FlatBufferBuilder& fbb) {
    auto inner = fbs::CreateFixedSchedule(fbb, 1).Union();
    auto type = fbs::Schedule::FixedSchedule;
    for (int i = 0; i < depth; ++i) {
      inner = fbs::CreateRampSchedule(fbb, type, inner, 1).Union();
      type = fbs::Schedule::RampSchedule;
    }
    auto t = fbs::CreateSgd(fbb).Union();
    with_updater(fbb, fbs::Updater::Sgd, t, [&](auto& b) {
      b.add_learning_rate_schedule_type(type);
      b.add_learning_rate_schedule(inner);
    });
  };
  expect_error([&] { decode_training_config(config([&](auto& fbb) { nested(20, fbb); })); },
               ErrorCode::corrupt, "nests schedules more than 16 deep");
  // 200 deep: the verifier's depth limit stops it before any recursion.
  expect_error([&] { decode_training_config(config([&](auto& fbb) { nested(200, fbb); })); },
               ErrorCode::corrupt, "fails verification");
  CHECK_NOTHROW(decode_training_config(config([&](auto& fbb) { nested(10, fbb); })));
}

// The verifier of FlatBuffers 2.0.8 checks only the 4-byte alignment of a
// vector's length, not its 8-byte elements; a flipped offset can move a
// [double] or [long] to a 4-aligned address. The decoder must refuse it
// instead of reading misaligned (found by UBSan on the byte-flip test).
TEST_CASE("Vectors of 8-byte elements at 4-aligned addresses are refused") {
  Bytes g = encode_graph(mlp_graph());
  std::size_t misaligned = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    for (std::uint8_t x : {0x04, 0x0C, 0xFC, 0xF4}) {
      std::vector<std::byte> v(g.span().begin(), g.span().end());
      v[i] ^= std::byte{x};
      try {
        (void)decode_graph(Bytes::take(std::move(v)));
      } catch (const Error& e) {
        if (e.message().find("vector elements are not 8-byte aligned") != std::string::npos)
          ++misaligned;
      }
    }
  }
  CHECK(misaligned > 0);
}

TEST_CASE("verify reports every broken rule of a graph.fb and a trainingConfig.fb that decode") {
  flatbuffers::FlatBufferBuilder gb;
  std::vector<std::int64_t> unknown{-1};
  std::vector<flatbuffers::Offset<flatbuffers::String>> ghost{gb.CreateString("ghost")},
      into_a{gb.CreateString("a")};
  Bytes graph = graph_buffer(
      gb,
      {var(gb, "a", fbs::VariableKind::PLACEHOLDER), var(gb, "a", fbs::VariableKind::PLACEHOLDER),
       fbs::CreateVariableDirect(gb, "c", fbs::VariableKind::CONSTANT, fbs::DataType::FLOAT,
                                 &unknown),
       var(gb, "arr")},
      {fbs::CreateOpDirect(gb, "add", "add", &ghost),
       fbs::CreateOpDirect(gb, "add", "add", nullptr, &into_a)});

  flatbuffers::FlatBufferBuilder cb;
  auto sgd = fbs::CreateSgd(cb, -1).Union();
  auto regs = cb.CreateVector(std::vector{fbs::CreateRegularization(
      cb, fbs::RegularizationType::L2, std::numeric_limits<double>::quiet_NaN())});
  auto losses = cb.CreateVectorOfStrings(std::vector<std::string>{""});
  fbs::TrainingConfigBuilder b(cb);
  b.add_updater_type(fbs::Updater::Sgd);
  b.add_updater(sgd);
  b.add_regularization(regs);
  b.add_loss_variables(losses);
  b.add_iteration_count(-1);
  b.add_epoch_count(-2);
  cb.Finish(b.Finish(), fbs::TrainingConfigIdentifier());
  Bytes config = finished(cb);

  ZipSpec spec = minimal_archive();
  set_entry(spec, "t1/graph.fb", std::string(graph.as_string_view()));
  set_entry(spec, "t1/trainingConfig.fb", std::string(config.as_string_view()));
  std::vector<std::string> got;
  for (const Problem& p :
       Archive::from_memory(Bytes::copy_of(build_zip(spec).bytes), "g.zip").verify())
    got.push_back(p.entry + ": " + p.message);
  CHECK(got == std::vector<std::string>{
                   "t1/graph.fb: two variables are named 'a'",
                   "t1/graph.fb: variable 'c' is a constant and needs a known shape, but "
                   "dimension 0 is unknown",
                   "t1/graph.fb: op 'add' input 0 names 'ghost', which is not a variable of the "
                   "graph",
                   "t1/graph.fb: two ops are named 'add'",
                   "t1/graph.fb: op 'add' output 0 is 'a', a placeholder (op outputs are arrays "
                   "or sequences)",
                   "t1/graph.fb: variable 'arr' is an array but no op produces it",
                   "t1/trainingConfig.fb: updater Sgd learning_rate = -1.000000 is negative",
                   "t1/trainingConfig.fb: regularization 0 coefficient (FixedSchedule) value is "
                   "not finite",
                   "t1/trainingConfig.fb: loss variable 0 is empty",
                   "t1/trainingConfig.fb: iteration_count -1 is negative",
                   "t1/trainingConfig.fb: epoch_count -2 is negative",
               });
  // Loading still throws the first.
  expect_error([&] { decode_graph(graph); }, ErrorCode::corrupt, "two variables are named 'a'");
  expect_error([&] { decode_training_config(config); }, ErrorCode::corrupt,
               "updater Sgd learning_rate = -1.000000 is negative");
}
