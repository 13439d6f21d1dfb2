// The named scalar fields of every updater and schedule struct
// (modelzip/graph/training.hpp) and of a MapSchedule's steps, in schema order: the one list that
// the JSON and text rendering (render_training.cpp) and the Python dict reader
// (python/bindings/training.cpp) share, so both front ends use the same keys
// in the same order. Not listed: a schedule's `type` (a name), a
// MapSchedule's steps and a RampSchedule's base (nested values). Adding a
// field to a struct means adding it here (and to the codec and validation in
// training_codec.cpp and training.cpp).
//
// scalar_fields(FieldsOf<S>{}) is a constexpr std::array of ScalarField<S>;
// keys are string literals (NUL-terminated). Thread safety: constants only.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <variant>

#include "modelzip/graph/training.hpp"

namespace modelzip::graph::detail {

template <class S>
struct ScalarField {
  std::string_view key;
  std::variant<double S::*, std::int64_t S::*> member;
};

template <class S>
struct FieldsOf {};

namespace fields {
using namespace modelzip::training;

template <class S>
using F = ScalarField<S>;

constexpr auto scalar_fields(FieldsOf<Sgd>) {
  return std::array{F<Sgd>{"learning_rate", &Sgd::learning_rate}};
}
constexpr auto scalar_fields(FieldsOf<Nesterovs>) {
  return std::array{F<Nesterovs>{"learning_rate", &Nesterovs::learning_rate},
                    F<Nesterovs>{"momentum", &Nesterovs::momentum}};
}
// Adam, AdaMax, AmsGrad, Nadam.
template <class U>
requires std::is_same_v<U, Adam> || std::is_same_v<U, AdaMax> || std::is_same_v<U, AmsGrad> ||
    std::is_same_v<U, Nadam>
constexpr auto scalar_fields(FieldsOf<U>) {
  return std::array{F<U>{"learning_rate", &U::learning_rate}, F<U>{"beta1", &U::beta1},
                    F<U>{"beta2", &U::beta2}, F<U>{"epsilon", &U::epsilon}};
}
constexpr auto scalar_fields(FieldsOf<AdamW>) {
  return std::array{F<AdamW>{"learning_rate", &AdamW::learning_rate},
                    F<AdamW>{"beta1", &AdamW::beta1}, F<AdamW>{"beta2", &AdamW::beta2},
                    F<AdamW>{"epsilon", &AdamW::epsilon},
                    F<AdamW>{"weight_decay", &AdamW::weight_decay}};
}
constexpr auto scalar_fields(FieldsOf<RmsProp>) {
  return std::array{F<RmsProp>{"learning_rate", &RmsProp::learning_rate},
                    F<RmsProp>{"rms_decay", &RmsProp::rms_decay},
                    F<RmsProp>{"epsilon", &RmsProp::epsilon}};
}
constexpr auto scalar_fields(FieldsOf<AdaGrad>) {
  return std::array{F<AdaGrad>{"learning_rate", &AdaGrad::learning_rate},
                    F<AdaGrad>{"epsilon", &AdaGrad::epsilon}};
}
constexpr auto scalar_fields(FieldsOf<AdaDelta>) {
  return std::array{F<AdaDelta>{"rho", &AdaDelta::rho}, F<AdaDelta>{"epsilon", &AdaDelta::epsilon}};
}
constexpr auto scalar_fields(FieldsOf<NoOp>) {
  return std::array<F<NoOp>, 0>{};
}

constexpr auto scalar_fields(FieldsOf<FixedSchedule>) {
  return std::array{F<FixedSchedule>{"value", &FixedSchedule::value}};
}
constexpr auto scalar_fields(FieldsOf<StepSchedule>) {
  using S = StepSchedule;
  return std::array{F<S>{"initial_value", &S::initial_value}, F<S>{"decay_rate", &S::decay_rate},
                    F<S>{"step", &S::step}};
}
constexpr auto scalar_fields(FieldsOf<ExponentialSchedule>) {
  using S = ExponentialSchedule;
  return std::array{F<S>{"initial_value", &S::initial_value}, F<S>{"gamma", &S::gamma}};
}
constexpr auto scalar_fields(FieldsOf<InverseSchedule>) {
  using S = InverseSchedule;
  return std::array{F<S>{"initial_value", &S::initial_value}, F<S>{"gamma", &S::gamma},
                    F<S>{"power", &S::power}};
}
constexpr auto scalar_fields(FieldsOf<PolySchedule>) {
  using S = PolySchedule;
  return std::array{F<S>{"initial_value", &S::initial_value}, F<S>{"power", &S::power},
                    F<S>{"max_iterations", &S::max_iterations}};
}
constexpr auto scalar_fields(FieldsOf<SigmoidSchedule>) {
  using S = SigmoidSchedule;
  return std::array{F<S>{"initial_value", &S::initial_value}, F<S>{"gamma", &S::gamma},
                    F<S>{"step_size", &S::step_size}};
}
constexpr auto scalar_fields(FieldsOf<CycleSchedule>) {
  using S = CycleSchedule;
  return std::array{F<S>{"initial_value", &S::initial_value}, F<S>{"max_value", &S::max_value},
                    F<S>{"cycle_length", &S::cycle_length},
                    F<S>{"annealing_length", &S::annealing_length},
                    F<S>{"annealing_decay", &S::annealing_decay}};
}
constexpr auto scalar_fields(FieldsOf<ScheduleStep>) {
  return std::array{F<ScheduleStep>{"start", &ScheduleStep::start},
                    F<ScheduleStep>{"value", &ScheduleStep::value}};
}
constexpr auto scalar_fields(FieldsOf<MapSchedule>) {
  return std::array<F<MapSchedule>, 0>{};
}
constexpr auto scalar_fields(FieldsOf<RampSchedule>) {
  return std::array{F<RampSchedule>{"num_iterations", &RampSchedule::num_iterations}};
}

}  // namespace fields

using fields::scalar_fields;

// Calls visit(key, member) for every scalar field of `s` (S or const S), in
// order; `member` is a double& or std::int64_t& (const for a const S).
template <class S, class Visit>
void for_each_scalar(S& s, Visit&& visit) {
  using Plain = std::remove_const_t<S>;
  for (const auto& field : scalar_fields(FieldsOf<Plain>{}))
    std::visit([&](auto member) { visit(field.key, s.*member); }, field.member);
}

}  // namespace modelzip::graph::detail
