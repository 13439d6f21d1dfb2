// Sample: train a small MLP with Adam, save a checkpoint tag per step, stop,
// resume from the newest tag, and prove the resumed run is bit-identical to
// one that never stopped.
//
//   mlp OUTPUT_FOLDER
//
// The model: y = tanh((x * scale) W1 + b1) W2 + b2, loss = mean((y - label)^2)
// on a toy data set (16 points, label = x0 * x1), full-batch gradient
// descent, Adam computed here in float arithmetic. `scale` is a constant:
// every tag after the first shares its blob instead of storing it again.
//
// Run A trains kTotalSteps steps without stopping. Run B trains kStopStep
// steps, forgets everything, then loads the newest tag of its archive (graph,
// parameters, Adam's M and V, and the training config with its iteration
// count and learning-rate schedule) and trains on to kTotalSteps. The program
// exits 0 only if both runs end with the same bytes in every parameter and
// every updater state array, in memory and in the newest tags of both
// archives.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/checkpoint.hpp"
#include "modelzip/writer.hpp"

namespace {

using namespace modelzip;
namespace fs = std::filesystem;

constexpr int kTotalSteps = 12;
constexpr int kStopStep = 7;
constexpr int kHidden = 4;
constexpr int kSamples = 16;

// ---- The model -----------------------------------------------------------------

graph::Graph mlp_graph() {
  using graph::kUnknownDim;
  graph::Graph g;
  g.add_placeholder("x", DType::float32, Shape{kUnknownDim, 2});
  g.add_placeholder("label", DType::float32, Shape{kUnknownDim, 1});
  g.add_constant("scale", DType::float32, {2});
  g.add_variable("w1", DType::float32, {2, kHidden});
  g.add_variable("b1", DType::float32, {kHidden});
  g.add_variable("w2", DType::float32, {kHidden, 1});
  g.add_variable("b2", DType::float32, {1});
  g.add_array("xs", DType::float32, Shape{kUnknownDim, 2});
  g.add_array("h_pre", DType::float32, Shape{kUnknownDim, kHidden});
  g.add_array("h", DType::float32, Shape{kUnknownDim, kHidden});
  g.add_array("y", DType::float32, Shape{kUnknownDim, 1});
  g.add_array("loss", DType::float32, Shape{});
  g.add_op("scale_x", "multiply", {"x", "scale"}, {"xs"});
  g.add_op("dense1", "xw_plus_b", {"xs", "w1", "b1"}, {"h_pre"});
  g.add_op("act1", "tanh", {"h_pre"}, {"h"});
  g.add_op("dense2", "xw_plus_b", {"h", "w2", "b2"}, {"y"});
  g.add_op("mse", "mean_squared_error", {"y", "label"}, {"loss"})
      .add_i_arg("reduction", 1)
      .add_s_arg("reduction_name", "mean");
  g.outputs = {"y"};
  g.loss_variables = {"loss"};
  return g;
}

training::TrainingConfig initial_config() {
  training::TrainingConfig c;
  c.updater = training::Adam{0.05, 0.9, 0.999, 1e-8};
  // Warm-up over the first 3 iterations, then 0.05.
  c.learning_rate_schedule = training::ramp(training::FixedSchedule{0.05}, 3);
  c.feature_mapping = {"x"};
  c.label_mapping = {"label"};
  c.loss_variables = {"loss"};
  c.properties = {{"data", "16-point grid, label = x0 * x1"}};
  return c;
}

// ---- State ---------------------------------------------------------------------

using Vec = std::vector<float>;

struct Params {
  Vec scale, w1, b1, w2, b2;
};
// Adam's first (M) and second (V) moments, one pair per trainable variable.
struct Moments {
  Vec m, v;
};
struct TrainState {
  Params p;
  std::map<std::string, Moments> adam;  // w1, b1, w2, b2
  training::TrainingConfig config;      // iteration_count = completed steps
};

// The parameter `name` of p (const or not); nullptr for the constant.
template <class P>
auto trainable(P& p, const std::string& name) -> decltype(&p.w1) {
  if (name == "w1") return &p.w1;
  if (name == "b1") return &p.b1;
  if (name == "w2") return &p.w2;
  if (name == "b2") return &p.b2;
  return nullptr;
}
const char* const kTrainable[] = {"w1", "b1", "w2", "b2"};

TrainState fresh_state() {
  TrainState s;
  s.p.scale = {1.5f, 0.5f};
  // Deterministic small initial weights from a fixed linear congruential
  // sequence (the same numbers on every machine).
  std::uint32_t seed = 12345;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>((seed >> 8) % 2001) / 2000.0f - 0.5f;  // [-0.5, 0.5]
  };
  s.p.w1.resize(2 * kHidden);
  for (auto& w : s.p.w1) w = next();
  s.p.b1.assign(kHidden, 0.0f);
  s.p.w2.resize(kHidden);
  for (auto& w : s.p.w2) w = next();
  s.p.b2 = {0.0f};
  for (const char* n : kTrainable) {
    std::size_t size = trainable(s.p, n)->size();
    s.adam[n] = Moments{Vec(size, 0.0f), Vec(size, 0.0f)};
  }
  s.config = initial_config();
  return s;
}

// ---- Data, forward, backward -------------------------------------------------------

struct Data {
  Vec x, label;  // kSamples x 2, kSamples x 1
};

Data toy_data() {
  Data d;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      float a = -0.75f + 0.5f * static_cast<float>(i);
      float b = -0.75f + 0.5f * static_cast<float>(j);
      d.x.push_back(a);
      d.x.push_back(b);
      d.label.push_back(a * b);
    }
  return d;
}

// One forward and backward pass over the whole data set: the loss and the
// gradient of every trainable variable.
float loss_and_gradients(const Params& p, const Data& d, std::map<std::string, Vec>& grad) {
  grad["w1"].assign(p.w1.size(), 0.0f);
  grad["b1"].assign(p.b1.size(), 0.0f);
  grad["w2"].assign(p.w2.size(), 0.0f);
  grad["b2"].assign(p.b2.size(), 0.0f);
  float loss = 0.0f;
  for (int n = 0; n < kSamples; ++n) {
    float xs[2] = {d.x[2 * n] * p.scale[0], d.x[2 * n + 1] * p.scale[1]};
    float h[kHidden];
    float y = p.b2[0];
    for (int k = 0; k < kHidden; ++k) {
      float pre = xs[0] * p.w1[k] + xs[1] * p.w1[kHidden + k] + p.b1[k];
      h[k] = std::tanh(pre);
      y += h[k] * p.w2[k];
    }
    float diff = y - d.label[n];
    loss += diff * diff;
    // d(mean)/dy = 2 * diff / N
    float dy = 2.0f * diff / static_cast<float>(kSamples);
    grad["b2"][0] += dy;
    for (int k = 0; k < kHidden; ++k) {
      grad["w2"][k] += dy * h[k];
      float dpre = dy * p.w2[k] * (1.0f - h[k] * h[k]);
      grad["b1"][k] += dpre;
      grad["w1"][k] += dpre * xs[0];
      grad["w1"][kHidden + k] += dpre * xs[1];
    }
  }
  return loss / static_cast<float>(kSamples);
}

// One Adam step (Kingma & Ba, with bias correction) at iteration t (1-based).
void adam_step(TrainState& s, const std::map<std::string, Vec>& grad) {
  const auto& adam = std::get<training::Adam>(s.config.updater);
  const std::int64_t t = s.config.iteration_count + 1;
  const float lr = static_cast<float>(
      *training::learning_rate_at(s.config, s.config.iteration_count, s.config.epoch_count));
  const float b1 = static_cast<float>(adam.beta1), b2 = static_cast<float>(adam.beta2);
  const float eps = static_cast<float>(adam.epsilon);
  const float c1 = static_cast<float>(1.0 - std::pow(adam.beta1, static_cast<double>(t)));
  const float c2 = static_cast<float>(1.0 - std::pow(adam.beta2, static_cast<double>(t)));
  for (const char* name : kTrainable) {
    Vec& p = *trainable(s.p, name);
    Moments& mo = s.adam.at(name);
    const Vec& g = grad.at(name);
    for (std::size_t i = 0; i < p.size(); ++i) {
      mo.m[i] = b1 * mo.m[i] + (1.0f - b1) * g[i];
      mo.v[i] = b2 * mo.v[i] + (1.0f - b2) * g[i] * g[i];
      float m_hat = mo.m[i] / c1;
      float v_hat = mo.v[i] / c2;
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  s.config.iteration_count = t;
  s.config.epoch_count += 1;  // full batch: one step is one epoch
}

// ---- Checkpoints ---------------------------------------------------------------------

Tensor tensor_of(const Vec& v, Shape shape) {
  std::vector<std::byte> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return Tensor::dense(DType::float32, std::move(shape), Bytes::take(std::move(b)));
}

Vec vec_of(const Tensor& t) {
  auto s = t.as<float>();
  return Vec(s.begin(), s.end());
}

std::string tag_of(std::int64_t step) {
  return "step-" + std::to_string(step);
}

void save(Writer& writer, const TrainState& s) {
  const graph::Graph g = mlp_graph();
  Checkpoint c;
  c.graph = g;
  c.training = s.config;
  c.params["scale"] = tensor_of(s.p.scale, {2});
  c.params["w1"] = tensor_of(s.p.w1, {2, kHidden});
  c.params["b1"] = tensor_of(s.p.b1, {kHidden});
  c.params["w2"] = tensor_of(s.p.w2, {kHidden, 1});
  c.params["b2"] = tensor_of(s.p.b2, {1});
  for (const char* n : kTrainable) {
    const Shape& shape = c.params[n].shape();
    c.updater_state[n]["M"] = tensor_of(s.adam.at(n).m, shape);
    c.updater_state[n]["V"] = tensor_of(s.adam.at(n).v, shape);
  }
  CheckpointSaveOptions options;
  if (s.config.iteration_count > 1) {  // the constant never changes: share it
    options.share_from_tag = tag_of(1);
    options.unchanged_params = {"scale"};
  }
  writer.add_tag(tag_of(s.config.iteration_count), checkpoint_tag(c, options));
  writer.commit();
}

TrainState load(const Archive& archive) {
  Checkpoint c = load_checkpoint(archive, {}, ReadMode::copy);  // the newest tag
  TrainState s;
  s.config = *c.training;
  s.p.scale = vec_of(c.params.at("scale"));
  for (const char* n : kTrainable) {
    *trainable(s.p, n) = vec_of(c.params.at(n));
    s.adam[n] =
        Moments{vec_of(c.updater_state.at(n).at("M")), vec_of(c.updater_state.at(n).at("V"))};
  }
  return s;
}

// Trains until `until` steps are complete, saving a tag after each step.
void train(TrainState& s, Writer& writer, std::int64_t until, const Data& data, const char* run) {
  std::map<std::string, Vec> grad;
  while (s.config.iteration_count < until) {
    float loss = loss_and_gradients(s.p, data, grad);
    adam_step(s, grad);
    save(writer, s);
    std::cout << run << " step " << s.config.iteration_count << " loss " << loss << "\n";
  }
}

bool same_bytes(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool same_state(const TrainState& a, const TrainState& b) {
  bool same = same_bytes(a.p.scale, b.p.scale) && a.config == b.config;
  for (const char* n : kTrainable) {
    same = same && same_bytes(*trainable(a.p, n), *trainable(b.p, n)) &&
           same_bytes(a.adam.at(n).m, b.adam.at(n).m) && same_bytes(a.adam.at(n).v, b.adam.at(n).v);
  }
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: mlp OUTPUT_FOLDER\n";
    return 2;
  }
  try {
    const fs::path folder = argv[1];
    fs::create_directories(folder);
    const fs::path path_a = folder / "mlp-uninterrupted.zip";
    const fs::path path_b = folder / "mlp-resumed.zip";
    fs::remove(path_a);
    fs::remove(path_b);
    const Data data = toy_data();

    // Run A: never stops.
    TrainState a = fresh_state();
    {
      Writer w = Writer::open(path_a);
      train(a, w, kTotalSteps, data, "A");
    }

    // Run B: stops after kStopStep steps; the process "dies" (all state
    // dropped), then resumes from the newest tag.
    {
      TrainState b = fresh_state();
      Writer w = Writer::open(path_b);
      train(b, w, kStopStep, data, "B");
    }
    TrainState resumed = load(Archive::open(path_b));
    std::cout << "B resumed from " << Archive::open(path_b).newest_tag() << " (iteration "
              << resumed.config.iteration_count << ")\n";
    {
      Writer w = Writer::open(path_b);
      train(resumed, w, kTotalSteps, data, "B");
    }

    bool ok = true;
    if (!same_state(a, resumed)) {
      std::cerr << "FAIL: the resumed run differs from the uninterrupted run in memory\n";
      ok = false;
    }
    // The newest tags of both archives hold the same bytes too, and every
    // tag after the first shares the constant.
    Archive archive_a = Archive::open(path_a), archive_b = Archive::open(path_b);
    if (!same_state(load(archive_a), load(archive_b))) {
      std::cerr << "FAIL: the newest tags of the two archives differ\n";
      ok = false;
    }
    if (archive_b.tags().size() != static_cast<std::size_t>(kTotalSteps) ||
        !archive_b.param("scale", tag_of(kTotalSteps)).shared) {
      std::cerr << "FAIL: expected " << kTotalSteps << " tags sharing 'scale'\n";
      ok = false;
    }
    std::map<std::string, Vec> grad;
    const float first_loss = loss_and_gradients(fresh_state().p, data, grad);
    const float last_loss = loss_and_gradients(resumed.p, data, grad);
    std::cout << "loss " << first_loss << " -> " << last_loss << "\n";
    if (!(last_loss < first_loss)) {
      std::cerr << "FAIL: training did not reduce the loss\n";
      ok = false;
    }
    std::cout << (ok ? "OK: resume is bit-exact\n" : "FAILED\n");
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
