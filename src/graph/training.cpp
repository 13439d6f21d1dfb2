#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "core/utf8.hpp"
#include "graph/flatbuffer_input.hpp"
#include "graph/rules.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/training.hpp"

namespace modelzip::training {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

constexpr std::string_view kV[] = {"V"};
constexpr std::string_view kMV[] = {"M", "V"};
constexpr std::string_view kMVVhat[] = {"M", "V", "V_HAT"};
constexpr std::string_view kG[] = {"G"};
constexpr std::string_view kGrad[] = {"grad"};
constexpr std::string_view kAdaDelta[] = {"msg", "msdx"};

}  // namespace

std::string_view updater_name(const Updater& updater) noexcept {
  static constexpr std::string_view names[] = {"Sgd",     "Nesterovs", "Adam",  "AdamW",
                                               "AdaMax",  "AmsGrad",   "Nadam", "RmsProp",
                                               "AdaGrad", "AdaDelta",  "NoOp"};
  static_assert(std::size(names) == std::variant_size_v<Updater>);
  return updater.valueless_by_exception() ? "invalid" : names[updater.index()];
}

std::span<const std::string_view> updater_state_names(const Updater& updater) noexcept {
  using Names = std::span<const std::string_view>;
  return std::visit(
      Overloaded{
          [](const Sgd&) { return Names(); }, [](const NoOp&) { return Names(); },
          [](const Nesterovs&) { return Names(kV); }, [](const AmsGrad&) { return Names(kMVVhat); },
          [](const RmsProp&) { return Names(kG); }, [](const AdaGrad&) { return Names(kGrad); },
          [](const AdaDelta&) { return Names(kAdaDelta); },
          [](const auto&) { return Names(kMV); },  // Adam, AdamW, AdaMax, Nadam
      },
      updater);
}

std::optional<double> updater_learning_rate(const Updater& updater) noexcept {
  return std::visit(Overloaded{
                        [](const AdaDelta&) -> std::optional<double> { return std::nullopt; },
                        [](const NoOp&) -> std::optional<double> { return std::nullopt; },
                        [](const auto& u) -> std::optional<double> { return u.learning_rate; },
                    },
                    updater);
}

bool RampSchedule::operator==(const RampSchedule& other) const {
  if (num_iterations != other.num_iterations) return false;
  if (!base || !other.base) return !base && !other.base;
  return *base == *other.base;
}

RampSchedule ramp(Schedule base, std::int64_t num_iterations) {
  return RampSchedule{std::make_shared<const Schedule>(std::move(base)), num_iterations};
}

std::string_view schedule_name(const Schedule& schedule) noexcept {
  static constexpr std::string_view names[] = {
      "FixedSchedule",   "StepSchedule",  "ExponentialSchedule", "InverseSchedule", "PolySchedule",
      "SigmoidSchedule", "CycleSchedule", "MapSchedule",         "RampSchedule"};
  static_assert(std::size(names) == std::variant_size_v<ScheduleVariant>);
  return schedule.valueless_by_exception() ? "invalid" : names[schedule.index()];
}

std::string_view schedule_type_name(ScheduleType type) noexcept {
  switch (type) {
    case ScheduleType::iteration:
      return "iteration";
    case ScheduleType::epoch:
      return "epoch";
  }
  return "unknown";
}

std::string_view regularization_name(RegularizationType type) noexcept {
  switch (type) {
    case RegularizationType::l1:
      return "l1";
    case RegularizationType::l2:
      return "l2";
    case RegularizationType::weight_decay:
      return "weight_decay";
  }
  return "unknown";
}

namespace {

void check_schedule(const Schedule& s, const std::string& what,
                    const graph::detail::BrokenRules& broken, int depth);

double value_at(const Schedule& schedule, std::int64_t iteration, std::int64_t epoch) {
  auto pick = [&](ScheduleType t) {
    return static_cast<double>(t == ScheduleType::epoch ? epoch : iteration);
  };
  return std::visit(
      Overloaded{
          [&](const FixedSchedule& s) { return s.value; },
          [&](const StepSchedule& s) {
            return s.initial_value * std::pow(s.decay_rate, std::floor(pick(s.type) / s.step));
          },
          [&](const ExponentialSchedule& s) {
            return s.initial_value * std::pow(s.gamma, pick(s.type));
          },
          [&](const InverseSchedule& s) {
            return s.initial_value / std::pow(1.0 + s.gamma * pick(s.type), s.power);
          },
          [&](const PolySchedule& s) {
            double max = static_cast<double>(s.max_iterations);
            double i = std::min(pick(s.type), max);
            return s.initial_value * std::pow(1.0 - i / max, s.power);
          },
          [&](const SigmoidSchedule& s) {
            return s.initial_value /
                   (1.0 + std::exp(-s.gamma * (pick(s.type) - static_cast<double>(s.step_size))));
          },
          [&](const CycleSchedule& s) {
            std::int64_t i = s.type == ScheduleType::epoch ? epoch : iteration;
            std::int64_t step = (s.cycle_length - s.annealing_length) / 2;
            std::int64_t p = i % s.cycle_length;
            double d = (s.max_value - s.initial_value) / static_cast<double>(step);
            if (p < step) return s.initial_value + d * static_cast<double>(p);
            if (p < 2 * step) return s.max_value - d * static_cast<double>(p - step);
            return s.initial_value * std::pow(s.annealing_decay, static_cast<double>(p - 2 * step));
          },
          [&](const MapSchedule& s) {
            std::int64_t i = s.type == ScheduleType::epoch ? epoch : iteration;
            auto it = std::upper_bound(
                s.steps.begin(), s.steps.end(), i,
                [](std::int64_t v, const ScheduleStep& st) { return v < st.start; });
            return std::prev(it)->value;  // steps[0].start == 0 <= i
          },
          [&](const RampSchedule& s) {
            double base = value_at(*s.base, iteration, epoch);
            if (iteration >= s.num_iterations) return base;
            return base * static_cast<double>(iteration + 1) /
                   static_cast<double>(s.num_iterations);
          },
      },
      static_cast<const ScheduleVariant&>(schedule));
}

}  // namespace

double schedule_value(const Schedule& schedule, std::int64_t iteration, std::int64_t epoch) {
  check_schedule(schedule, "schedule", graph::detail::BrokenRules(ErrorCode::invalid_argument), 0);
  return value_at(schedule, std::max<std::int64_t>(iteration, 0), std::max<std::int64_t>(epoch, 0));
}

std::optional<double> learning_rate_at(const TrainingConfig& config, std::int64_t iteration,
                                       std::int64_t epoch) {
  auto fixed = updater_learning_rate(config.updater);
  if (!fixed) return std::nullopt;
  if (config.learning_rate_schedule)
    return schedule_value(*config.learning_rate_schedule, iteration, epoch);
  return fixed;
}

void validate_training_config(const TrainingConfig& config) {
  graph::detail::check_training_config(config, ErrorCode::invalid_argument);
}

// ---- Rules -------------------------------------------------------------------

namespace {

using graph::detail::quote_name;

using graph::detail::BrokenRules;

// Each check reports one problem at most and returns whether it passed.
bool finite(double v, const std::string& what, const BrokenRules& broken) {
  if (std::isfinite(v)) return true;
  broken(what + " is not finite");
  return false;
}
bool at_least_zero(double v, const std::string& what, const BrokenRules& broken) {
  if (!finite(v, what, broken)) return false;
  if (v >= 0) return true;
  broken(what + " = " + std::to_string(v) + " is negative");
  return false;
}
bool unit_interval(double v, const std::string& what, const BrokenRules& broken, bool one_allowed) {
  if (!finite(v, what, broken)) return false;
  if (v >= 0 && v <= 1 && (one_allowed || v != 1)) return true;
  broken(what + " = " + std::to_string(v) + " is outside " + (one_allowed ? "[0, 1]" : "[0, 1)"));
  return false;
}
void check_type(ScheduleType t, const std::string& what, const BrokenRules& broken) {
  if (t != ScheduleType::iteration && t != ScheduleType::epoch)
    broken(what + " has unknown schedule type " + std::to_string(static_cast<int>(t)));
}

void check_schedule(const Schedule& schedule, const std::string& what, const BrokenRules& broken,
                    int depth) {
  if (depth >= kMaxScheduleDepth)
    return broken(what + " nests schedules more than " + std::to_string(kMaxScheduleDepth) +
                  " deep");
  if (schedule.valueless_by_exception()) return broken(what + " holds no schedule");
  const std::string w = what + " (" + std::string(schedule_name(schedule)) + ")";
  std::visit(
      Overloaded{
          [&](const FixedSchedule& s) { finite(s.value, w + " value", broken); },
          [&](const StepSchedule& s) {
            check_type(s.type, w, broken);
            finite(s.initial_value, w + " initial_value", broken);
            finite(s.decay_rate, w + " decay_rate", broken);
            if (finite(s.step, w + " step", broken) && !(s.step > 0))
              broken(w + " step must be > 0");
          },
          [&](const ExponentialSchedule& s) {
            check_type(s.type, w, broken);
            finite(s.initial_value, w + " initial_value", broken);
            finite(s.gamma, w + " gamma", broken);
          },
          [&](const InverseSchedule& s) {
            check_type(s.type, w, broken);
            finite(s.initial_value, w + " initial_value", broken);
            finite(s.gamma, w + " gamma", broken);
            finite(s.power, w + " power", broken);
          },
          [&](const PolySchedule& s) {
            check_type(s.type, w, broken);
            finite(s.initial_value, w + " initial_value", broken);
            finite(s.power, w + " power", broken);
            if (s.max_iterations <= 0) broken(w + " max_iterations must be > 0");
          },
          [&](const SigmoidSchedule& s) {
            check_type(s.type, w, broken);
            finite(s.initial_value, w + " initial_value", broken);
            finite(s.gamma, w + " gamma", broken);
          },
          [&](const CycleSchedule& s) {
            check_type(s.type, w, broken);
            finite(s.initial_value, w + " initial_value", broken);
            finite(s.max_value, w + " max_value", broken);
            finite(s.annealing_decay, w + " annealing_decay", broken);
            if (s.annealing_length < 0) broken(w + " annealing_length is negative");
            if (s.cycle_length <= s.annealing_length ||
                (s.cycle_length - s.annealing_length) / 2 < 1)
              broken(w + " needs cycle_length >= annealing_length + 2 (cycle_length " +
                     std::to_string(s.cycle_length) + ", annealing_length " +
                     std::to_string(s.annealing_length) + ")");
          },
          [&](const MapSchedule& s) {
            check_type(s.type, w, broken);
            if (s.steps.empty()) return broken(w + " has no steps");
            if (s.steps[0].start != 0)
              broken(w + " first step starts at " + std::to_string(s.steps[0].start) + ", not 0");
            for (std::size_t i = 0; i < s.steps.size(); ++i) {
              finite(s.steps[i].value, w + " step " + std::to_string(i) + " value", broken);
              if (i > 0 && s.steps[i].start <= s.steps[i - 1].start)
                broken(w + " step " + std::to_string(i) + " starts at " +
                       std::to_string(s.steps[i].start) + ", not after the previous (" +
                       std::to_string(s.steps[i - 1].start) + ")");
            }
          },
          [&](const RampSchedule& s) {
            if (!s.base) broken(w + " has no base schedule");
            if (s.num_iterations <= 0) broken(w + " num_iterations must be > 0");
            if (s.base) check_schedule(*s.base, w + " base", broken, depth + 1);
          },
      },
      static_cast<const ScheduleVariant&>(schedule));
}

void check_updater(const Updater& updater, const BrokenRules& broken) {
  if (updater.valueless_by_exception()) return broken("the updater holds no value");
  const std::string w = "updater " + std::string(updater_name(updater));
  auto adam_like = [&](const auto& u) {
    at_least_zero(u.learning_rate, w + " learning_rate", broken);
    unit_interval(u.beta1, w + " beta1", broken, false);
    unit_interval(u.beta2, w + " beta2", broken, false);
    at_least_zero(u.epsilon, w + " epsilon", broken);
  };
  std::visit(
      Overloaded{
          [&](const Sgd& u) { at_least_zero(u.learning_rate, w + " learning_rate", broken); },
          [&](const Nesterovs& u) {
            at_least_zero(u.learning_rate, w + " learning_rate", broken);
            at_least_zero(u.momentum, w + " momentum", broken);
          },
          [&](const Adam& u) { adam_like(u); },
          [&](const AdamW& u) {
            adam_like(u);
            at_least_zero(u.weight_decay, w + " weight_decay", broken);
          },
          [&](const AdaMax& u) { adam_like(u); },
          [&](const AmsGrad& u) { adam_like(u); },
          [&](const Nadam& u) { adam_like(u); },
          [&](const RmsProp& u) {
            at_least_zero(u.learning_rate, w + " learning_rate", broken);
            unit_interval(u.rms_decay, w + " rms_decay", broken, true);
            at_least_zero(u.epsilon, w + " epsilon", broken);
          },
          [&](const AdaGrad& u) {
            at_least_zero(u.learning_rate, w + " learning_rate", broken);
            at_least_zero(u.epsilon, w + " epsilon", broken);
          },
          [&](const AdaDelta& u) {
            unit_interval(u.rho, w + " rho", broken, true);
            at_least_zero(u.epsilon, w + " epsilon", broken);
          },
          [&](const NoOp&) {},
      },
      updater);
}

void check_names(const std::vector<std::string>& names, const std::string& what,
                 const BrokenRules& broken) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) broken(what + " " + std::to_string(i) + " is empty");
    if (auto bad = modelzip::detail::utf8_invalid_at(names[i]))
      broken(what + " " + std::to_string(i) + " is not valid UTF-8 (byte " + std::to_string(*bad) +
             ")");
  }
}

}  // namespace
}  // namespace modelzip::training

namespace modelzip::graph::detail {

using namespace modelzip::training;

void check_training_config(const TrainingConfig& config, const BrokenRules& broken) {
  check_updater(config.updater, broken);
  if (config.learning_rate_schedule) {
    if (!updater_learning_rate(config.updater))
      broken("a learning-rate schedule is set, but updater " +
             std::string(updater_name(config.updater)) + " has no learning rate");
    check_schedule(*config.learning_rate_schedule, "learning-rate schedule", broken, 0);
  }
  for (std::size_t i = 0; i < config.regularization.size(); ++i) {
    const Regularization& r = config.regularization[i];
    const std::string w = "regularization " + std::to_string(i);
    if (static_cast<unsigned>(r.type) > static_cast<unsigned>(RegularizationType::weight_decay))
      broken(w + " has unknown type " + std::to_string(static_cast<unsigned>(r.type)));
    check_schedule(r.coefficient, w + " coefficient", broken, 0);
  }
  check_names(config.feature_mapping, "feature mapping", broken);
  check_names(config.label_mapping, "label mapping", broken);
  check_names(config.feature_mask_mapping, "feature mask mapping", broken);
  check_names(config.label_mask_mapping, "label mask mapping", broken);
  check_names(config.loss_variables, "loss variable", broken);
  if (config.iteration_count < 0)
    broken("iteration_count " + std::to_string(config.iteration_count) + " is negative");
  if (config.epoch_count < 0)
    broken("epoch_count " + std::to_string(config.epoch_count) + " is negative");
  for (const auto& [key, value] : config.properties) {
    if (auto bad = modelzip::detail::utf8_invalid_at(key))
      broken("property key is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
    if (auto bad = modelzip::detail::utf8_invalid_at(value))
      broken("property " + quote_name(key) + " is not valid UTF-8 (byte " + std::to_string(*bad) +
             ")");
  }
}

void check_config_against_graph(const TrainingConfig& config, const Graph& graph,
                                const std::function<void(std::string message)>& report) {
  auto placeholders = [&](const std::vector<std::string>& names, const std::string& what) {
    for (const auto& n : names) {
      const Variable* v = graph.find_variable(n);
      if (!v)
        report(what + " names " + quote_name(n) + ", which is not a variable of the graph");
      else if (v->kind != VariableKind::placeholder)
        report(what + " names " + quote_name(n) + ", a " +
               std::string(variable_kind_name(v->kind)) + ", not a placeholder");
    }
  };
  placeholders(config.feature_mapping, "training config feature mapping");
  placeholders(config.label_mapping, "training config label mapping");
  placeholders(config.feature_mask_mapping, "training config feature mask mapping");
  placeholders(config.label_mask_mapping, "training config label mask mapping");
  for (const auto& n : config.loss_variables)
    if (!graph.find_variable(n))
      report("training config loss variable " + quote_name(n) + " is not a variable of the graph");
}

void check_config_against_graph(const TrainingConfig& config, const Graph& graph, ErrorCode code) {
  check_config_against_graph(config, graph, [code](std::string message) { fail(code, message); });
}

}  // namespace modelzip::graph::detail
