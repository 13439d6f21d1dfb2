// The committed golden graph checkpoint (tests/golden/graph/checkpoint-v1.zip,
// written once by make_golden.cpp with the first version of graph.fbs and
// training.fbs) must keep loading with the same meaning after every change.
// The expectations below are written by hand from make_golden.cpp's inputs;
// never regenerate the archive to make this test pass.
#include <doctest/doctest.h>

#include <cmath>

#include "modelzip/archive.hpp"
#include "modelzip/graph/checkpoint.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::graph;
using namespace modelzip::training;
using namespace modelzip::testing;

namespace {

std::filesystem::path golden() {
  return tests_dir() / "golden" / "graph" / "checkpoint-v1.zip";
}

std::vector<float> floats(const Tensor& t) {
  auto s = t.as<float>();
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("Golden checkpoint v1: tags, sharing, verification") {
  Archive a = Archive::open(golden());
  CHECK(a.tags() == std::vector<std::string>{"step-1", "step-2", "export"});
  CHECK(a.metadata().model_name == "golden-mlp");
  CHECK(a.verify().empty());
  CHECK(a.param("scale", "step-2").shared);  // explicit share
  CHECK(a.param("w2", "step-2").shared);     // dedup
  CHECK_FALSE(a.param("w1", "step-2").shared);
  CHECK_FALSE(a.has_entry("export/trainingConfig.fb"));
  CHECK_FALSE(a.has_entry("export/updater.txt"));
}

TEST_CASE("Golden checkpoint v1: the graph") {
  Archive a = Archive::open(golden());
  Graph g = load_graph(a, "step-1");
  REQUIRE(g.variables.size() == 13);
  const Variable& x = g.variables[0];
  CHECK(x.name == "x");
  CHECK(x.kind == VariableKind::placeholder);
  CHECK(x.dtype == DType::float32);
  CHECK(x.shape == Shape{-1, 2});
  const Variable& mask = g.variables[2];
  CHECK(mask.name == "mask");
  CHECK(mask.dtype == DType::bool_);
  CHECK_FALSE(mask.shape.has_value());
  CHECK(g.variables[3].name == "scale");
  CHECK(g.variables[3].kind == VariableKind::constant);
  CHECK(g.variables[4].name == "w1");
  CHECK(g.variables[4].shape == Shape{2, 2});
  CHECK(g.variables[4].is_trainable());
  CHECK(g.variables[7].name == "step");
  CHECK(g.variables[7].kind == VariableKind::variable);
  CHECK(g.variables[7].dtype == DType::int64);
  CHECK(g.variables[7].shape == Shape{});
  CHECK_FALSE(g.variables[7].is_trainable());
  CHECK(g.variables[8].name == "history");
  CHECK(g.variables[8].kind == VariableKind::sequence);
  CHECK(g.variables[12].name == "loss");
  CHECK(g.variables[12].kind == VariableKind::array);
  CHECK(g.trainable_variables() == std::vector<std::string>{"w1", "b1", "w2"});

  REQUIRE(g.ops.size() == 5);
  CHECK(g.ops[0].name == "scale_x");
  CHECK(g.ops[0].type == "multiply");
  CHECK(g.ops[0].inputs == std::vector<std::string>{"x", "scale"});
  CHECK(g.ops[0].outputs == std::vector<std::string>{"xs"});
  const Op& dense1 = g.ops[1];
  CHECK(dense1.type == "linear");
  CHECK(dense1.inputs == std::vector<std::string>{"xs", "w1", "b1"});
  CHECK(dense1.b_arg("transposeA") == false);
  CHECK(dense1.s_arg("activation") == "tanh");
  const Op& dense2 = g.ops[2];
  CHECK(dense2.t_arg("alpha") == 1.5);
  REQUIRE(dense2.t_arg("fill").has_value());
  CHECK(std::isnan(*dense2.t_arg("fill")));
  CHECK(dense2.d_arg("dtype") == DType::bfloat16);
  const Op& mse = g.ops[3];
  CHECK(mse.type == "mean_squared_error");
  REQUIRE(mse.i_args.size() == 2);
  CHECK(mse.i_args[0].name == "reduction");
  CHECK(mse.i_args[0].value == 3);
  CHECK(mse.i_args[1].name == "dimension");
  CHECK(mse.i_args[1].value == -1);
  CHECK(mse.control_deps == std::vector<std::string>{"mask"});
  CHECK(g.ops[4].outputs == std::vector<std::string>{"history"});
  CHECK(g.outputs == std::vector<std::string>{"y"});
  CHECK(g.loss_variables == std::vector<std::string>{"loss"});
  CHECK(load_graph(a, "export") == g);
}

TEST_CASE("Golden checkpoint v1: the training config") {
  Archive a = Archive::open(golden());
  auto c = load_training_config(a, "step-2");
  REQUIRE(c.has_value());
  const auto& u = std::get<AdamW>(c->updater);
  CHECK(u.learning_rate == 0.005);
  CHECK(u.beta1 == 0.8);
  CHECK(u.beta2 == 0.995);
  CHECK(u.epsilon == 1e-7);
  CHECK(u.weight_decay == 0.02);
  const auto& r = std::get<RampSchedule>(*c->learning_rate_schedule);
  CHECK(r.num_iterations == 10);
  const auto& step = std::get<StepSchedule>(*r.base);
  CHECK(step.type == ScheduleType::iteration);
  CHECK(step.initial_value == 0.005);
  CHECK(step.decay_rate == 0.5);
  CHECK(step.step == 100);
  // Ramp at iteration 4: 0.005 * 5 / 10; step decay at 250: 0.005 * 0.25.
  CHECK(learning_rate_at(*c, 4, 0) == doctest::Approx(0.0025));
  CHECK(learning_rate_at(*c, 250, 0) == doctest::Approx(0.00125));
  REQUIRE(c->regularization.size() == 3);
  CHECK(c->regularization[0].type == RegularizationType::l1);
  CHECK(std::get<FixedSchedule>(c->regularization[0].coefficient).value == 0.0001);
  CHECK(c->regularization[1].type == RegularizationType::l2);
  const auto& l2 = std::get<ExponentialSchedule>(c->regularization[1].coefficient);
  CHECK(l2.type == ScheduleType::epoch);
  CHECK(l2.initial_value == 0.001);
  CHECK(l2.gamma == 0.9);
  CHECK(c->regularization[2].type == RegularizationType::weight_decay);
  CHECK(std::get<FixedSchedule>(c->regularization[2].coefficient).value == 0.01);
  CHECK_FALSE(c->regularization[2].apply_learning_rate);
  CHECK(c->minimize);
  CHECK(c->feature_mapping == std::vector<std::string>{"x"});
  CHECK(c->label_mapping == std::vector<std::string>{"label"});
  CHECK(c->feature_mask_mapping == std::vector<std::string>{"mask"});
  CHECK(c->label_mask_mapping.empty());
  CHECK(c->loss_variables == std::vector<std::string>{"loss"});
  CHECK(c->iteration_count == 2);
  CHECK(c->epoch_count == 1);
  CHECK(c->properties ==
        std::map<std::string, std::string>{{"seed", "20240601"}, {"data.position", "8"}});
  CHECK(load_training_config(a, "step-1")->iteration_count == 1);
  CHECK_FALSE(load_training_config(a, "export").has_value());
}

TEST_CASE("Golden checkpoint v1: parameters and updater state, whole") {
  Archive a = Archive::open(golden());
  for (ReadMode mode : {ReadMode::zero_copy, ReadMode::copy}) {
    Checkpoint c = load_checkpoint(a, "step-2", mode);
    REQUIRE(c.params.size() == 5);
    CHECK(floats(c.params.at("scale")) == std::vector<float>{1.0f, 0.5f});
    CHECK(floats(c.params.at("w1")) == std::vector<float>{0.5f, -0.5f, 0.75f, 1.0f});
    CHECK(floats(c.params.at("b1")) == std::vector<float>{0.125f, -0.25f});
    CHECK(floats(c.params.at("w2")) == std::vector<float>{2.0f, -2.0f});
    CHECK(c.params.at("w2").shape() == Shape{2, 1});
    CHECK(c.params.at("step").dtype() == DType::int64);
    CHECK(c.params.at("step").as<std::int64_t>()[0] == 2);
    REQUIRE(c.updater_state.size() == 3);
    // M[i] = 0.0625 * step * (i + 1), V[i] = 0.015625 * step * (i + 1).
    CHECK(floats(c.updater_state.at("w1").at("M")) ==
          std::vector<float>{0.125f, 0.25f, 0.375f, 0.5f});
    CHECK(floats(c.updater_state.at("w1").at("V")) ==
          std::vector<float>{0.03125f, 0.0625f, 0.09375f, 0.125f});
    CHECK(floats(c.updater_state.at("w2").at("M")) == std::vector<float>{0.125f, 0.25f});
    CHECK(floats(c.updater_state.at("b1").at("V")) == std::vector<float>{0.03125f, 0.0625f});
  }
  Checkpoint first = load_checkpoint(a, "step-1");
  CHECK(floats(first.params.at("w1")) == std::vector<float>{0.25f, -0.5f, 0.75f, 1.0f});
  CHECK(floats(first.updater_state.at("b1").at("M")) == std::vector<float>{0.0625f, 0.125f});
  Checkpoint exported = load_checkpoint(a);  // newest: "export"
  CHECK_FALSE(exported.training.has_value());
  CHECK(exported.updater_state.empty());
  CHECK(floats(exported.params.at("b1")) == std::vector<float>{0.125f, -0.25f});
}
