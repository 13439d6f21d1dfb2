// Renderings for `modelzip graph` and `modelzip info`: exact expected text
// written by hand, and JSON that Python's json module accepts.
#include <doctest/doctest.h>

#include <cstdlib>

#include "graph/render.hpp"
#include "graph_fixtures.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/checkpoint.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

Graph small_graph() {
  Graph g;
  g.add_placeholder("x", DType::float32, Shape{-1, 2});
  g.add_variable("w", DType::float32, {2, 1});
  g.add_array("y", DType::float32, std::nullopt);
  g.add_op("mm", "matmul", {"x", "w"}, {"y"})
      .add_i_arg("axis", -1)
      .add_t_arg("alpha", 0.5)
      .add_b_arg("tx", true)
      .add_d_arg("out", DType::int64)
      .add_s_arg("mode", "a\"b");
  g.ops[0].control_deps = {"w"};
  g.outputs = {"y"};
  g.loss_variables = {"y"};
  return g;
}

// Parses `json` with Python's json module (strict RFC 8259).
bool python_accepts_json(const TempDir& dir, const std::string& json) {
  auto path = dir / "doc.json";
  write_file(path, json);
  std::string cmd =
      "/usr/bin/python3 -c \"import json,sys; json.load(open(sys.argv[1]))\" " + path.string();
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST_CASE("graph_json") {
  const std::string expected = R"({
  "variables": [
    {"name": "x", "kind": "placeholder", "dtype": "float32", "shape": [-1, 2]},
    {"name": "w", "kind": "variable", "dtype": "float32", "shape": [2, 1]},
    {"name": "y", "kind": "array", "dtype": "float32", "shape": null}
  ],
  "ops": [
    {
      "name": "mm",
      "type": "matmul",
      "inputs": ["x", "w"],
      "outputs": ["y"],
      "control_deps": ["w"],
      "i_args": {"axis": -1},
      "t_args": {"alpha": 0.5},
      "b_args": {"tx": true},
      "d_args": {"out": "int64"},
      "s_args": {"mode": "a\"b"}
    }
  ],
  "outputs": ["y"],
  "loss_variables": ["y"]
}
)";
  CHECK(graph::graph_json(small_graph()) == expected);
  CHECK(graph::graph_json(Graph{}) ==
        "{\n  \"variables\": [],\n  \"ops\": [],\n  \"outputs\": [],\n  \"loss_variables\": "
        "[]\n}\n");
  Graph odd;
  odd.add_placeholder("nan\n\x01", DType::bool_, std::nullopt);
  odd.add_op("o", "t", {"nan\n\x01"}, {}).add_t_arg("n", std::nan("")).add_t_arg("i", -INFINITY);
  std::string j = graph::graph_json(odd);
  CHECK(j.find(R"("name": "nan\n\u0001")") != std::string::npos);
  CHECK(j.find(R"("t_args": {"n": "NaN", "i": "-Infinity"})") != std::string::npos);
  TempDir dir;
  CHECK(python_accepts_json(dir, j));
  CHECK(python_accepts_json(dir, graph::graph_json(mlp_graph())));
}

TEST_CASE("graph_dot") {
  const std::string expected = R"(digraph modelzip_graph {
  rankdir=TB;
  node [fontname="Helvetica", fontsize=10];
  edge [fontname="Helvetica", fontsize=9];
  "v:x" [label="x\nplaceholder float32 [?, 2]", shape=ellipse, style=filled, fillcolor="#fff3cd"];
  "v:w" [label="w\nvariable float32 [2, 1]", shape=ellipse, style=filled, fillcolor="#cfe2ff"];
  "v:y" [label="y\narray float32 ?", shape=ellipse, peripheries=2, color=red];
  "op:mm" [label="mm\nmatmul", shape=box, style=rounded];
  "v:x" -> "op:mm" [label="0"];
  "v:w" -> "op:mm" [label="1"];
  "v:w" -> "op:mm" [style=dashed];
  "op:mm" -> "v:y";
}
)";
  CHECK(graph::graph_dot(small_graph()) == expected);
  // Quotes, backslashes and line breaks in names cannot break out of a string.
  Graph g;
  g.add_constant("a\"b\\c\nd", DType::int8, {1});
  std::string dot = graph::graph_dot(g);
  CHECK(dot.find(R"("v:a\"b\\c\nd" [label="a\"b\\c\nd\nconstant int8 [1]", shape=ellipse, )"
                 R"(style=filled, fillcolor="#e2e3e5"];)") != std::string::npos);
}

TEST_CASE("training_config_json and training_config_text") {
  TrainingConfig c;
  c.learning_rate_schedule = ramp(MapSchedule{ScheduleType::epoch, {{0, 0.5}, {2, 0.25}}}, 3);
  c.regularization = {Regularization{RegularizationType::weight_decay, FixedSchedule{0.01}, false}};
  c.feature_mapping = {"x"};
  c.properties["seed"] = "7";
  const std::string expected_json = R"({
  "updater": {"type": "Adam", "learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-08},
  "learning_rate_schedule": {"schedule": "RampSchedule", "num_iterations": 3, "base": {"schedule": "MapSchedule", "type": "epoch", "steps": [{"start": 0, "value": 0.5}, {"start": 2, "value": 0.25}]}},
  "regularization": [
    {"type": "weight_decay", "coefficient": {"schedule": "FixedSchedule", "value": 0.01}, "apply_learning_rate": false}
  ],
  "minimize": true,
  "feature_mapping": ["x"],
  "label_mapping": [],
  "feature_mask_mapping": [],
  "label_mask_mapping": [],
  "loss_variables": [],
  "iteration_count": 0,
  "epoch_count": 0,
  "properties": {
    "seed": "7"
  }
}
)";
  CHECK(graph::training_config_json(c) == expected_json);
  const std::string expected_text =
      "updater: Adam (learning_rate 0.001, beta1 0.9, beta2 0.999, epsilon 1e-08)\n"
      "learning-rate schedule: RampSchedule(num_iterations=3, base=MapSchedule(epoch, "
      "steps={0: 0.5, 2: 0.25}))\n"
      "regularization: weight_decay 0.01 (not times the learning rate)\n"
      "minimize; iteration 0, epoch 0\n"
      "features: x\n"
      "property seed = 7\n";
  CHECK(graph::training_config_text(c) == expected_text);
  TempDir dir;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20; ++i) {
    std::string j = graph::training_config_json(random_config(rng));
    REQUIRE(python_accepts_json(dir, j));
  }
}

TEST_CASE("training config rendering: integer fields print as integers, doubles as doubles") {
  TrainingConfig c;
  c.updater = Sgd{100};
  c.learning_rate_schedule = CycleSchedule{ScheduleType::epoch, 0.1, 1, 100, 20, 0.5};
  const std::string json = graph::training_config_json(c);
  // %g would print 1e+02 and 1e+01, which JSON readers take as floats.
  CHECK(json.find(R"("cycle_length": 100, "annealing_length": 20)") != std::string::npos);
  CHECK(json.find(R"("learning_rate": 1e+02})") != std::string::npos);  // a double: stays one
  CHECK(graph::training_config_text(c).find("cycle_length=100, annealing_length=20") !=
        std::string::npos);
  c.learning_rate_schedule = PolySchedule{ScheduleType::iteration, 1, 2, 9007199254740993};
  CHECK(graph::training_config_json(c).find(R"("max_iterations": 9007199254740993})") !=
        std::string::npos);  // 2^53 + 1: exact, no detour through a double
}

TEST_CASE("Tag summaries count params, shared bytes, updater state, graph and config") {
  TempDir dir;
  auto path = dir / "ckpt.zip";
  Checkpoint c;
  c.graph = mlp_graph();
  TrainingConfig t;
  t.iteration_count = 2;
  c.training = t;
  auto zeros = [](Shape s) { return f32_tensor(s, std::vector<float>(shape_numel(s), 0.0f)); };
  c.params = {{"scale", zeros({2})},
              {"w1", zeros({2, 3})},
              {"b1", zeros({3})},
              {"w2", zeros({3, 1})},
              {"b2", zeros({1})}};
  for (const char* v : {"w1", "b1", "w2", "b2"})
    c.updater_state[v] = {{"M", c.params[v]}, {"V", c.params[v]}};
  {
    WriterOptions wo;
    wo.dedup = false;  // only the explicit share below
    Writer w = Writer::open(path, wo);
    Metadata m;
    m.model_name = "mlp";
    w.update_metadata([m](Metadata& current) { current = m; });
    w.add_tag("step-1", checkpoint_tag(c));
    w.commit();
    c.params["w1"] = f32_tensor({2, 3}, {1, 2, 3, 4, 5, 6});
    CheckpointSaveOptions o;
    o.share_from_tag = "step-1";
    o.unchanged_params = {"scale"};
    w.add_tag("step-2", checkpoint_tag(c, o));
    w.commit();
  }
  Archive a = Archive::open(path);
  std::string j = graph::tag_summary_json(a);
  INFO(j);
  // Bytes by hand: scale 2*4, w1 6*4, b1 3*4, w2 3*4, b2 1*4 = 60; scale
  // (8 bytes) is shared. Updater: M and V of w1, b1, w2, b2 = 2 * 52 = 104.
  CHECK(j.find("\"tag\": \"step-2\"") != std::string::npos);
  CHECK(j.find("\"position\": 2,\n  \"tags\": 2,\n  \"newest\": true") != std::string::npos);
  CHECK(j.find("\"model_name\": \"mlp\"") != std::string::npos);
  CHECK(j.find("\"params\": {\n    \"count\": 5,\n    \"shared\": 1,\n    \"compressed\": 0,\n"
               "    \"bytes\": 60,\n    \"own_bytes\": 52,\n    \"dtypes\": {\"float32\": 5}") !=
        std::string::npos);
  CHECK(j.find("\"count\": 8,\n    \"variables\": 4,\n    \"states\": [\"M\", \"V\"],\n"
               "    \"shared\": 0,\n    \"compressed\": 0,\n    \"bytes\": 104") !=
        std::string::npos);
  CHECK(j.find("\"variables\": 16,\n    \"kinds\": {\"array\": 9, \"constant\": 1, "
               "\"placeholder\": 2, \"variable\": 4},\n    \"ops\": 9") != std::string::npos);
  CHECK(j.find("\"matmul\": 2") != std::string::npos);
  CHECK(j.find("\"iteration_count\": 2") != std::string::npos);
  CHECK(python_accepts_json(dir, j));
  CHECK(python_accepts_json(dir, graph::tag_summary_json(a, "step-1")));

  std::string text = graph::tag_summary_text(a, "step-2");
  INFO(text);
  CHECK(text.find("tag       step-2 (2 of 2, newest)\n") != std::string::npos);
  CHECK(text.find("params    5 (4 own, 1 shared), 60 B (52 B in this tag); 5 float32\n") !=
        std::string::npos);
  CHECK(text.find("updater   8 (8 own, 0 shared), 104 B; 8 float32; 4 variables, states M, V\n") !=
        std::string::npos);
  CHECK(
      text.find("graph     16 variables (9 array, 1 constant, 2 placeholder, 4 variable), 9 ops") !=
      std::string::npos);
  CHECK(text.find("          loss: loss\n") != std::string::npos);
  CHECK(text.find("training  updater: Adam (learning_rate 0.001") != std::string::npos);
  CHECK(text.find("          minimize; iteration 2, epoch 0\n") != std::string::npos);

  // A plain tag (no graph, no config, no updater) still summarizes.
  {
    Writer w = Writer::open(path);
    NewTag plain;
    plain.add("v", f32_tensor({1}, {1}));
    w.add_tag("plain", std::move(plain));
    w.commit();
  }
  Archive b = Archive::open(path);
  std::string pj = graph::tag_summary_json(b, "plain");
  CHECK(pj.find("\"updater\": null") != std::string::npos);
  CHECK(pj.find("\"graph\": null") != std::string::npos);
  CHECK(pj.find("\"training\": null") != std::string::npos);
  CHECK(python_accepts_json(dir, pj));
  std::string pt = graph::tag_summary_text(b, "plain");
  CHECK(pt.find("graph     none\n") != std::string::npos);
  CHECK(pt.find("tag       plain (3 of 3, newest)\n") != std::string::npos);
  CHECK_THROWS_AS(graph::tag_summary_json(b, "missing"), Error);
}
