#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "expect_error_text.hpp"
#include "graph_fixtures.hpp"
#include "modelzip/error.hpp"

using namespace modelzip;
using namespace modelzip::testing;

namespace {

TrainingConfig round_trip(const TrainingConfig& c) {
  return decode_training_config(encode_training_config(c));
}

}  // namespace

TEST_CASE("Defaults are Deeplearning4j's") {
  Adam adam;
  CHECK(adam.learning_rate == 1e-3);
  CHECK(adam.beta1 == 0.9);
  CHECK(adam.beta2 == 0.999);
  CHECK(adam.epsilon == 1e-8);
  CHECK(Nesterovs{}.learning_rate == 0.1);
  CHECK(Nesterovs{}.momentum == 0.9);
  CHECK(RmsProp{}.rms_decay == 0.95);
  CHECK(AdaGrad{}.epsilon == 1e-6);
  CHECK(AdaDelta{}.rho == 0.95);
  CHECK(AdamW{}.weight_decay == 0.01);
  TrainingConfig c;
  CHECK(std::holds_alternative<Adam>(c.updater));
  CHECK(c.minimize);
  CHECK(round_trip(c) == c);
}

TEST_CASE("Every updater round-trips with its own hyperparameters") {
  const std::vector<Updater> updaters = {
      Sgd{0.5},
      Nesterovs{0.25, 0.5},
      Adam{0.01, 0.8, 0.99, 1e-7},
      AdamW{0.02, 0.7, 0.98, 1e-6, 0.1},
      AdaMax{0.03, 0.6, 0.97, 1e-5},
      AmsGrad{0.04, 0.5, 0.96, 1e-4},
      Nadam{0.05, 0.4, 0.95, 1e-3},
      RmsProp{0.06, 0.9, 1e-2},
      AdaGrad{0.07, 1e-1},
      AdaDelta{0.5, 0.25},
      NoOp{},
  };
  for (const Updater& u : updaters) {
    INFO(updater_name(u));
    TrainingConfig c;
    c.updater = u;
    TrainingConfig d = round_trip(c);
    CHECK(d == c);
    CHECK(d.updater.index() == u.index());
  }
}

TEST_CASE("Updater names and state names") {
  auto names = [](const Updater& u) {
    auto s = updater_state_names(u);
    return std::vector<std::string>(s.begin(), s.end());
  };
  using V = std::vector<std::string>;
  CHECK(names(Sgd{}) == V{});
  CHECK(names(NoOp{}) == V{});
  CHECK(names(Nesterovs{}) == V{"V"});
  CHECK(names(Adam{}) == V{"M", "V"});
  CHECK(names(AdamW{}) == V{"M", "V"});
  CHECK(names(AdaMax{}) == V{"M", "V"});
  CHECK(names(Nadam{}) == V{"M", "V"});
  CHECK(names(AmsGrad{}) == V{"M", "V", "V_HAT"});
  CHECK(names(RmsProp{}) == V{"G"});
  CHECK(names(AdaGrad{}) == V{"grad"});
  CHECK(names(AdaDelta{}) == V{"msg", "msdx"});
  CHECK(updater_name(AmsGrad{}) == "AmsGrad");
  CHECK(updater_learning_rate(Sgd{0.25}) == 0.25);
  CHECK_FALSE(updater_learning_rate(AdaDelta{}).has_value());
  CHECK_FALSE(updater_learning_rate(NoOp{}).has_value());
}

TEST_CASE("Schedule values follow the documented formulas") {
  using doctest::Approx;
  CHECK(schedule_value(FixedSchedule{0.3}, 100, 5) == 0.3);
  StepSchedule step{ScheduleType::iteration, 0.1, 0.5, 10};
  CHECK(schedule_value(step, 9, 0) == Approx(0.1));
  CHECK(schedule_value(step, 25, 0) == Approx(0.025));
  step.type = ScheduleType::epoch;
  CHECK(schedule_value(step, 25, 10) == Approx(0.05));
  CHECK(schedule_value(ExponentialSchedule{ScheduleType::iteration, 0.2, 0.9}, 2, 0) ==
        Approx(0.162));
  CHECK(schedule_value(InverseSchedule{ScheduleType::iteration, 1.0, 0.5, 2.0}, 2, 0) ==
        Approx(0.25));
  PolySchedule poly{ScheduleType::iteration, 1.0, 2.0, 10};
  CHECK(schedule_value(poly, 5, 0) == Approx(0.25));
  CHECK(schedule_value(poly, 20, 0) == 0.0);  // clamped at max_iterations
  CHECK(schedule_value(SigmoidSchedule{ScheduleType::iteration, 1.0, 1.0, 3}, 3, 0) == Approx(0.5));
  // s = (10 - 2) / 2 = 4, d = 0.9 / 4 = 0.225.
  CycleSchedule cycle{ScheduleType::iteration, 0.1, 1.0, 10, 2, 0.5};
  CHECK(schedule_value(cycle, 0, 0) == Approx(0.1));
  CHECK(schedule_value(cycle, 2, 0) == Approx(0.55));
  CHECK(schedule_value(cycle, 4, 0) == Approx(1.0));
  CHECK(schedule_value(cycle, 6, 0) == Approx(0.55));
  CHECK(schedule_value(cycle, 8, 0) == Approx(0.1));
  CHECK(schedule_value(cycle, 9, 0) == Approx(0.05));
  CHECK(schedule_value(cycle, 12, 0) == Approx(0.55));  // next cycle
  MapSchedule map{ScheduleType::iteration, {{0, 1.0}, {5, 0.5}, {10, 0.1}}};
  CHECK(schedule_value(map, 4, 0) == 1.0);
  CHECK(schedule_value(map, 5, 0) == 0.5);
  CHECK(schedule_value(map, 100, 0) == 0.1);
  Schedule warm = ramp(FixedSchedule{2.0}, 4);
  CHECK(schedule_value(warm, 0, 0) == 0.5);
  CHECK(schedule_value(warm, 1, 0) == 1.0);
  CHECK(schedule_value(warm, 3, 0) == 2.0);
  CHECK(schedule_value(warm, 10, 0) == 2.0);
  CHECK(schedule_value(warm, -5, 0) == 0.5);  // negative counts are 0

  TrainingConfig c;
  c.updater = Sgd{0.5};
  CHECK(learning_rate_at(c, 7, 0) == 0.5);
  c.learning_rate_schedule = map;
  CHECK(learning_rate_at(c, 7, 0) == 0.5);
  CHECK(learning_rate_at(c, 70, 0) == 0.1);
  c.updater = NoOp{};
  c.learning_rate_schedule.reset();
  CHECK_FALSE(learning_rate_at(c, 0, 0).has_value());
}

TEST_CASE("Schedules, regularization and everything else round-trip") {
  TrainingConfig c;
  c.updater = Adam{0.01, 0.9, 0.999, 1e-8};
  c.learning_rate_schedule = ramp(MapSchedule{ScheduleType::epoch, {{0, 0.1}, {3, 0.01}}}, 100);
  c.regularization = {
      Regularization{RegularizationType::l1, FixedSchedule{1e-5}, true},
      Regularization{RegularizationType::l2, ExponentialSchedule{ScheduleType::epoch, 1e-4, 0.5},
                     true},
      Regularization{RegularizationType::weight_decay, FixedSchedule{0.01}, false},
  };
  c.minimize = false;
  c.feature_mapping = {"x"};
  c.label_mapping = {"label"};
  c.feature_mask_mapping = {"xmask"};
  c.label_mask_mapping = {"lmask"};
  c.loss_variables = {"loss"};
  c.iteration_count = 1234567890123;
  c.epoch_count = 7;
  c.properties = {{"seed", "42"}, {"loader.position", "17"}};
  TrainingConfig d = round_trip(c);
  CHECK(d == c);
  const auto& r = std::get<RampSchedule>(*d.learning_rate_schedule);
  CHECK(r.num_iterations == 100);
  CHECK(std::get<MapSchedule>(*r.base).steps[1].start == 3);
  CHECK_FALSE(d.regularization[2].apply_learning_rate);
  CHECK(d.properties.at("seed") == "42");
}

TEST_CASE("Random configs round-trip exactly") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    TrainingConfig c = random_config(rng);
    INFO("config " << i);
    Bytes fb = encode_training_config(c);
    CHECK(std::string(reinterpret_cast<const char*>(fb.data()) + 4, 4) == "MZTC");
    TrainingConfig d = decode_training_config(fb);
    CHECK(d == c);
    CHECK(encode_training_config(d).as_string_view() == fb.as_string_view());
  }
}

TEST_CASE("validate_training_config names the broken rule") {
  auto check = [](auto&& edit, const std::string& text) {
    TrainingConfig c;
    edit(c);
    expect_error([&] { validate_training_config(c); }, ErrorCode::invalid_argument, text);
    expect_error([&] { encode_training_config(c); }, ErrorCode::invalid_argument, text);
  };
  check(
      [](TrainingConfig& c) {
        c.updater = Adam{std::nan(""), 0.9, 0.999, 1e-8};
      },
      "updater Adam learning_rate is not finite");
  check(
      [](TrainingConfig& c) {
        c.updater = Adam{0.1, 1.0, 0.999, 1e-8};
      },
      "updater Adam beta1 = 1.000000 is outside [0, 1)");
  check([](TrainingConfig& c) { c.updater = Sgd{-1}; }, "updater Sgd learning_rate = -1");
  check(
      [](TrainingConfig& c) {
        c.updater = RmsProp{0.1, 1.5, 1e-8};
      },
      "updater RmsProp rms_decay = 1.500000 is outside [0, 1]");
  check(
      [](TrainingConfig& c) {
        c.updater = AdaDelta{};
        c.learning_rate_schedule = FixedSchedule{0.1};
      },
      "updater AdaDelta has no learning rate");
  check(
      [](TrainingConfig& c) {
        c.learning_rate_schedule = StepSchedule{{}, 1, 1, 0};
      },
      "learning-rate schedule (StepSchedule) step must be > 0");
  check(
      [](TrainingConfig& c) {
        c.learning_rate_schedule = PolySchedule{{}, 1, 1, 0};
      },
      "max_iterations must be > 0");
  check([](TrainingConfig& c) { c.learning_rate_schedule = CycleSchedule{{}, 1, 2, 3, 2, 1}; },
        "needs cycle_length >= annealing_length + 2");
  check([](TrainingConfig& c) { c.learning_rate_schedule = MapSchedule{}; }, "has no steps");
  check(
      [](TrainingConfig& c) {
        c.learning_rate_schedule = MapSchedule{{}, {{1, 0.1}}};
      },
      "first step starts at 1, not 0");
  check(
      [](TrainingConfig& c) {
        c.learning_rate_schedule = MapSchedule{{}, {{0, 0.1}, {5, 0.2}, {5, 0.3}}};
      },
      "step 2 starts at 5, not after the previous (5)");
  check(
      [](TrainingConfig& c) {
        c.learning_rate_schedule = RampSchedule{nullptr, 3};
      },
      "has no base schedule");
  check([](TrainingConfig& c) { c.learning_rate_schedule = ramp(FixedSchedule{1}, 0); },
        "num_iterations must be > 0");
  check(
      [](TrainingConfig& c) {
        Schedule s = FixedSchedule{1};
        for (int i = 0; i < kMaxScheduleDepth; ++i) s = ramp(s, 1);
        c.learning_rate_schedule = s;
      },
      "nests schedules more than 16 deep");
  check(
      [](TrainingConfig& c) {
        c.regularization = {Regularization{RegularizationType::l2, FixedSchedule{INFINITY}}};
      },
      "regularization 0 coefficient (FixedSchedule) value is not finite");
  check([](TrainingConfig& c) { c.feature_mapping = {"x", ""}; }, "feature mapping 1 is empty");
  check([](TrainingConfig& c) { c.iteration_count = -1; }, "iteration_count -1 is negative");
  check([](TrainingConfig& c) { c.properties["k"] = "\xFF"; }, "property 'k' is not valid UTF-8");
  expect_error(
      [] {
        schedule_value(StepSchedule{{}, 1, 1, 0}, 0, 0);
      },
      ErrorCode::invalid_argument, "step must be > 0");
}
