// Interoperability with flatc and our schemas: flatc decodes graph.fb and
// trainingConfig.fb to JSON, compiles JSON written by hand (or by an older
// or newer schema) into buffers that our decoder reads.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "graph_fixtures.hpp"
#include "modelzip/error.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;
namespace fs = std::filesystem;

namespace {

std::string flatc() {
  const char* p = std::getenv("MODELZIP_FLATC");
  return p ? p : "flatc";
}

fs::path schemas_dir() {
  return tests_dir() / ".." / "schemas";
}

void write_bytes(const fs::path& path, const Bytes& b) {
  write_file(path, std::string(b.as_string_view()));
}

// Runs flatc with `args`; requires success.
void run_flatc(const std::string& args) {
  std::string cmd = flatc() + " " + args + " 2>&1";
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

// flatc --json of `buffer` with `schema`; returns the JSON text.
std::string to_json(const TempDir& dir, const fs::path& schema, const Bytes& buffer,
                    const std::string& name) {
  write_bytes(dir / (name + ".fb"), buffer);
  run_flatc("--json --strict-json --raw-binary -o " + dir.path().string() + " " + schema.string() +
            " -- " + (dir / (name + ".fb")).string());
  std::string json = io_bytes(dir / (name + ".json"));
  REQUIRE_FALSE(json.empty());
  return json;
}

// flatc -b of JSON `text` with `schema`; returns the binary buffer.
Bytes from_json(const TempDir& dir, const fs::path& schema, const std::string& text,
                const std::string& name) {
  write_file(dir / (name + ".json"), text);
  run_flatc("-b -o " + dir.path().string() + " " + schema.string() + " " +
            (dir / (name + ".json")).string());
  std::string bin = io_bytes(dir / (name + ".fb"));  // the schemas' file_extension
  REQUIRE(bin.size() > 8);
  return Bytes::copy_of(bin);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("flatc decodes graph.fb with schemas/graph.fbs") {
  TempDir dir;
  Graph g = mlp_graph();
  std::string json = to_json(dir, schemas_dir() / "graph.fbs", encode_graph(g), "graph");
  CHECK(contains(json, "\"min_reader_version\": 1"));
  CHECK(contains(json, "\"name\": \"w1\""));
  CHECK(contains(json, "\"kind\": \"PLACEHOLDER\""));
  CHECK(contains(json, "\"kind\": \"CONSTANT\""));
  CHECK(contains(json, "\"dtype\": \"FLOAT\""));
  CHECK(contains(json, "\"rank_known\": false"));
  CHECK(contains(json, "\"op_type\": \"reduce_mean\""));
  CHECK(contains(json, "\"i_arg_names\": ["));
  CHECK(contains(json, "\"dimensions\""));
  CHECK(contains(json, "\"d_args\": [\n        \"FLOAT\""));
  CHECK(contains(json, "\"loss_variables\": [\n    \"loss\""));
  // And the JSON compiles back into a buffer that decodes to the same graph:
  // flatc and our codec agree on every field.
  Bytes again = from_json(dir, schemas_dir() / "graph.fbs", json, "graph2");
  CHECK(decode_graph(again) == g);
}

TEST_CASE("flatc decodes trainingConfig.fb with schemas/training.fbs") {
  TempDir dir;
  TrainingConfig c;
  c.updater = Nesterovs{0.25, 0.5};
  c.learning_rate_schedule = ramp(StepSchedule{ScheduleType::epoch, 0.5, 0.25, 2}, 4);
  c.regularization = {
      Regularization{RegularizationType::weight_decay, FixedSchedule{0.125}, false}};
  c.feature_mapping = {"x"};
  c.label_mapping = {"label"};
  c.iteration_count = 12;
  c.epoch_count = 3;
  c.properties = {{"seed", "42"}};
  std::string json = to_json(dir, schemas_dir() / "training.fbs", encode_training_config(c), "tc");
  CHECK(contains(json, "\"updater_type\": \"Nesterovs\""));
  CHECK(contains(json, "\"momentum\": 0.5"));
  CHECK(contains(json, "\"learning_rate_schedule_type\": \"RampSchedule\""));
  CHECK(contains(json, "\"base_type\": \"StepSchedule\""));
  CHECK(contains(json, "\"type\": \"EPOCH\""));
  CHECK(contains(json, "\"type\": \"WEIGHT_DECAY\""));
  CHECK(contains(json, "\"apply_learning_rate\": false"));
  CHECK(contains(json, "\"iteration_count\": 12"));
  CHECK(contains(json, "\"key\": \"seed\""));
  Bytes again = from_json(dir, schemas_dir() / "training.fbs", json, "tc2");
  CHECK(decode_training_config(again) == c);
}

TEST_CASE("A graph written by hand in JSON decodes as written") {
  TempDir dir;
  Bytes b = from_json(dir, schemas_dir() / "graph.fbs", R"({
    "variables": [
      {"name": "in", "kind": "PLACEHOLDER", "shape": [-1, 4]},
      {"name": "k", "dtype": "HALF", "shape": [4, 4]},
      {"name": "ids", "kind": "PLACEHOLDER", "dtype": "INT64", "rank_known": false},
      {"name": "out", "kind": "ARRAY"}
    ],
    "ops": [
      {"name": "mm", "op_type": "matmul", "inputs": ["in", "k"], "outputs": ["out"],
       "control_deps": ["ids"],
       "t_arg_names": ["alpha"], "t_args": [0.5],
       "s_args": [{"name": "mode", "value": "fast"}]}
    ],
    "outputs": ["out"]
  })",
                      "hand");
  Graph g = decode_graph(b);
  REQUIRE(g.variables.size() == 4);
  CHECK(g.variables[0].kind == VariableKind::placeholder);
  CHECK(g.variables[0].dtype == DType::float32);  // schema default
  CHECK(g.variables[0].shape == Shape{-1, 4});
  CHECK(g.variables[1].kind == VariableKind::variable);  // schema default
  CHECK(g.variables[1].dtype == DType::float16);
  CHECK(g.variables[2].dtype == DType::int64);
  CHECK_FALSE(g.variables[2].shape.has_value());
  CHECK(g.variables[3].shape == Shape{});  // scalar by default
  REQUIRE(g.ops.size() == 1);
  CHECK(g.ops[0].control_deps == std::vector<std::string>{"ids"});
  CHECK(g.ops[0].t_arg("alpha") == 0.5);
  CHECK(g.ops[0].s_arg("mode") == "fast");
  CHECK(g.outputs == std::vector<std::string>{"out"});
  CHECK(g.loss_variables.empty());
}

TEST_CASE("A config from an older writer (few fields) reads with the schema defaults") {
  TempDir dir;
  Bytes b = from_json(dir, schemas_dir() / "training.fbs",
                      R"({"updater_type": "Adam", "updater": {"learning_rate": 0.01}})", "old");
  TrainingConfig c = decode_training_config(b);
  const auto& adam = std::get<Adam>(c.updater);
  CHECK(adam.learning_rate == 0.01);
  CHECK(adam.beta1 == 0.9);
  CHECK(adam.beta2 == 0.999);
  CHECK(adam.epsilon == 1e-8);
  CHECK(c.minimize);
  CHECK_FALSE(c.learning_rate_schedule.has_value());
  CHECK(c.regularization.empty());
  CHECK(c.iteration_count == 0);
  CHECK(c.epoch_count == 0);

  Bytes rms = from_json(dir, schemas_dir() / "training.fbs",
                        R"({"updater_type": "RmsProp", "updater": {},
                            "regularization": [{"type": "WEIGHT_DECAY", "coefficient": 0.5}]})",
                        "rms");
  TrainingConfig r = decode_training_config(rms);
  CHECK(std::get<RmsProp>(r.updater) == RmsProp{0.1, 0.95, 1e-8});
  REQUIRE(r.regularization.size() == 1);
  CHECK(r.regularization[0].type == RegularizationType::weight_decay);
  CHECK(std::get<FixedSchedule>(r.regularization[0].coefficient).value == 0.5);
  CHECK(r.regularization[0].apply_learning_rate);  // default true
}

TEST_CASE("Buffers of a newer schema (added fields) still read") {
  TempDir dir;
  // A future graph.fbs: a new Variable field and a new Graph field, appended
  // with the next ids as the evolution rules require.
  std::string schema = io_bytes(schemas_dir() / "graph.fbs");
  auto add_field = [&](const std::string& anchor, const std::string& field) {
    auto at = schema.find(anchor);
    REQUIRE(at != std::string::npos);
    schema.insert(at + anchor.size(), field);
  };
  add_field("value_kind: ValueKind = TENSOR (id: 5);\n", "  initializer: string (id: 6);\n");
  add_field("loss_variables: [string] (id: 4);\n", "  producer_tool: string (id: 5);\n");
  write_file(dir / "graph.fbs", schema);
  write_file(dir / "tensor.fbs", io_bytes(schemas_dir() / "tensor.fbs"));
  Bytes b = from_json(dir, dir / "graph.fbs", R"({
    "variables": [{"name": "w", "shape": [3], "initializer": "xavier"}],
    "producer_tool": "modelzip 9"
  })",
                      "future");
  Graph g = decode_graph(b);
  REQUIRE(g.variables.size() == 1);
  CHECK(g.variables[0].name == "w");
  CHECK(g.variables[0].shape == Shape{3});
}
