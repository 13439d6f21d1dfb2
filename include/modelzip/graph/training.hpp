// TrainingConfig: how a checkpoint tag is being trained -- the updater
// (optimizer) and its hyperparameters, learning-rate schedule,
// regularization, data-set mappings, loss variables and progress counters.
// Stored as <tag>/trainingConfig.fb (schemas/training.fbs).
//
// Defaults of every struct are the schema's defaults (Deeplearning4j's
// values), so a default-constructed Adam{} is Deeplearning4j's Adam.
//
// Validity rules (validate_training_config, encode_training_config and, for
// untrusted bytes, decode_training_config):
//  - every floating-point hyperparameter and schedule value is finite;
//    learning rates, momentum, epsilons and weight decay are >= 0; Adam-style
//    beta1, beta2 lie in [0, 1); rms_decay and rho in [0, 1];
//  - schedules: StepSchedule step > 0; PolySchedule max_iterations > 0;
//    CycleSchedule 0 <= annealing_length and
//    (cycle_length - annealing_length) / 2 >= 1; MapSchedule steps non-empty,
//    strictly increasing starts, the first 0; RampSchedule base present and
//    num_iterations > 0; schedules nest at most kMaxScheduleDepth deep;
//  - no learning_rate_schedule for AdaDelta and NoOp (no learning rate);
//  - iteration_count, epoch_count >= 0; mapping and loss variable names
//    non-empty UTF-8; property keys and values UTF-8.
//
// Thread safety: value types; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/export.hpp"
#include "modelzip/limits.hpp"

namespace modelzip::training {

// ---- Updaters ------------------------------------------------------------

struct MODELZIP_API Sgd {
  double learning_rate = 1e-3;
  bool operator==(const Sgd&) const = default;
};
struct MODELZIP_API Nesterovs {
  double learning_rate = 0.1;
  double momentum = 0.9;
  bool operator==(const Nesterovs&) const = default;
};
struct MODELZIP_API Adam {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  bool operator==(const Adam&) const = default;
};
struct MODELZIP_API AdamW {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.01;
  bool operator==(const AdamW&) const = default;
};
struct MODELZIP_API AdaMax {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  bool operator==(const AdaMax&) const = default;
};
struct MODELZIP_API AmsGrad {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  bool operator==(const AmsGrad&) const = default;
};
struct MODELZIP_API Nadam {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  bool operator==(const Nadam&) const = default;
};
struct MODELZIP_API RmsProp {
  double learning_rate = 0.1;
  double rms_decay = 0.95;
  double epsilon = 1e-8;
  bool operator==(const RmsProp&) const = default;
};
struct MODELZIP_API AdaGrad {
  double learning_rate = 0.1;
  double epsilon = 1e-6;
  bool operator==(const AdaGrad&) const = default;
};
struct MODELZIP_API AdaDelta {  // no learning rate
  double rho = 0.95;
  double epsilon = 1e-6;
  bool operator==(const AdaDelta&) const = default;
};
struct MODELZIP_API NoOp {
  bool operator==(const NoOp&) const = default;
};

// Alternatives in the order of the schema's union (do not reorder).
using Updater = std::variant<Sgd, Nesterovs, Adam, AdamW, AdaMax, AmsGrad, Nadam, RmsProp, AdaGrad,
                             AdaDelta, NoOp>;

// "Sgd", "Nesterovs", "Adam", "AdamW", "AdaMax", "AmsGrad", "Nadam",
// "RmsProp", "AdaGrad", "AdaDelta", "NoOp" (the schema's names).
MODELZIP_API std::string_view updater_name(const Updater& updater) noexcept;
// Names of the state arrays the updater keeps per trainable variable
// (updater.txt), e.g. {"M", "V"} for Adam; empty for Sgd and NoOp.
MODELZIP_API std::span<const std::string_view> updater_state_names(const Updater& updater) noexcept;
// The fixed learning rate; nullopt for AdaDelta and NoOp.
MODELZIP_API std::optional<double> updater_learning_rate(const Updater& updater) noexcept;

// ---- Schedules -------------------------------------------------------------
// i is the iteration count or the epoch count (both from 0), as `type` says.
// The formulas are in schemas/training.fbs and in schedule_value below.

enum class ScheduleType : std::uint8_t { iteration = 0, epoch = 1 };

struct MODELZIP_API FixedSchedule {  // value
  double value = 0;
  bool operator==(const FixedSchedule&) const = default;
};
struct MODELZIP_API StepSchedule {  // initial_value * decay_rate ^ floor(i / step)
  ScheduleType type = ScheduleType::iteration;
  double initial_value = 0;
  double decay_rate = 0;
  double step = 1;
  bool operator==(const StepSchedule&) const = default;
};
struct MODELZIP_API ExponentialSchedule {  // initial_value * gamma ^ i
  ScheduleType type = ScheduleType::iteration;
  double initial_value = 0;
  double gamma = 0;
  bool operator==(const ExponentialSchedule&) const = default;
};
struct MODELZIP_API InverseSchedule {  // initial_value / (1 + gamma * i) ^ power
  ScheduleType type = ScheduleType::iteration;
  double initial_value = 0;
  double gamma = 0;
  double power = 0;
  bool operator==(const InverseSchedule&) const = default;
};
struct MODELZIP_API PolySchedule {  // initial_value * (1 - min(i, max) / max) ^ power
  ScheduleType type = ScheduleType::iteration;
  double initial_value = 0;
  double power = 0;
  std::int64_t max_iterations = 1;
  bool operator==(const PolySchedule&) const = default;
};
struct MODELZIP_API SigmoidSchedule {  // initial_value / (1 + exp(-gamma * (i - step_size)))
  ScheduleType type = ScheduleType::iteration;
  double initial_value = 0;
  double gamma = 0;
  std::int64_t step_size = 0;
  bool operator==(const SigmoidSchedule&) const = default;
};
struct MODELZIP_API CycleSchedule {  // one-cycle policy, see schemas/training.fbs
  ScheduleType type = ScheduleType::iteration;
  double initial_value = 0;
  double max_value = 0;
  std::int64_t cycle_length = 2;
  std::int64_t annealing_length = 0;
  double annealing_decay = 1;
  bool operator==(const CycleSchedule&) const = default;
};
struct MODELZIP_API ScheduleStep {
  std::int64_t start = 0;  // first i at which `value` applies
  double value = 0;
  bool operator==(const ScheduleStep&) const = default;
};
struct MODELZIP_API MapSchedule {  // value of the last step with start <= i
  ScheduleType type = ScheduleType::iteration;
  std::vector<ScheduleStep> steps{};
  bool operator==(const MapSchedule&) const = default;
};

struct Schedule;
// Warm-up: base(i) * min(1, (iteration + 1) / num_iterations). The base is
// immutable and shared between copies (make one with ramp()).
struct MODELZIP_API RampSchedule {
  std::shared_ptr<const Schedule> base{};
  std::int64_t num_iterations = 1;
  bool operator==(const RampSchedule& other) const;  // compares *base
};

// Alternatives in the order of the schema's union (do not reorder).
using ScheduleVariant =
    std::variant<FixedSchedule, StepSchedule, ExponentialSchedule, InverseSchedule, PolySchedule,
                 SigmoidSchedule, CycleSchedule, MapSchedule, RampSchedule>;
// A std::variant (use std::visit, std::get, std::holds_alternative).
struct MODELZIP_API Schedule : ScheduleVariant {
  using ScheduleVariant::ScheduleVariant;
  Schedule() : ScheduleVariant(FixedSchedule{}) {}
};

inline constexpr int kMaxScheduleDepth = 16;

MODELZIP_API RampSchedule ramp(Schedule base, std::int64_t num_iterations);

// "FixedSchedule", "StepSchedule", ... (the schema's names).
MODELZIP_API std::string_view schedule_name(const Schedule& schedule) noexcept;
MODELZIP_API std::string_view schedule_type_name(
    ScheduleType type) noexcept;  // "iteration", "epoch"

// The schedule's value at `iteration` / `epoch` (>= 0; negative counts are
// treated as 0). Throws Error(invalid_argument) if the schedule is invalid.
MODELZIP_API double schedule_value(const Schedule& schedule, std::int64_t iteration,
                                   std::int64_t epoch);

// ---- Regularization ----------------------------------------------------------

enum class RegularizationType : std::uint8_t {
  l1 = 0,            // coefficient * sum |w| added to the loss
  l2 = 1,            // coefficient * 0.5 * sum w^2 added to the loss
  weight_decay = 2,  // w -= coefficient * w (* learning rate if apply_learning_rate)
};
MODELZIP_API std::string_view regularization_name(RegularizationType type) noexcept;  // "l1"...

struct MODELZIP_API Regularization {
  RegularizationType type = RegularizationType::l1;
  Schedule coefficient = FixedSchedule{0};
  bool apply_learning_rate = true;  // weight_decay only
  bool operator==(const Regularization&) const = default;
};

// ---- The configuration --------------------------------------------------------

struct MODELZIP_API TrainingConfig {
  Updater updater = Adam{};
  // Replaces the updater's fixed learning rate when set.
  std::optional<Schedule> learning_rate_schedule{};
  std::vector<Regularization> regularization{};
  bool minimize = true;
  // Placeholders fed by the i-th features / labels / masks of a data set.
  std::vector<std::string> feature_mapping{};
  std::vector<std::string> label_mapping{};
  std::vector<std::string> feature_mask_mapping{};
  std::vector<std::string> label_mask_mapping{};
  // Empty: the graph's loss variables.
  std::vector<std::string> loss_variables{};
  // Completed iterations (updater steps) and epochs.
  std::int64_t iteration_count = 0;
  std::int64_t epoch_count = 0;
  // Free-form (data loader position, seeds...).
  std::map<std::string, std::string> properties{};

  bool operator==(const TrainingConfig&) const = default;
};

// The learning rate in effect at `iteration` / `epoch`: the schedule's value
// if there is one, else the updater's fixed rate; nullopt for AdaDelta and
// NoOp.
MODELZIP_API std::optional<double> learning_rate_at(const TrainingConfig& config,
                                                    std::int64_t iteration, std::int64_t epoch);

// Throws Error(invalid_argument) naming the first rule `config` breaks.
MODELZIP_API void validate_training_config(const TrainingConfig& config);

// trainingConfig.fb: a FlatBuffer (identifier "MZTC", not size-prefixed).
// Validates first (Error(invalid_argument)).
MODELZIP_API Bytes encode_training_config(const TrainingConfig& config);

// Decodes untrusted bytes: the FlatBuffers verifier runs before any read,
// then the rules above. Errors: corrupt, unsupported (min_reader_version > 1,
// an unknown updater, schedule, schedule type or regularization: resuming
// with a silently different optimizer would not be a resume),
// limit_exceeded. Absent fields take the schema's defaults.
MODELZIP_API TrainingConfig decode_training_config(const Bytes& bytes, const Limits& limits = {});

}  // namespace modelzip::training
