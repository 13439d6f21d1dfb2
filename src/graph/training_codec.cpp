// trainingConfig.fb <-> TrainingConfig (schemas/training.fbs).
#include "graph/flatbuffer_input.hpp"
#include "graph/rules.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/training.hpp"
#include "training_generated.h"

namespace modelzip::training {
namespace {

namespace fbs = modelzip::fb;
using graph::detail::fail;
using graph::detail::quote_name;
using graph::detail::string_vector;
using graph::detail::utf8_string;
using graph::detail::utf8_strings;

// The reader version this code implements (training.fbs, min_reader_version).
constexpr std::uint32_t kConfigReaderVersion = 1;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

using FbOffset = flatbuffers::Offset<void>;

// ---- Encoding -----------------------------------------------------------------

fbs::ScheduleType to_fb(ScheduleType t) {
  return t == ScheduleType::epoch ? fbs::ScheduleType::EPOCH : fbs::ScheduleType::ITERATION;
}

std::pair<fbs::Schedule, FbOffset> encode_schedule(flatbuffers::FlatBufferBuilder& fbb,
                                                   const Schedule& schedule) {
  return std::visit(
      Overloaded{
          [&](const FixedSchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            return {fbs::Schedule::FixedSchedule, fbs::CreateFixedSchedule(fbb, s.value).Union()};
          },
          [&](const StepSchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            return {
                fbs::Schedule::StepSchedule,
                fbs::CreateStepSchedule(fbb, to_fb(s.type), s.initial_value, s.decay_rate, s.step)
                    .Union()};
          },
          [&](const ExponentialSchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            return {fbs::Schedule::ExponentialSchedule,
                    fbs::CreateExponentialSchedule(fbb, to_fb(s.type), s.initial_value, s.gamma)
                        .Union()};
          },
          [&](const InverseSchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            return {
                fbs::Schedule::InverseSchedule,
                fbs::CreateInverseSchedule(fbb, to_fb(s.type), s.initial_value, s.gamma, s.power)
                    .Union()};
          },
          [&](const PolySchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            return {fbs::Schedule::PolySchedule,
                    fbs::CreatePolySchedule(fbb, to_fb(s.type), s.initial_value, s.power,
                                            s.max_iterations)
                        .Union()};
          },
          [&](const SigmoidSchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            return {fbs::Schedule::SigmoidSchedule,
                    fbs::CreateSigmoidSchedule(fbb, to_fb(s.type), s.initial_value, s.gamma,
                                               s.step_size)
                        .Union()};
          },
          [&](const CycleSchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            return {fbs::Schedule::CycleSchedule,
                    fbs::CreateCycleSchedule(fbb, to_fb(s.type), s.initial_value, s.max_value,
                                             s.cycle_length, s.annealing_length, s.annealing_decay)
                        .Union()};
          },
          [&](const MapSchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            std::vector<fbs::ScheduleStep> steps;
            steps.reserve(s.steps.size());
            for (const auto& st : s.steps) steps.emplace_back(st.start, st.value);
            auto v = fbb.CreateVectorOfStructs(steps);
            return {fbs::Schedule::MapSchedule,
                    fbs::CreateMapSchedule(fbb, to_fb(s.type), v).Union()};
          },
          [&](const RampSchedule& s) -> std::pair<fbs::Schedule, FbOffset> {
            auto [type, base] = encode_schedule(fbb, *s.base);
            return {fbs::Schedule::RampSchedule,
                    fbs::CreateRampSchedule(fbb, type, base, s.num_iterations).Union()};
          },
      },
      static_cast<const ScheduleVariant&>(schedule));
}

std::pair<fbs::Updater, FbOffset> encode_updater(flatbuffers::FlatBufferBuilder& fbb,
                                                 const Updater& updater) {
  using R = std::pair<fbs::Updater, FbOffset>;
  return std::visit(
      Overloaded{
          [&](const Sgd& u) -> R {
            return {fbs::Updater::Sgd, fbs::CreateSgd(fbb, u.learning_rate).Union()};
          },
          [&](const Nesterovs& u) -> R {
            return {fbs::Updater::Nesterovs,
                    fbs::CreateNesterovs(fbb, u.learning_rate, u.momentum).Union()};
          },
          [&](const Adam& u) -> R {
            return {fbs::Updater::Adam,
                    fbs::CreateAdam(fbb, u.learning_rate, u.beta1, u.beta2, u.epsilon).Union()};
          },
          [&](const AdamW& u) -> R {
            return {fbs::Updater::AdamW, fbs::CreateAdamW(fbb, u.learning_rate, u.beta1, u.beta2,
                                                          u.epsilon, u.weight_decay)
                                             .Union()};
          },
          [&](const AdaMax& u) -> R {
            return {fbs::Updater::AdaMax,
                    fbs::CreateAdaMax(fbb, u.learning_rate, u.beta1, u.beta2, u.epsilon).Union()};
          },
          [&](const AmsGrad& u) -> R {
            return {fbs::Updater::AmsGrad,
                    fbs::CreateAmsGrad(fbb, u.learning_rate, u.beta1, u.beta2, u.epsilon).Union()};
          },
          [&](const Nadam& u) -> R {
            return {fbs::Updater::Nadam,
                    fbs::CreateNadam(fbb, u.learning_rate, u.beta1, u.beta2, u.epsilon).Union()};
          },
          [&](const RmsProp& u) -> R {
            return {fbs::Updater::RmsProp,
                    fbs::CreateRmsProp(fbb, u.learning_rate, u.rms_decay, u.epsilon).Union()};
          },
          [&](const AdaGrad& u) -> R {
            return {fbs::Updater::AdaGrad,
                    fbs::CreateAdaGrad(fbb, u.learning_rate, u.epsilon).Union()};
          },
          [&](const AdaDelta& u) -> R {
            return {fbs::Updater::AdaDelta, fbs::CreateAdaDelta(fbb, u.rho, u.epsilon).Union()};
          },
          [&](const NoOp&) -> R {
            return {fbs::Updater::NoOp, fbs::CreateNoOp(fbb).Union()};
          },
      },
      updater);
}

// ---- Decoding -----------------------------------------------------------------

ScheduleType decode_type(fbs::ScheduleType t, const std::string& what) {
  switch (t) {
    case fbs::ScheduleType::ITERATION:
      return ScheduleType::iteration;
    case fbs::ScheduleType::EPOCH:
      return ScheduleType::epoch;
  }
  fail(ErrorCode::unsupported, what + " has schedule type " + std::to_string(static_cast<int>(t)) +
                                   ", which this version does not know");
}

Schedule decode_schedule(fbs::Schedule type, const void* obj, const std::string& what) {
  if (type == fbs::Schedule::NONE) fail(ErrorCode::corrupt, what + " has no schedule");
  if (obj == nullptr)
    fail(ErrorCode::corrupt, what + " has schedule type " + std::to_string(static_cast<int>(type)) +
                                 " but no schedule table");
  switch (type) {
    case fbs::Schedule::FixedSchedule: {
      auto* s = static_cast<const fbs::FixedSchedule*>(obj);
      return FixedSchedule{s->value()};
    }
    case fbs::Schedule::StepSchedule: {
      auto* s = static_cast<const fbs::StepSchedule*>(obj);
      return StepSchedule{decode_type(s->type(), what), s->initial_value(), s->decay_rate(),
                          s->step()};
    }
    case fbs::Schedule::ExponentialSchedule: {
      auto* s = static_cast<const fbs::ExponentialSchedule*>(obj);
      return ExponentialSchedule{decode_type(s->type(), what), s->initial_value(), s->gamma()};
    }
    case fbs::Schedule::InverseSchedule: {
      auto* s = static_cast<const fbs::InverseSchedule*>(obj);
      return InverseSchedule{decode_type(s->type(), what), s->initial_value(), s->gamma(),
                             s->power()};
    }
    case fbs::Schedule::PolySchedule: {
      auto* s = static_cast<const fbs::PolySchedule*>(obj);
      return PolySchedule{decode_type(s->type(), what), s->initial_value(), s->power(),
                          s->max_iterations()};
    }
    case fbs::Schedule::SigmoidSchedule: {
      auto* s = static_cast<const fbs::SigmoidSchedule*>(obj);
      return SigmoidSchedule{decode_type(s->type(), what), s->initial_value(), s->gamma(),
                             s->step_size()};
    }
    case fbs::Schedule::CycleSchedule: {
      auto* s = static_cast<const fbs::CycleSchedule*>(obj);
      return CycleSchedule{
          decode_type(s->type(), what), s->initial_value(),  s->max_value(), s->cycle_length(),
          s->annealing_length(),        s->annealing_decay()};
    }
    case fbs::Schedule::MapSchedule: {
      auto* s = static_cast<const fbs::MapSchedule*>(obj);
      MapSchedule m{decode_type(s->type(), what), {}};
      graph::detail::require_aligned_elements(s->steps(), alignof(fbs::ScheduleStep),
                                              what + " steps");
      m.steps.reserve(s->steps()->size());  // steps is required: verified present
      for (const fbs::ScheduleStep* st : *s->steps()) m.steps.push_back({st->start(), st->value()});
      return m;
    }
    case fbs::Schedule::RampSchedule: {
      auto* s = static_cast<const fbs::RampSchedule*>(obj);
      // Recursion depth is bounded by the verifier's max_depth.
      Schedule base = decode_schedule(s->base_type(), s->base(), what + " base");
      return ramp(std::move(base), s->num_iterations());
    }
    default:
      fail(ErrorCode::unsupported, what + " is schedule kind " +
                                       std::to_string(static_cast<int>(type)) +
                                       ", which this version does not know (a newer writer?)");
  }
}

Updater decode_updater(const fbs::TrainingConfig& in) {
  const void* obj = in.updater();
  const auto type = in.updater_type();
  if (type == fbs::Updater::NONE) fail(ErrorCode::corrupt, "trainingConfig.fb has no updater");
  if (obj == nullptr)
    fail(ErrorCode::corrupt,
         "updater type " + std::to_string(static_cast<int>(type)) + " has no parameter table");
  switch (type) {
    case fbs::Updater::Sgd: {
      auto* u = static_cast<const fbs::Sgd*>(obj);
      return Sgd{u->learning_rate()};
    }
    case fbs::Updater::Nesterovs: {
      auto* u = static_cast<const fbs::Nesterovs*>(obj);
      return Nesterovs{u->learning_rate(), u->momentum()};
    }
    case fbs::Updater::Adam: {
      auto* u = static_cast<const fbs::Adam*>(obj);
      return Adam{u->learning_rate(), u->beta1(), u->beta2(), u->epsilon()};
    }
    case fbs::Updater::AdamW: {
      auto* u = static_cast<const fbs::AdamW*>(obj);
      return AdamW{u->learning_rate(), u->beta1(), u->beta2(), u->epsilon(), u->weight_decay()};
    }
    case fbs::Updater::AdaMax: {
      auto* u = static_cast<const fbs::AdaMax*>(obj);
      return AdaMax{u->learning_rate(), u->beta1(), u->beta2(), u->epsilon()};
    }
    case fbs::Updater::AmsGrad: {
      auto* u = static_cast<const fbs::AmsGrad*>(obj);
      return AmsGrad{u->learning_rate(), u->beta1(), u->beta2(), u->epsilon()};
    }
    case fbs::Updater::Nadam: {
      auto* u = static_cast<const fbs::Nadam*>(obj);
      return Nadam{u->learning_rate(), u->beta1(), u->beta2(), u->epsilon()};
    }
    case fbs::Updater::RmsProp: {
      auto* u = static_cast<const fbs::RmsProp*>(obj);
      return RmsProp{u->learning_rate(), u->rms_decay(), u->epsilon()};
    }
    case fbs::Updater::AdaGrad: {
      auto* u = static_cast<const fbs::AdaGrad*>(obj);
      return AdaGrad{u->learning_rate(), u->epsilon()};
    }
    case fbs::Updater::AdaDelta: {
      auto* u = static_cast<const fbs::AdaDelta*>(obj);
      return AdaDelta{u->rho(), u->epsilon()};
    }
    case fbs::Updater::NoOp:
      return NoOp{};
    default:
      fail(ErrorCode::unsupported, "updater type " + std::to_string(static_cast<int>(type)) +
                                       " is not known to this version (a newer writer?)");
  }
}

RegularizationType decode_regularization_type(fbs::RegularizationType t, std::size_t index) {
  switch (t) {
    case fbs::RegularizationType::L1:
      return RegularizationType::l1;
    case fbs::RegularizationType::L2:
      return RegularizationType::l2;
    case fbs::RegularizationType::WEIGHT_DECAY:
      return RegularizationType::weight_decay;
  }
  fail(ErrorCode::unsupported, "regularization " + std::to_string(index) + " has type " +
                                   std::to_string(static_cast<int>(t)) +
                                   ", which this version does not know");
}

fbs::RegularizationType to_fb(RegularizationType t) {
  switch (t) {
    case RegularizationType::l1:
      return fbs::RegularizationType::L1;
    case RegularizationType::l2:
      return fbs::RegularizationType::L2;
    case RegularizationType::weight_decay:
      return fbs::RegularizationType::WEIGHT_DECAY;
  }
  throw Error(ErrorCode::invalid_argument, "unknown regularization type");
}

}  // namespace

Bytes encode_training_config(const TrainingConfig& config) {
  validate_training_config(config);
  flatbuffers::FlatBufferBuilder fbb(512);
  fbb.ForceDefaults(true);  // every scalar explicit: self-describing with flatc --json
  auto [updater_type, updater] = encode_updater(fbb, config.updater);
  std::pair<fbs::Schedule, FbOffset> lr_schedule{fbs::Schedule::NONE, 0};
  if (config.learning_rate_schedule)
    lr_schedule = encode_schedule(fbb, *config.learning_rate_schedule);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbs::Regularization>>> regs = 0;
  if (!config.regularization.empty()) {
    std::vector<flatbuffers::Offset<fbs::Regularization>> v;
    for (const Regularization& r : config.regularization) {
      double fixed = 0;
      std::pair<fbs::Schedule, FbOffset> sched{fbs::Schedule::NONE, 0};
      if (const auto* f = std::get_if<FixedSchedule>(&r.coefficient))
        fixed = f->value;
      else
        sched = encode_schedule(fbb, r.coefficient);
      v.push_back(fbs::CreateRegularization(fbb, to_fb(r.type), fixed, sched.first, sched.second,
                                            r.apply_learning_rate));
    }
    regs = fbb.CreateVector(v);
  }
  auto features = string_vector(fbb, config.feature_mapping);
  auto labels = string_vector(fbb, config.label_mapping);
  auto feature_masks = string_vector(fbb, config.feature_mask_mapping);
  auto label_masks = string_vector(fbb, config.label_mask_mapping);
  auto losses = string_vector(fbb, config.loss_variables);
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbs::Property>>> props = 0;
  if (!config.properties.empty()) {
    std::vector<flatbuffers::Offset<fbs::Property>> v;
    for (const auto& [key, value] : config.properties)  // sorted by key (std::map)
      v.push_back(fbs::CreateProperty(fbb, fbb.CreateString(key), fbb.CreateString(value)));
    props = fbb.CreateVector(v);
  }
  fbs::TrainingConfigBuilder b(fbb);
  b.add_min_reader_version(kConfigReaderVersion);
  b.add_updater_type(updater_type);
  b.add_updater(updater);
  if (lr_schedule.first != fbs::Schedule::NONE) {
    b.add_learning_rate_schedule_type(lr_schedule.first);
    b.add_learning_rate_schedule(lr_schedule.second);
  }
  if (!regs.IsNull()) b.add_regularization(regs);
  b.add_minimize(config.minimize);
  if (!features.IsNull()) b.add_data_set_feature_mapping(features);
  if (!labels.IsNull()) b.add_data_set_label_mapping(labels);
  if (!feature_masks.IsNull()) b.add_data_set_feature_mask_mapping(feature_masks);
  if (!label_masks.IsNull()) b.add_data_set_label_mask_mapping(label_masks);
  if (!losses.IsNull()) b.add_loss_variables(losses);
  b.add_iteration_count(config.iteration_count);
  b.add_epoch_count(config.epoch_count);
  if (!props.IsNull()) b.add_properties(props);
  fbb.Finish(b.Finish(), fbs::TrainingConfigIdentifier());
  return graph::detail::finished_bytes(fbb);
}

TrainingConfig decode_training_config_fields(const Bytes& bytes, const Limits& limits) {
  Bytes buf = graph::detail::verified_buffer(
      bytes, limits, "trainingConfig.fb", fbs::TrainingConfigIdentifier(),
      [](flatbuffers::Verifier& v) { return fbs::VerifyTrainingConfigBuffer(v); });
  const fbs::TrainingConfig* in = fbs::GetTrainingConfig(buf.data());
  if (in->min_reader_version() > kConfigReaderVersion)
    fail(ErrorCode::unsupported,
         "trainingConfig.fb needs reader version " + std::to_string(in->min_reader_version()) +
             "; this version reads " + std::to_string(kConfigReaderVersion));
  TrainingConfig c;
  c.updater = decode_updater(*in);
  if (in->learning_rate_schedule_type() != fbs::Schedule::NONE || in->learning_rate_schedule())
    c.learning_rate_schedule = decode_schedule(
        in->learning_rate_schedule_type(), in->learning_rate_schedule(), "learning-rate schedule");
  if (const auto* regs = in->regularization()) {
    for (flatbuffers::uoffset_t i = 0; i < regs->size(); ++i) {
      const fbs::Regularization* r = regs->Get(i);
      Regularization out;
      out.type = decode_regularization_type(r->type(), i);
      if (r->coefficient_schedule_type() != fbs::Schedule::NONE || r->coefficient_schedule())
        out.coefficient =
            decode_schedule(r->coefficient_schedule_type(), r->coefficient_schedule(),
                            "regularization " + std::to_string(i) + " coefficient schedule");
      else
        out.coefficient = FixedSchedule{r->coefficient()};
      out.apply_learning_rate = r->apply_learning_rate();
      c.regularization.push_back(std::move(out));
    }
  }
  c.minimize = in->minimize();
  c.feature_mapping = utf8_strings(in->data_set_feature_mapping(), "feature mapping");
  c.label_mapping = utf8_strings(in->data_set_label_mapping(), "label mapping");
  c.feature_mask_mapping =
      utf8_strings(in->data_set_feature_mask_mapping(), "feature mask mapping");
  c.label_mask_mapping = utf8_strings(in->data_set_label_mask_mapping(), "label mask mapping");
  c.loss_variables = utf8_strings(in->loss_variables(), "loss variable");
  c.iteration_count = in->iteration_count();
  c.epoch_count = in->epoch_count();
  if (const auto* props = in->properties()) {
    for (flatbuffers::uoffset_t i = 0; i < props->size(); ++i) {
      const fbs::Property* p = props->Get(i);
      std::string key = utf8_string(p->key(), "property " + std::to_string(i) + " key");
      std::string value = utf8_string(p->value(), "property " + quote_name(key));
      if (!c.properties.emplace(key, std::move(value)).second)
        fail(ErrorCode::corrupt, "property " + quote_name(key) + " appears twice");
    }
  }
  return c;
}

TrainingConfig decode_training_config(const Bytes& bytes, const Limits& limits) {
  TrainingConfig c = decode_training_config_fields(bytes, limits);
  graph::detail::check_training_config(c, ErrorCode::corrupt);
  return c;
}

}  // namespace modelzip::training
