// Writes tests/golden/graph/checkpoint-v1.zip, the golden graph checkpoint
// archive of format version 1 (graph.fbs / training.fbs as first released).
//
// Run once, by hand, and commit the result:
//   ninja -C build tests/graph/make_graph_golden
//   build/tests/graph/make_graph_golden tests/golden/graph/checkpoint-v1.zip
// NEVER regenerate it after a schema change: its purpose is to prove that
// archives written by this first version keep loading with the same meaning
// (golden_test.cpp checks its content against hand-written expectations).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "modelzip/graph/checkpoint.hpp"
#include "modelzip/writer.hpp"

using namespace modelzip;
using namespace modelzip::graph;
using namespace modelzip::training;

namespace {

Tensor f32(Shape shape, const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return Tensor::dense(DType::float32, std::move(shape), Bytes::take(std::move(b)));
}

Graph golden_graph() {
  Graph g;
  g.add_placeholder("x", DType::float32, Shape{kUnknownDim, 2});
  g.add_placeholder("label", DType::float32, Shape{kUnknownDim, 1});
  g.add_placeholder("mask", DType::bool_, std::nullopt);
  g.add_constant("scale", DType::float32, {2});
  g.add_variable("w1", DType::float32, {2, 2});
  g.add_variable("b1", DType::float32, {2});
  g.add_variable("w2", DType::float32, {2, 1});
  g.add_variable("step", DType::int64, {});  // a VARIABLE that is not trainable
  g.add_sequence("history", DType::float32);
  for (const char* a : {"xs", "h", "y", "loss"}) g.add_array(a, DType::float32, std::nullopt);
  g.add_op("scale_x", "multiply", {"x", "scale"}, {"xs"});
  g.add_op("dense1", "linear", {"xs", "w1", "b1"}, {"h"})
      .add_b_arg("transposeA", false)
      .add_s_arg("activation", "tanh");
  g.add_op("dense2", "matmul", {"h", "w2"}, {"y"})
      .add_t_arg("alpha", 1.5)
      .add_t_arg("fill", std::nan(""))
      .add_d_arg("dtype", DType::bfloat16);
  g.add_op("mse", "mean_squared_error", {"y", "label"}, {"loss"})
      .add_i_arg("reduction", 3)
      .add_i_arg("dimension", -1);
  g.ops.back().control_deps = {"mask"};
  g.add_op("record", "list_append", {"loss"}, {"history"});
  g.outputs = {"y"};
  g.loss_variables = {"loss"};
  return g;
}

TrainingConfig golden_config(std::int64_t iteration) {
  TrainingConfig c;
  c.updater = AdamW{0.005, 0.8, 0.995, 1e-7, 0.02};
  c.learning_rate_schedule = ramp(StepSchedule{ScheduleType::iteration, 0.005, 0.5, 100}, 10);
  c.regularization = {
      Regularization{RegularizationType::l1, FixedSchedule{0.0001}, true},
      Regularization{RegularizationType::l2, ExponentialSchedule{ScheduleType::epoch, 0.001, 0.9},
                     true},
      Regularization{RegularizationType::weight_decay, FixedSchedule{0.01}, false},
  };
  c.minimize = true;
  c.feature_mapping = {"x"};
  c.label_mapping = {"label"};
  c.feature_mask_mapping = {"mask"};
  c.loss_variables = {"loss"};
  c.iteration_count = iteration;
  c.epoch_count = 1;
  c.properties = {{"seed", "20240601"}, {"data.position", std::to_string(iteration * 4)}};
  return c;
}

Checkpoint golden_checkpoint(int step) {
  const float s = static_cast<float>(step);
  Checkpoint c;
  c.graph = golden_graph();
  c.training = golden_config(step);
  c.params["scale"] = f32({2}, {1.0f, 0.5f});
  c.params["w1"] = f32({2, 2}, {0.25f * s, -0.5f, 0.75f, 1.0f});
  c.params["b1"] = f32({2}, {0.125f, -0.125f * s});
  c.params["w2"] = f32({2, 1}, {2.0f, -2.0f});  // unchanged between steps: dedup
  std::int64_t st = step;
  c.params["step"] =
      Tensor::dense(DType::int64, {}, Bytes::copy_of(std::string(reinterpret_cast<char*>(&st), 8)));
  for (const char* v : {"w1", "b1", "w2"}) {
    Shape shape = c.params[v].shape();
    std::vector<float> m(shape_numel(shape)), var(shape_numel(shape));
    for (std::size_t i = 0; i < m.size(); ++i) {
      m[i] = 0.0625f * s * static_cast<float>(i + 1);
      var[i] = 0.015625f * s * static_cast<float>(i + 1);
    }
    c.updater_state[v]["M"] = f32(shape, m);
    c.updater_state[v]["V"] = f32(shape, var);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_graph_golden OUTPUT.zip\n";
    return 2;
  }
  std::filesystem::remove(argv[1]);
  Writer w = Writer::open(argv[1]);
  Metadata m;
  m.model_name = "golden-mlp";
  m.description = "graph checkpoint regression archive, format version 1";
  w.update_metadata([m](Metadata& current) { current = m; });
  w.add_tag("step-1", checkpoint_tag(golden_checkpoint(1)));
  w.commit();
  CheckpointSaveOptions o;
  o.share_from_tag = "step-1";
  o.unchanged_params = {"scale"};
  w.add_tag("step-2", checkpoint_tag(golden_checkpoint(2), o));
  w.commit();
  Checkpoint inference = golden_checkpoint(2);
  inference.training.reset();
  inference.updater_state.clear();
  w.add_tag("export", checkpoint_tag(inference));
  w.commit();
  std::cout << "wrote " << argv[1] << "\n";
  return 0;
}
