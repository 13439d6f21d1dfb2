// Whole checkpoints through a real archive: save, load, share, and the
// consistency checks on save (invalid_argument) and on load (corrupt).
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>

#include "checkpoint/entry_validators.hpp"
#include "expect_error_text.hpp"
#include "graph_fixtures.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/checkpoint.hpp"
#include "modelzip/writer.hpp"
#include "test_support.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

std::vector<float> ramp_values(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return v;
}

Checkpoint mlp_checkpoint(float offset = 0) {
  Checkpoint c;
  c.graph = mlp_graph();
  TrainingConfig t;
  t.updater = Adam{0.01};
  t.feature_mapping = {"x"};
  t.label_mapping = {"label"};
  t.loss_variables = {"loss"};
  t.iteration_count = 3;
  c.training = t;
  c.params["scale"] = f32_tensor({2}, {1.0f, 0.5f});
  c.params["w1"] = f32_tensor({2, 3}, ramp_values(6, offset));
  c.params["b1"] = f32_tensor({3}, ramp_values(3, offset + 1));
  c.params["w2"] = f32_tensor({3, 1}, ramp_values(3, offset + 2));
  c.params["b2"] = f32_tensor({1}, {offset});
  for (const char* v : {"w1", "b1", "w2", "b2"}) {
    const Shape& s = c.params[v].shape();
    c.updater_state[v]["M"] = f32_tensor(s, ramp_values(shape_numel(s), offset + 10));
    c.updater_state[v]["V"] = f32_tensor(s, ramp_values(shape_numel(s), offset + 20));
  }
  return c;
}

// Tags that other tools wrote entry by entry may be inconsistent graph
// checkpoints, which Writer::commit refuses. Tests stage such a tag's
// graph.fb under this name instead (an entry the writer does not interpret)
// and then rename it in the committed file with name_graph_entries.
const std::string kGraphStandIn = "graph.fX";

// Renames every "<tag>/graph.fX" entry of the zip at `path` to "<tag>/graph.fb"
// (the names in the local headers and the central directory; no CRC covers them).
void name_graph_entries(const std::filesystem::path& path) {
  std::string bytes = io_bytes(path);
  const std::string from = "/" + kGraphStandIn, to = "/graph.fb";
  std::size_t renamed = 0;
  for (auto at = bytes.find(from); at != std::string::npos;
       at = bytes.find(from, at + 1), ++renamed)
    bytes.replace(at, from.size(), to);
  REQUIRE(renamed > 0);
  write_file(path, bytes);
}

void check_same(const Checkpoint& a, const Checkpoint& b) {
  CHECK(a.graph == b.graph);
  CHECK(a.training == b.training);
  REQUIRE(a.params.size() == b.params.size());
  for (const auto& entry : a.params) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    INFO(name);
    REQUIRE(b.params.count(name));
    CHECK(b.params.at(name) == t);
  }
  REQUIRE(a.updater_state.size() == b.updater_state.size());
  for (const auto& [var, states] : a.updater_state) {
    REQUIRE(b.updater_state.count(var));
    REQUIRE(b.updater_state.at(var).size() == states.size());
    for (const auto& [state, t] : states) CHECK(b.updater_state.at(var).at(state) == t);
  }
}

}  // namespace

TEST_CASE("A whole checkpoint round-trips through an archive") {
  TempDir dir;
  auto path = dir / "ckpt.zip";
  Checkpoint c = mlp_checkpoint();
  {
    Writer w = Writer::open(path);
    w.add_tag("step-3", checkpoint_tag(c));
    w.commit();
  }
  Archive a = Archive::open(path);
  CHECK(a.has_entry("step-3/graph.fb"));
  CHECK(a.has_entry("step-3/trainingConfig.fb"));
  CHECK(a.verify().empty());  // graph.fb and trainingConfig.fb pass the entry validators
  // params.txt in graph order; updater.txt per trainable variable, M then V.
  auto params = a.params("step-3");
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"scale", "w1", "b1", "w2", "b2"});
  auto states = a.updater_states("step-3");
  REQUIRE(states.size() == 8);
  CHECK(states[0].name == "w1");
  CHECK(states[0].state == "M");
  CHECK(states[1].state == "V");
  CHECK(states[7].name == "b2");

  check_same(c, load_checkpoint(a, "step-3"));
  check_same(c, load_checkpoint(a, "STEP-3", ReadMode::copy));  // tags ignore case
  check_same(c, load_checkpoint(a));                            // newest
  CHECK(load_graph(a) == c.graph);
  CHECK(load_training_config(a) == c.training);
}

TEST_CASE("Later tags share unchanged parameters explicitly and by dedup") {
  TempDir dir;
  auto path = dir / "ckpt.zip";
  Writer w = Writer::open(path);
  Checkpoint first = mlp_checkpoint(0);
  w.add_tag("step-1", checkpoint_tag(first));
  w.commit();
  Checkpoint second = mlp_checkpoint(1);
  second.params["b2"] = first.params["b2"];  // unchanged, found by dedup
  CheckpointSaveOptions options;
  options.share_from_tag = "step-1";
  options.unchanged_params = {"scale"};
  w.add_tag("step-2", checkpoint_tag(second, options));
  w.commit();

  Archive a = Archive::open(path);
  CHECK(a.param("scale", "step-2").shared);
  CHECK(a.param("scale", "step-2").blob == a.param("scale", "step-1").blob);
  CHECK(a.param("b2", "step-2").shared);
  CHECK_FALSE(a.param("w1", "step-2").shared);
  check_same(second, load_checkpoint(a, "step-2"));
  check_same(first, load_checkpoint(a, "step-1"));
  CHECK(a.verify().empty());
}

TEST_CASE("Several checkpoints staged, one commit; inference-only checkpoints") {
  TempDir dir;
  auto path = dir / "ckpt.zip";
  Checkpoint infer = mlp_checkpoint();
  infer.training.reset();
  infer.updater_state.clear();
  {
    Writer w = Writer::open(path);
    w.add_tag("a", checkpoint_tag(mlp_checkpoint(5)));
    w.add_tag("b", checkpoint_tag(infer));
    w.commit();
  }
  Archive a = Archive::open(path);
  CHECK(a.tags() == std::vector<std::string>{"a", "b"});
  Checkpoint got = load_checkpoint(a);
  CHECK_FALSE(got.training.has_value());
  CHECK(got.updater_state.empty());
  CHECK_FALSE(a.has_entry("b/updater.txt"));
  check_same(infer, got);
  CHECK_FALSE(load_training_config(a, "b").has_value());
  check_same(mlp_checkpoint(5), load_checkpoint(a, "a"));
}

TEST_CASE("Loading what is not a graph checkpoint") {
  TempDir dir;
  auto path = dir / "plain.zip";
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.add("w", f32_tensor({1}, {1}));
    w.add_tag("plain", std::move(t));
    w.commit();
  }
  Archive a = Archive::open(path);
  Error e = expect_error([&] { load_checkpoint(a); }, ErrorCode::not_found,
                         "no such entry: the tag is not a graph checkpoint");
  // The tag once, in the entry the context names (it said "entry 'plain/graph.fb': tag
  // 'plain' has no graph.fb").
  CHECK(std::string(e.what()).find("tag 'plain'") == std::string::npos);
  CHECK(e.context().entry == "plain/graph.fb");
  CHECK(e.context().tag == "plain");
  Error missing = expect_error([&] { load_graph(a, "nope"); }, ErrorCode::not_found, "no such tag");
  CHECK(missing.context().tag == "nope");
  CHECK_FALSE(load_training_config(a).has_value());
}

TEST_CASE("Complex variables are trainable and keep complex Adam state") {
  // A spectral weight as Fourier neural operators have: complex64, with
  // complex M and V (torch's Adam keeps complex state for complex params).
  auto c64 = [](Shape shape, float start) {
    std::vector<float> parts(2 * shape_numel(shape));
    for (std::size_t i = 0; i < parts.size(); ++i) parts[i] = start - 0.5f * static_cast<float>(i);
    return Tensor::dense(
        DType::complex64, std::move(shape),
        Bytes::copy_of(std::string_view(reinterpret_cast<const char*>(parts.data()),
                                        parts.size() * sizeof(float))));
  };
  Checkpoint c = mlp_checkpoint();
  c.graph.variables[3].dtype = DType::complex64;  // w1
  REQUIRE(c.graph.variables[3].name == "w1");
  CHECK(c.graph.variables[3].is_trainable());
  c.params["w1"] = c64({2, 3}, 1);
  c.updater_state["w1"]["M"] = c64({2, 3}, 2);
  c.updater_state["w1"]["V"] = c64({2, 3}, 3);
  TempDir dir;
  auto path = dir / "ckpt.zip";
  {
    Writer w = Writer::open(path);
    w.add_tag("step-1", checkpoint_tag(c));
    w.commit();
  }
  Archive a = Archive::open(path);
  CHECK(a.verify().empty());
  check_same(c, load_checkpoint(a, "step-1"));
  // Without its state it is a trainable variable with state missing.
  c.updater_state.erase("w1");
  expect_error([&] { check_checkpoint(c); }, ErrorCode::invalid_argument,
               "trainable variable 'w1' has no updater state 'M'");
}

TEST_CASE("check_checkpoint names the broken consistency rule") {
  auto check = [](auto&& edit, const std::string& text) {
    Checkpoint c = mlp_checkpoint();
    edit(c);
    expect_error([&] { check_checkpoint(c); }, ErrorCode::invalid_argument, text);
    expect_error([&] { checkpoint_tag(c); }, ErrorCode::invalid_argument, text);
  };
  check([](Checkpoint& c) { c.params.erase("w2"); },
        "variable 'w2' (float32 [3, 1]) has no parameter");
  check([](Checkpoint& c) { c.params.erase("scale"); },
        "constant 'scale' (float32 [2]) has no parameter");
  check(
      [](Checkpoint& c) {
        c.params["b1"] = Tensor::dense(DType::float64, {3}, Bytes::copy_of(std::string(24, 'x')));
      },
      "parameter 'b1' is float64, but variable 'b1' (float32 [3]) is not");
  check(
      [](Checkpoint& c) {
        c.params["b1"] = f32_tensor({1, 3}, {1, 2, 3});
      },
      "parameter 'b1' has shape [1, 3], but variable 'b1' (float32 [3]) does not");
  check([](Checkpoint& c) { c.params["extra"] = f32_tensor({1}, {1}); },
        "parameter 'extra' is not a variable of the graph");
  check(
      [](Checkpoint& c) {
        c.params["x"] = f32_tensor({1, 2}, {1, 2});
      },
      "parameter 'x' names a placeholder, which has no stored value");
  check([](Checkpoint& c) { c.training.reset(); },
        "the checkpoint has updater state but no training config");
  check(
      [](Checkpoint& c) {
        c.updater_state["scale"]["M"] = f32_tensor({2}, {0, 0});
      },
      "updater state for 'scale', a constant of type float32 (only trainable variables");
  check(
      [](Checkpoint& c) {
        c.updater_state["ghost"]["M"] = f32_tensor({2}, {0, 0});
      },
      "updater state for 'ghost', which is not a variable of the graph");
  check([](Checkpoint& c) { c.updater_state["w1"]["G"] = c.updater_state["w1"]["M"]; },
        "updater state 'G' of 'w1' is not a state of updater Adam (state: M, V)");
  check([](Checkpoint& c) { c.updater_state["b1"]["M"] = f32_tensor({1}, {0}); },
        "updater state 'M' of 'b1' has shape [1], the variable [3]");
  check(
      [](Checkpoint& c) {
        c.updater_state["b2"]["V"] =
            Tensor::dense(DType::int32, {1}, Bytes::copy_of(std::string(4, '\0')));
      },
      "updater state 'V' of 'b2' is int32, not a floating-point or complex type");
  check([](Checkpoint& c) { c.updater_state["w2"].erase("V"); },
        "trainable variable 'w2' has no updater state 'V'");
  check([](Checkpoint& c) { c.updater_state.erase("b1"); },
        "trainable variable 'b1' has no updater state 'M'");
  check([](Checkpoint& c) { c.training->updater = Sgd{}; },
        "updater state 'M' of 'b1' is not a state of updater Sgd (state: none)");
  check([](Checkpoint& c) { c.training->feature_mapping = {"w1"}; },
        "training config feature mapping names 'w1', a variable, not a placeholder");
  check([](Checkpoint& c) { c.training->label_mask_mapping = {"mask"}; },
        "training config label mask mapping names 'mask', which is not a variable of the graph");
  check([](Checkpoint& c) { c.training->loss_variables = {"lost"}; },
        "training config loss variable 'lost' is not a variable of the graph");
  check([](Checkpoint& c) { c.graph.ops[0].inputs[0] = "nope"; },
        "op 'scale_x' input 0 names 'nope'");

  // No state at all is fine (a fresh run), as is a config without state.
  Checkpoint fresh = mlp_checkpoint();
  fresh.updater_state.clear();
  CHECK_NOTHROW(check_checkpoint(fresh));

  Checkpoint c = mlp_checkpoint();
  CheckpointSaveOptions o;
  o.unchanged_params = {"scale"};
  expect_error([&] { checkpoint_tag(c, o); }, ErrorCode::invalid_argument,
               "unchanged parameters are listed but share_from_tag is empty");
  o.share_from_tag = "t";
  o.unchanged_params = {"nope"};
  expect_error([&] { checkpoint_tag(c, o); }, ErrorCode::invalid_argument,
               "unchanged parameter 'nope' is not a parameter of the checkpoint");
}

TEST_CASE("Inconsistent tags written by other tools fail to load with a clear error") {
  TempDir dir;
  auto path = dir / "bad.zip";
  {
    Writer w = Writer::open(path);
    // Right graph, a parameter of the wrong shape.
    NewTag t1;
    t1.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    Checkpoint c = mlp_checkpoint();
    for (const auto& [name, tensor] : c.params)
      t1.add(name, name == "w2" ? f32_tensor({1, 3}, {1, 2, 3}) : tensor);
    w.add_tag("wrong-shape", std::move(t1));
    // Updater state for a constant.
    NewTag t2;
    t2.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    t2.set_entry("trainingConfig.fb", encode_training_config(*c.training));
    for (const auto& [name, tensor] : c.params) t2.add(name, tensor);
    t2.add_updater_state("scale", "M", c.params["scale"]);
    w.add_tag("const-state", std::move(t2));
    // A parameter whose variable the graph lacks.
    NewTag t3;
    t3.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    for (const auto& [name, tensor] : c.params) t3.add(name, tensor);
    t3.add("stray", f32_tensor({1}, {0}));
    w.add_tag("stray", std::move(t3));
    w.commit();
  }
  name_graph_entries(path);
  Archive a = Archive::open(path);
  Error e = expect_error([&] { load_checkpoint(a, "wrong-shape"); }, ErrorCode::corrupt,
                         "parameter 'w2' has shape [1, 3], but variable 'w2'");
  CHECK(e.context().tag == "wrong-shape");
  CHECK(e.context().archive == path.string());
  CHECK(std::string(e.what()).find("wrong-shape") != std::string::npos);
  expect_error([&] { load_checkpoint(a, "const-state"); }, ErrorCode::corrupt,
               "updater state for 'scale', a constant");
  expect_error([&] { load_checkpoint(a, "stray"); }, ErrorCode::corrupt,
               "parameter 'stray' is not a variable of the graph");
}

TEST_CASE("verify applies the consistency rules to every tag with graph.fb, naming each problem") {
  // Tags that other tools wrote entry by entry: each entry is valid on its
  // own, and load_checkpoint refuses the tag. verify reports every broken
  // rule (not only the first), under the entry it concerns.
  TempDir dir;
  auto path = dir / "inconsistent.zip";
  Checkpoint c = mlp_checkpoint();
  {
    Writer w = Writer::open(path);
    w.add_tag("good", checkpoint_tag(c));
    NewTag t1;  // w2 of the wrong shape, b1 of the wrong type, b2 missing, a stray one
    t1.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    t1.add("scale", c.params["scale"]);
    t1.add("w1", c.params["w1"]);
    t1.add("b1", Tensor::dense(DType::float64, {3}, Bytes::copy_of(std::string(24, '\0'))));
    t1.add("w2", f32_tensor({1, 3}, {1, 2, 3}));
    t1.add("stray", f32_tensor({1}, {0}));
    w.add_tag("params", std::move(t1));
    NewTag t2;  // state for a constant, a foreign state name, w2 without state
    t2.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    t2.set_entry("trainingConfig.fb", encode_training_config(*c.training));
    for (const auto& [name, tensor] : c.params) t2.add(name, tensor);
    for (const char* v : {"w1", "b1", "b2"})
      for (const char* s : {"M", "V"}) t2.add_updater_state(v, s, c.updater_state[v][s]);
    t2.add_updater_state("scale", "M", c.params["scale"]);
    t2.add_updater_state("w1", "G", c.updater_state["w1"]["M"]);
    w.add_tag("state", std::move(t2));
    NewTag t3;  // updater state without a training config
    t3.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    for (const auto& [name, tensor] : c.params) t3.add(name, tensor);
    for (const auto& [v, states] : c.updater_state)
      for (const auto& [s, tensor] : states) t3.add_updater_state(v, s, tensor);
    w.add_tag("no-config", std::move(t3));
    NewTag t4;  // the config names variables the graph lacks, or that are no placeholders
    t4.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    TrainingConfig lost = *c.training;
    lost.feature_mapping = {"x", "w1"};
    lost.label_mapping = {"nowhere"};
    lost.loss_variables = {"lost", "loss", "gone"};
    t4.set_entry("trainingConfig.fb", encode_training_config(lost));
    for (const auto& [name, tensor] : c.params) t4.add(name, tensor);
    w.add_tag("config", std::move(t4));
    NewTag t5;  // no graph.fb: a plain tag, none of these rules apply
    t5.set_entry("trainingConfig.fb", encode_training_config(*c.training));
    t5.add("anything", f32_tensor({1}, {0}));
    t5.add_updater_state("anything", "whatever", f32_tensor({2}, {0, 0}));
    w.add_tag("plain", std::move(t5));
    w.commit();
  }
  name_graph_entries(path);
  Archive a = Archive::open(path);
  std::vector<std::pair<std::string, std::string>> want = {
      {"params/params.txt", "parameter 'b1' is float64, but variable 'b1' (float32 [3]) is not"},
      {"params/params.txt",
       "parameter 'w2' has shape [1, 3], but variable 'w2' (float32 [3, 1]) does not"},
      {"params/params.txt", "variable 'b2' (float32 [1]) has no parameter"},
      {"params/params.txt", "parameter 'stray' is not a variable of the graph"},
      {"state/updater.txt", "updater state for 'scale', a constant of type float32"},
      {"state/updater.txt", "updater state 'G' of 'w1' is not a state of updater Adam"},
      {"state/updater.txt", "trainable variable 'w2' has no updater state 'M', 'V' (updater Adam"},
      {"no-config/updater.txt", "the checkpoint has updater state but no training config"},
      {"config/trainingConfig.fb",
       "training config feature mapping names 'w1', a variable, not a placeholder"},
      {"config/trainingConfig.fb",
       "training config label mapping names 'nowhere', which is not a variable of the graph"},
      {"config/trainingConfig.fb",
       "training config loss variable 'lost' is not a variable of the graph"},
      {"config/trainingConfig.fb",
       "training config loss variable 'gone' is not a variable of the graph"},
  };
  std::vector<Problem> got = a.verify();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(got[i].entry << ": " << got[i].message);
    CHECK(got[i].entry == want[i].first);
    CHECK(got[i].message.find(want[i].second) != std::string::npos);
  }
  // load_checkpoint refuses each of those tags with its first problem.
  for (const char* tag : {"params", "state", "no-config", "config"}) {
    INFO(tag);
    CHECK_THROWS_AS(load_checkpoint(a, tag), Error);
  }
  expect_error([&] { load_checkpoint(a, "params"); }, ErrorCode::corrupt,
               "parameter 'b1' is float64");
  check_same(c, load_checkpoint(a, "good"));
}

TEST_CASE("A commit refuses a tag with graph.fb that verify would reject, writing nothing") {
  // Entries staged one by one, each valid on its own: the commit checks the
  // tag as verify does (GRAPH.md section 4), shared values by the blobs they
  // share (here stored deflated, in the old archive or in the same commit).
  TempDir dir;
  auto path = dir / "ckpt.zip";
  Checkpoint c = mlp_checkpoint();
  CheckpointSaveOptions deflated;
  deflated.param_options.compression = Compression::deflate;
  {
    Writer w = Writer::open(path);
    w.add_tag("good", checkpoint_tag(c, deflated));
    w.commit();
  }
  const std::string before = io_bytes(path);
  auto graph_tag = [&](const TrainingConfig* config) {
    NewTag t;
    t.set_entry("graph.fb", encode_graph(mlp_graph()));
    if (config) t.set_entry("trainingConfig.fb", encode_training_config(*config));
    return t;
  };
  auto shared_from = [&](const std::string& from, const std::string& w1_from) {
    NewTag t = graph_tag(nullptr);
    for (const char* p : {"scale", "w1", "b1", "w2", "b2"})
      t.share(p, from, std::string(p) == "w1" ? w1_from : p);
    return t;
  };
  struct Case {
    std::string tag, entry, text;
    std::function<void(Writer&)> stage;
  };
  const std::vector<Case> cases = {
      {"shape", "params.txt", "parameter 'w2' has shape [1, 3], but variable 'w2'",
       [&](Writer& w) {
         NewTag t = graph_tag(nullptr);
         for (const auto& [name, tensor] : c.params)
           t.add(name, name == "w2" ? f32_tensor({1, 3}, {1, 2, 3}) : tensor);
         w.add_tag("shape", std::move(t));
       }},
      {"missing", "params.txt", "variable 'b2' (float32 [1]) has no parameter",
       [&](Writer& w) {
         NewTag t = graph_tag(nullptr);
         for (const auto& [name, tensor] : c.params)
           if (name != "b2") t.add(name, tensor);
         w.add_tag("missing", std::move(t));
       }},
      {"config", "trainingConfig.fb",
       "training config loss variable 'lost' is not a variable of the graph",
       [&](Writer& w) {
         TrainingConfig lost = *c.training;
         lost.loss_variables = {"lost"};
         NewTag t = graph_tag(&lost);
         for (const auto& [name, tensor] : c.params) t.add(name, tensor);
         w.add_tag("config", std::move(t));
       }},
      {"state", "updater.txt", "updater state for 'scale', a constant",
       [&](Writer& w) {
         NewTag t = graph_tag(&*c.training);
         for (const auto& [name, tensor] : c.params) t.add(name, tensor);
         t.add_updater_state("scale", "M", c.params["scale"]);
         w.add_tag("state", std::move(t));
       }},
      {"shared-old", "params.txt", "parameter 'w1' has shape [3, 1], but variable 'w1'",
       [&](Writer& w) { w.add_tag("shared-old", shared_from("good", "w2")); }},
      {"shared-new", "params.txt", "parameter 'w1' has shape [3, 1], but variable 'w1'",
       [&](Writer& w) {
         w.add_tag("first", checkpoint_tag(mlp_checkpoint(1)));
         w.add_tag("shared-new", shared_from("first", "w2"));
       }},
  };
  for (const Case& k : cases) {
    INFO(k.tag);
    Writer w = Writer::open(path);
    k.stage(w);
    Error e = expect_error([&] { w.commit(); }, ErrorCode::invalid_argument, k.text);
    CHECK(e.context().entry == k.tag + "/" + k.entry);
    CHECK(e.context().tag == k.tag);
    CHECK(e.message().find("schemas/GRAPH.md section 4") != std::string::npos);
    CHECK(io_bytes(path) == before);
    std::size_t files = 0;
    for (const auto& f : std::filesystem::directory_iterator(dir.path())) {
      INFO(f.path());
      ++files;
    }
    CHECK(files == 1);
  }
  // Consistent tags sharing every parameter pass, from either source.
  {
    Writer w = Writer::open(path);
    w.add_tag("shared-old", shared_from("good", "w1"));
    w.add_tag("first", checkpoint_tag(mlp_checkpoint(1)));
    w.add_tag("shared-new", shared_from("first", "w1"));
    w.commit();
  }
  Archive a = Archive::open(path);
  CHECK(a.verify().empty());
  Checkpoint plain = c;
  plain.training.reset();
  plain.updater_state.clear();
  check_same(plain, load_checkpoint(a, "shared-old"));
}

TEST_CASE("verify reports at most 20 problems per entry, then how many more") {
  TempDir dir;
  auto path = dir / "many.zip";
  Checkpoint c = mlp_checkpoint();
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    TrainingConfig lost = *c.training;
    lost.loss_variables.clear();
    for (int i = 0; i < 25; ++i) lost.loss_variables.push_back("lost" + std::to_string(i));
    t.set_entry("trainingConfig.fb", encode_training_config(lost));
    for (const auto& [name, tensor] : c.params) t.add(name, tensor);
    t.add("stray", f32_tensor({1}, {0}));
    w.add_tag("t", std::move(t));
    w.commit();
  }
  name_graph_entries(path);
  std::vector<Problem> got = Archive::open(path).verify();
  REQUIRE(got.size() == 22);
  for (int i = 0; i < 20; ++i) {
    INFO(i);
    CHECK(got[i].entry == "t/trainingConfig.fb");
    CHECK(got[i].message == "training config loss variable 'lost" + std::to_string(i) +
                                "' is not a variable of the graph");
  }
  // The count follows the entry's last problem, before the next entry's.
  CHECK(got[20].entry == "t/trainingConfig.fb");
  CHECK(got[20].message == "... and 5 more problems in this entry");
  CHECK(got[21].entry == "t/params.txt");
  CHECK(got[21].message == "parameter 'stray' is not a variable of the graph");
}

TEST_CASE("verify reports the rules across a tag's entries after every entry's own problems") {
  // verify checks a tag's rules as soon as its graph.fb and
  // trainingConfig.fb are decoded (once), but reports their problems after
  // the entries' own, as when it checked them last: here tag "a"'s broken
  // rule follows the damaged graph.fb of tag "b", which comes later in the
  // archive.
  TempDir dir;
  auto path = dir / "ckpt.zip";
  Checkpoint c = mlp_checkpoint();
  {
    Writer w = Writer::open(path);
    NewTag a;
    a.set_entry(kGraphStandIn, encode_graph(mlp_graph()));
    a.set_entry("trainingConfig.fb", encode_training_config(*c.training));
    for (const auto& [name, tensor] : c.params) a.add(name, tensor);
    for (const auto& [v, states] : c.updater_state)
      for (const auto& [s, tensor] : states) a.add_updater_state(v, s, tensor);
    a.add("stray", f32_tensor({1}, {0}));
    w.add_tag("a", std::move(a));
    w.add_tag("b", checkpoint_tag(c));
    w.commit();
  }
  name_graph_entries(path);
  std::string bytes = io_bytes(path);
  Bytes g = encode_graph(mlp_graph());
  auto at = bytes.rfind(std::string(g.as_string_view()));  // tag b's
  REQUIRE(at != std::string::npos);
  REQUIRE(at != bytes.find(std::string(g.as_string_view())));
  bytes[at + 7] = 'X';
  write_file(path, bytes);
  std::vector<Problem> got = Archive::open(path).verify();
  REQUIRE(got.size() == 2);
  CHECK(got[0].entry == "b/graph.fb");
  CHECK(got[1].entry == "a/params.txt");
  CHECK(got[1].message == "parameter 'stray' is not a variable of the graph");
}

TEST_CASE("verify reports a damaged graph.fb once, not again as a broken checkpoint rule") {
  TempDir dir;
  auto path = dir / "ckpt.zip";
  {
    Writer w = Writer::open(path);
    w.add_tag("good", checkpoint_tag(mlp_checkpoint()));
    w.commit();
  }
  // Damage the identifier of the stored graph.fb: the graph entry's own
  // problem is reported, not again by the checkpoint rules.
  std::string bytes = io_bytes(path);
  Bytes g = encode_graph(mlp_graph());
  auto at = bytes.find(std::string(g.as_string_view()));
  REQUIRE(at != std::string::npos);
  bytes[at + 7] = 'X';
  write_file(path, bytes);
  std::vector<Problem> got = Archive::open(path).verify();
  REQUIRE(got.size() == 1);
  CHECK(got[0].entry == "good/graph.fb");
}

TEST_CASE("The writer refuses an invalid graph.fb; a damaged one fails to load") {
  TempDir dir;
  auto path = dir / "ckpt.zip";
  {
    Writer w = Writer::open(path);
    NewTag t;
    t.set_entry("graph.fb", Bytes::copy_of(std::string("not a flatbuffer at all")));
    w.add_tag("bad", std::move(t));
    CHECK_THROWS_AS(w.commit(), Error);
  }
  {
    Writer w = Writer::open(path);
    w.add_tag("good", checkpoint_tag(mlp_checkpoint()));
    w.commit();
  }
  // Damage the identifier of the stored graph.fb in place.
  std::string bytes = io_bytes(path);
  Bytes g = encode_graph(mlp_graph());
  auto at = bytes.find(std::string(g.as_string_view()));
  REQUIRE(at != std::string::npos);
  bytes[at + 7] = 'X';  // "MZGR" -> "MZGX"
  write_file(path, bytes);
  Archive a = Archive::open(path);
  CHECK_FALSE(a.verify().empty());
  Error e = expect_error([&] { load_checkpoint(a); }, ErrorCode::corrupt,
                         "file identifier is not \"MZGR\"");
  CHECK(e.context().entry == "good/graph.fb");
}

TEST_CASE(
    "A commit decodes graph.fb and trainingConfig.fb once: the staged-tag validator reads "
    "what the entry validators decoded") {
  const Checkpoint c = mlp_checkpoint();
  REQUIRE(c.training);
  const Bytes graph_fb = encode_graph(c.graph);
  const Bytes config_fb = training::encode_training_config(*c.training);
  std::any graph_decoded = find_entry_validator(EntryKind::graph)(graph_fb, Limits{});
  std::any config_decoded = find_entry_validator(EntryKind::training_config)(config_fb, Limits{});
  REQUIRE(std::any_cast<Graph>(&graph_decoded));
  REQUIRE(std::any_cast<training::TrainingConfig>(&config_decoded));
  std::vector<StoredValue> params, states;
  for (const auto& [name, t] : c.params) params.push_back({name, {}, t.dtype(), &t.shape()});
  for (const auto& [name, by_state] : c.updater_state)
    for (const auto& [state, t] : by_state) states.push_back({name, state, t.dtype(), &t.shape()});
  // Bytes that do not decode: accepted only when the decoded values are given.
  const Bytes garbage = Bytes::copy_of(std::string("not a flatbuffer at all"));
  const StagedTagValidator validate = entry_validators().staged_tag_validator();
  REQUIRE(static_cast<bool>(validate));
  StagedTag staged{.tag = "t",
                   .graph = &garbage,
                   .training_config = &garbage,
                   .decoded_graph = graph_decoded,
                   .decoded_training_config = config_decoded,
                   .params = params,
                   .states = states};
  CHECK_NOTHROW(validate(staged, Limits{}));
  staged.decoded_training_config.reset();
  expect_error([&] { validate(staged, Limits{}); }, ErrorCode::corrupt, "trainingConfig.fb");
  staged.decoded_training_config = config_decoded;
  staged.decoded_graph.reset();
  expect_error([&] { validate(staged, Limits{}); }, ErrorCode::corrupt, "graph.fb");
}

// The extension path documented in schemas/graph.fbs: a later version adds
// tag-level entries such as params_maps.txt; this version's writer keeps
// them when it appends or removes other tags, and loading ignores them.
TEST_CASE("Entries of a later version (params_maps.txt) survive and do not disturb loading") {
  TempDir dir;
  auto path = dir / "future.zip";
  {
    Writer w = Writer::open(path);
    NewTag t = checkpoint_tag(mlp_checkpoint());
    t.set_entry("params_maps.txt", Bytes::copy_of(std::string("vocab 0\n")));
    t.set_entry("params_maps/0.fb", Bytes::copy_of(std::string("future map blob")));
    w.add_tag("v2-tag", std::move(t));
    w.commit();
  }
  {
    Writer w = Writer::open(path);
    w.add_tag("v1-tag", checkpoint_tag(mlp_checkpoint(3)));
    w.commit();
  }
  {
    Writer w = Writer::open(path);
    w.remove_tag("v1-tag");
    w.commit();
  }
  Archive a = Archive::open(path);
  CHECK(a.entry("v2-tag/params_maps.txt").as_string_view() == "vocab 0\n");
  CHECK(a.entry("v2-tag/params_maps/0.fb").as_string_view() == "future map blob");
  check_same(mlp_checkpoint(), load_checkpoint(a, "v2-tag"));
  CHECK(a.verify().empty());
}

TEST_CASE("Names that need escaping: params.txt and updater.txt as FORMAT.md 4.2 spells them") {
  TempDir dir;
  auto path = dir / "escaped.zip";
  Checkpoint c;
  c.graph.add_placeholder("in put", DType::float32, Shape{kUnknownDim, 2});
  c.graph.add_variable("enc/layer 1#w%", DType::float32, {2});
  c.graph.add_variable("a\nb", DType::float32, {1});
  c.graph.add_array("out", DType::float32, std::nullopt);
  c.graph.add_op("op 1", "add", {"in put", "enc/layer 1#w%", "a\nb"}, {"out"});
  TrainingConfig t;
  t.updater = Nesterovs{};
  t.feature_mapping = {"in put"};
  c.training = t;
  c.params["enc/layer 1#w%"] = f32_tensor({2}, {1.0f, 2.0f});
  c.params["a\nb"] = f32_tensor({1}, {3.0f});
  c.updater_state["enc/layer 1#w%"]["V"] = f32_tensor({2}, {0.5f, 0.25f});
  c.updater_state["a\nb"]["V"] = f32_tensor({1}, {0.125f});
  {
    Writer w = Writer::open(path);
    w.add_tag("s", checkpoint_tag(c));
    w.commit();
  }
  Archive a = Archive::open(path);
  // Space, '#', '%' and LF are written %XX; '/' is not; blobs are numbered
  // per table in line order.
  auto text = [&](const char* entry) {
    Bytes b = a.entry(entry, ReadMode::copy);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  };
  CHECK(text("s/params.txt") == "enc/layer%201%23w%25 0\na%0Ab 1\n");
  CHECK(text("s/updater.txt") == "enc/layer%201%23w%25 V 0\na%0Ab V 1\n");
  check_same(c, load_checkpoint(a, "s"));
}
