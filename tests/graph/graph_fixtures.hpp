// Graphs, configs and checkpoints for the graph suite: a small hand-built
// MLP and random (but valid) graphs and training configs, deterministic for
// a seed.
#pragma once

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "modelzip/graph/checkpoint.hpp"
#include "modelzip/graph/graph.hpp"
#include "modelzip/graph/training.hpp"

namespace modelzip::testing {

using namespace modelzip::graph;
using namespace modelzip::training;

inline Tensor f32_tensor(Shape shape, const std::vector<float>& values) {
  std::vector<std::byte> b(values.size() * 4);
  std::memcpy(b.data(), values.data(), b.size());
  return Tensor::dense(DType::float32, std::move(shape), Bytes::take(std::move(b)));
}

// x[-1,2] -> matmul w1[2,3] -> add b1[3] -> tanh -> matmul w2[3,1] -> add b2
// -> y; loss = mean((y - label)^2); a constant "scale"[2] multiplies x first.
inline Graph mlp_graph() {
  Graph g;
  g.add_placeholder("x", DType::float32, Shape{kUnknownDim, 2});
  g.add_placeholder("label", DType::float32, Shape{kUnknownDim, 1});
  g.add_constant("scale", DType::float32, {2});
  g.add_variable("w1", DType::float32, {2, 3});
  g.add_variable("b1", DType::float32, {3});
  g.add_variable("w2", DType::float32, {3, 1});
  g.add_variable("b2", DType::float32, {1});
  for (const char* a : {"xs", "h_pre", "h_lin", "h", "y_pre", "y", "diff", "sq", "loss"})
    g.add_array(a, DType::float32, std::nullopt);
  g.add_op("scale_x", "multiply", {"x", "scale"}, {"xs"});
  g.add_op("mm1", "matmul", {"xs", "w1"}, {"h_pre"})
      .add_b_arg("transposeX", false)
      .add_b_arg("transposeY", false);
  g.add_op("bias1", "add", {"h_pre", "b1"}, {"h_lin"});
  g.add_op("act1", "tanh", {"h_lin"}, {"h"});
  g.add_op("mm2", "matmul", {"h", "w2"}, {"y_pre"})
      .add_b_arg("transposeX", false)
      .add_b_arg("transposeY", false);
  g.add_op("bias2", "add", {"y_pre", "b2"}, {"y"});
  g.add_op("sub", "subtract", {"y", "label"}, {"diff"});
  g.add_op("square", "square", {"diff"}, {"sq"});
  g.add_op("mean", "reduce_mean", {"sq"}, {"loss"})
      .add_i_arg("dimensions", -1)
      .add_b_arg("keepDims", false)
      .add_d_arg("dtype", DType::float32)
      .add_t_arg("scale", 1.0)
      .add_s_arg("reduction", "mean");
  g.outputs = {"y"};
  g.loss_variables = {"loss"};
  return g;
}

inline std::string random_name(std::mt19937_64& rng, const std::string& prefix, std::size_t i) {
  static const char* parts[] = {
      "w",
      "layer/0/kernel",
      "b i a s",
      "\xC3\xBC\x62\x65\x72",  // "über" (hex: "\xBCber" would swallow "be")
      "%41",
      "\xE6\x97\xA5\xE6\x9C\xAC",
      "a\"b\\c",
      "tab\there",
      "x.y",
      "\xF0\x9F\x98\x80"};
  return prefix + parts[rng() % std::size(parts)] + "#" + std::to_string(i);
}

inline double random_double(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0:
      return 0.0;
    case 1:
      return -0.0;
    case 2:
      return std::numeric_limits<double>::quiet_NaN();
    case 3:
      return std::numeric_limits<double>::infinity();
    case 4:
      return 1e-300;
    default:
      return std::ldexp(static_cast<double>(rng() % 100000) - 50000.0,
                        -static_cast<int>(rng() % 40));
  }
}

// A valid graph with every variable kind, unknown dimensions and ranks, all
// argument kinds and odd names.
inline Graph random_graph(std::mt19937_64& rng) {
  Graph g;
  const std::size_t n_vars = rng() % 40;
  for (std::size_t i = 0; i < n_vars; ++i) {
    Variable v;
    v.name = random_name(rng, "v", i);
    v.kind = static_cast<VariableKind>(rng() % 5);
    v.dtype = kAllDTypes[rng() % std::size(kAllDTypes)];
    if (!v.has_value() && rng() % 4 == 0) {
      v.shape = std::nullopt;
    } else {
      Shape s;
      for (std::size_t d = 0, rank = rng() % 5; d < rank; ++d)
        s.push_back(!v.has_value() && rng() % 3 == 0 ? kUnknownDim
                                                     : static_cast<std::int64_t>(rng() % 7));
      v.shape = s;
    }
    g.variables.push_back(std::move(v));
  }
  const std::size_t n_ops = 1 + rng() % 20;
  for (std::size_t i = 0; i < n_ops; ++i) {
    Op op;
    op.name = random_name(rng, "op", i);
    op.type = std::vector<std::string>{"matmul", "add", "tanh", "while", "enter"}[rng() % 5];
    if (!g.variables.empty()) {
      for (std::size_t k = 0, n = rng() % 4; k < n; ++k)
        op.inputs.push_back(g.variables[rng() % g.variables.size()].name);
      for (std::size_t k = 0, n = rng() % 2; k < n; ++k)
        op.control_deps.push_back(g.variables[rng() % g.variables.size()].name);
    }
    for (std::size_t k = 0, n = rng() % 3; k < n; ++k)
      op.add_i_arg("i" + std::to_string(k), static_cast<std::int64_t>(rng()));
    for (std::size_t k = 0, n = rng() % 3; k < n; ++k)
      op.add_t_arg("t" + std::to_string(k), random_double(rng));
    for (std::size_t k = 0, n = rng() % 3; k < n; ++k)
      op.add_b_arg("b" + std::to_string(k), rng() % 2);
    for (std::size_t k = 0, n = rng() % 3; k < n; ++k)
      op.add_d_arg("d" + std::to_string(k), kAllDTypes[rng() % std::size(kAllDTypes)]);
    for (std::size_t k = 0, n = rng() % 2; k < n; ++k)
      op.add_s_arg(random_name(rng, "s", k), random_name(rng, "", k));
    g.ops.push_back(std::move(op));
  }
  // Every array has one producer; some sequences too.
  for (const Variable& v : g.variables) {
    bool produce = v.kind == VariableKind::array || (v.kind == VariableKind::sequence && rng() % 2);
    if (produce) g.ops[rng() % g.ops.size()].outputs.push_back(v.name);
  }
  for (const Variable& v : g.variables) {
    if (rng() % 5 == 0) g.outputs.push_back(v.name);
    if (rng() % 7 == 0) g.loss_variables.push_back(v.name);
  }
  return g;
}

inline Schedule random_schedule(std::mt19937_64& rng, int depth = 0) {
  auto t = [&] { return rng() % 2 ? ScheduleType::epoch : ScheduleType::iteration; };
  auto d = [&] { return static_cast<double>(rng() % 1000) / 64.0; };
  switch (rng() % (depth < 3 ? 9 : 8)) {
    case 0:
      return FixedSchedule{d()};
    case 1:
      return StepSchedule{t(), d(), d(), 1.0 + d()};
    case 2:
      return ExponentialSchedule{t(), d(), d()};
    case 3:
      return InverseSchedule{t(), d(), d(), d()};
    case 4:
      return PolySchedule{t(), d(), d(), 1 + static_cast<std::int64_t>(rng() % 1000)};
    case 5:
      return SigmoidSchedule{t(), d(), d(), static_cast<std::int64_t>(rng() % 100)};
    case 6: {
      std::int64_t ann = static_cast<std::int64_t>(rng() % 10);
      return CycleSchedule{t(), d(), d(), ann + 2 + static_cast<std::int64_t>(rng() % 50),
                           ann, d()};
    }
    case 7: {
      MapSchedule m{t(), {}};
      std::int64_t start = 0;
      for (std::size_t i = 0, n = 1 + rng() % 5; i < n; ++i) {
        m.steps.push_back({start, d()});
        start += 1 + static_cast<std::int64_t>(rng() % 100);
      }
      return m;
    }
    default:
      return ramp(random_schedule(rng, depth + 1), 1 + static_cast<std::int64_t>(rng() % 100));
  }
}

inline Updater random_updater(std::mt19937_64& rng) {
  auto p = [&] { return static_cast<double>(rng() % 1000) / 1024.0; };  // in [0, 1)
  switch (rng() % 11) {
    case 0:
      return Sgd{p()};
    case 1:
      return Nesterovs{p(), p()};
    case 2:
      return Adam{p(), p(), p(), p()};
    case 3:
      return AdamW{p(), p(), p(), p(), p()};
    case 4:
      return AdaMax{p(), p(), p(), p()};
    case 5:
      return AmsGrad{p(), p(), p(), p()};
    case 6:
      return Nadam{p(), p(), p(), p()};
    case 7:
      return RmsProp{p(), p(), p()};
    case 8:
      return AdaGrad{p(), p()};
    case 9:
      return AdaDelta{p(), p()};
    default:
      return NoOp{};
  }
}

inline TrainingConfig random_config(std::mt19937_64& rng) {
  TrainingConfig c;
  c.updater = random_updater(rng);
  if (updater_learning_rate(c.updater) && rng() % 2)
    c.learning_rate_schedule = random_schedule(rng);
  for (std::size_t i = 0, n = rng() % 4; i < n; ++i)
    c.regularization.push_back(Regularization{static_cast<RegularizationType>(rng() % 3),
                                              random_schedule(rng), rng() % 2 == 0});
  c.minimize = rng() % 2;
  for (auto* list : {&c.feature_mapping, &c.label_mapping, &c.feature_mask_mapping,
                     &c.label_mask_mapping, &c.loss_variables})
    for (std::size_t i = 0, n = rng() % 3; i < n; ++i) list->push_back(random_name(rng, "p", i));
  c.iteration_count = static_cast<std::int64_t>(rng() >> 1);
  c.epoch_count = static_cast<std::int64_t>(rng() % 1000);
  for (std::size_t i = 0, n = rng() % 4; i < n; ++i)
    c.properties[random_name(rng, "k", i)] = random_name(rng, "", i);
  return c;
}

}  // namespace modelzip::testing
