// Training configurations (<tag>/trainingConfig.fb) as Python dicts, in the
// shape `modelzip info --json` prints them (graph::training_config_json):
//
//   {"updater": {"type": "Adam", "learning_rate": 0.001, "beta1": ..., ...},
//    "learning_rate_schedule": None or schedule,
//    "regularization": [{"type": "l1" | "l2" | "weight_decay",
//                        "coefficient": schedule or number,
//                        "apply_learning_rate": bool}],
//    "minimize": bool, "feature_mapping": [str], "label_mapping": [str],
//    "feature_mask_mapping": [str], "label_mask_mapping": [str],
//    "loss_variables": [str], "iteration_count": int, "epoch_count": int,
//    "properties": {str: str}}
//   schedule: {"schedule": "StepSchedule", "type": "iteration" | "epoch",
//              <the schedule's fields>}, a MapSchedule's "steps":
//              [{"start": int, "value": float}], a RampSchedule's "base".
//
// Reading builds the dict straight from the C++ TrainingConfig, with the keys
// in the order the JSON renderer writes them (both walk the same field list,
// graph/training_fields.hpp), so both front ends show the same document;
// tests/python compares the two. Writing accepts the same shape: absent keys take the schema's
// defaults, unknown keys and wrong types are errors (TypeError / ValueError naming the key), and
// the result is validated by the library (modelzip.InvalidArgumentError).
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "bindings.hpp"
#include "graph/training_fields.hpp"
#include "modelzip/error.hpp"
#include "modelzip/graph/training.hpp"

namespace modelzip::python {
namespace {

using namespace modelzip::training;

// The keys of one dict, read once each; finish() rejects the keys left.
class Fields {
 public:
  Fields(py::handle object, std::string what) : what_(std::move(what)) {
    if (!py::isinstance<py::dict>(object))
      throw py::type_error(what_ + " must be a dict, not " + type_name(object));
    dict_ = py::reinterpret_borrow<py::dict>(object);
  }

  bool has(std::string_view key) const { return dict_.contains(str(key)); }
  py::object get(std::string_view key) {
    const py::str k = str(key);
    seen_.append(k);
    return dict_.contains(k) ? py::object(dict_[k]) : py::object(py::none());
  }
  std::string where(std::string_view key) const { return what_ + " '" + std::string(key) + "'"; }

  void number(std::string_view key, double& target) {
    py::object v = get(key);
    if (v.is_none()) return;
    if (py::isinstance<py::bool_>(v) ||
        !(py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)))
      throw py::type_error(where(key) + " must be a number, not " + type_name(v));
    target = v.cast<double>();
  }
  void integer(std::string_view key, std::int64_t& target) {
    py::object v = get(key);
    if (v.is_none()) return;
    if (py::isinstance<py::bool_>(v) || !py::isinstance<py::int_>(v))
      throw py::type_error(where(key) + " must be an int, not " + type_name(v));
    target = v.cast<std::int64_t>();
  }
  void flag(std::string_view key, bool& target) {
    py::object v = get(key);
    if (v.is_none()) return;
    if (!py::isinstance<py::bool_>(v))
      throw py::type_error(where(key) + " must be a bool, not " + type_name(v));
    target = v.cast<bool>();
  }
  std::string text(std::string_view key, std::string fallback) {
    py::object v = get(key);
    if (v.is_none()) return fallback;
    if (!py::isinstance<py::str>(v))
      throw py::type_error(where(key) + " must be a str, not " + type_name(v));
    return v.cast<std::string>();
  }
  void texts(std::string_view key, std::vector<std::string>& target) {
    py::object v = get(key);
    if (v.is_none()) return;
    if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v))
      throw py::type_error(where(key) + " must be a list of str, not " + type_name(v));
    for (py::handle item : v) {
      if (!py::isinstance<py::str>(item))
        throw py::type_error(where(key) + " must hold str, not " + type_name(item));
      target.push_back(item.cast<std::string>());
    }
  }

  void finish() const {
    for (auto item : dict_) {
      if (!seen_.contains(item.first))
        throw py::value_error(what_ + " has an unknown key " +
                              py::repr(item.first).cast<std::string>());
    }
  }

  // Reads every scalar field of `s` (graph/training_fields.hpp), in order.
  template <class S>
  S scalars(S s) {
    graph::detail::for_each_scalar(s, [&](std::string_view key, auto& member) {
      if constexpr (std::is_same_v<std::remove_reference_t<decltype(member)>, double>)
        number(key, member);
      else
        integer(key, member);
    });
    return s;
  }

  static std::string type_name(py::handle v) {
    return py::str(py::type::of(v).attr("__name__")).cast<std::string>();
  }

 private:
  static py::str str(std::string_view key) { return py::str(key.data(), key.size()); }

  std::string what_;
  py::dict dict_;
  py::list seen_;
};

// The alternative of variant `V` that `name_of` calls `name`, made by
// read(alternative{}) and returned as a `Result` (V, or a type derived from
// it such as Schedule); nullopt if no alternative has that name. `names` gets
// every name, in order, for the error message.
template <class V, class Result = V, class NameOf, class Read>
std::optional<Result> read_alternative(const std::string& name, NameOf name_of, Read read,
                                       std::string& names) {
  std::optional<Result> out;
  auto one = [&]<class A>(A alternative) {
    const std::string_view n = name_of(Result(alternative));
    names += (names.empty() ? "" : ", ") + std::string(n);
    if (!out && n == name) out.emplace(read(std::move(alternative)));
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (one(std::variant_alternative_t<I, V>{}), ...);
  }
  (std::make_index_sequence<std::variant_size_v<V>>{});
  return out;
}

Updater updater_from(py::handle object) {
  Fields f(object, "training config 'updater'");
  const std::string type = f.text("type", "");
  std::string names;
  std::optional<Updater> out = read_alternative<Updater>(
      type, [](const Updater& u) { return updater_name(u); },
      [&](auto u) { return Updater(f.scalars(u)); }, names);
  if (!out)
    throw py::value_error("training config 'updater' 'type' must be one of " + names + "; not '" +
                          type + "'");
  f.finish();
  return *out;
}

ScheduleType schedule_type_from(Fields& f) {
  const std::string t = f.text("type", "iteration");
  if (t == "iteration") return ScheduleType::iteration;
  if (t == "epoch") return ScheduleType::epoch;
  throw py::value_error(f.where("type") + " must be 'iteration' or 'epoch', not '" + t + "'");
}

Schedule schedule_from(py::handle object, const std::string& what) {
  if (py::isinstance<py::float_>(object) ||
      (py::isinstance<py::int_>(object) && !py::isinstance<py::bool_>(object)))
    return FixedSchedule{object.cast<double>()};
  Fields f(object, what);
  const std::string kind = f.text("schedule", "");
  std::string names;
  std::optional<Schedule> out = read_alternative<ScheduleVariant, Schedule>(
      kind, [](const Schedule& s) { return schedule_name(s); },
      [&]<class S>(S s) -> Schedule {
        if constexpr (requires { s.type; }) s.type = schedule_type_from(f);
        s = f.scalars(std::move(s));
        if constexpr (std::is_same_v<S, MapSchedule>) {
          py::object steps = f.get("steps");
          if (!steps.is_none()) {
            if (!py::isinstance<py::list>(steps) && !py::isinstance<py::tuple>(steps))
              throw py::type_error(f.where("steps") + " must be a list");
            for (py::handle step : steps) {
              Fields sf(step, f.where("steps") + " item");
              s.steps.push_back(sf.scalars(ScheduleStep{}));
              sf.finish();
            }
          }
        }
        if constexpr (std::is_same_v<S, RampSchedule>) {
          py::object base = f.get("base");
          if (base.is_none()) throw py::value_error(f.where("base") + " is required");
          return ramp(schedule_from(base, f.where("base")), s.num_iterations);
        }
        return s;
      },
      names);
  if (!out)
    throw py::value_error(what + " must be a number or a dict whose 'schedule' is one of " + names +
                          "; not '" + kind + "'");
  f.finish();
  return std::move(*out);
}

}  // namespace

TrainingConfig training_config_from_python(py::handle object) {
  Fields f(object, "training config");
  TrainingConfig c;
  if (f.has("updater")) c.updater = updater_from(f.get("updater"));
  py::object schedule = f.get("learning_rate_schedule");
  if (!schedule.is_none())
    c.learning_rate_schedule = schedule_from(schedule, "training config 'learning_rate_schedule'");
  py::object regularization = f.get("regularization");
  if (!regularization.is_none()) {
    if (!py::isinstance<py::list>(regularization) && !py::isinstance<py::tuple>(regularization))
      throw py::type_error("training config 'regularization' must be a list of dicts");
    for (py::handle item : regularization) {
      Fields rf(item, "training config 'regularization' item");
      Regularization r;
      const std::string type = rf.text("type", "l1");
      if (type == "l1")
        r.type = RegularizationType::l1;
      else if (type == "l2")
        r.type = RegularizationType::l2;
      else if (type == "weight_decay")
        r.type = RegularizationType::weight_decay;
      else
        throw py::value_error(rf.where("type") + " must be 'l1', 'l2' or 'weight_decay', not '" +
                              type + "'");
      py::object coefficient = rf.get("coefficient");
      if (!coefficient.is_none())
        r.coefficient = schedule_from(coefficient, rf.where("coefficient"));
      rf.flag("apply_learning_rate", r.apply_learning_rate);
      rf.finish();
      c.regularization.push_back(std::move(r));
    }
  }
  f.flag("minimize", c.minimize);
  f.texts("feature_mapping", c.feature_mapping);
  f.texts("label_mapping", c.label_mapping);
  f.texts("feature_mask_mapping", c.feature_mask_mapping);
  f.texts("label_mask_mapping", c.label_mask_mapping);
  f.texts("loss_variables", c.loss_variables);
  f.integer("iteration_count", c.iteration_count);
  f.integer("epoch_count", c.epoch_count);
  py::object properties = f.get("properties");
  if (!properties.is_none()) {
    if (!py::isinstance<py::dict>(properties))
      throw py::type_error("training config 'properties' must be a dict str -> str");
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(properties)) {
      if (!py::isinstance<py::str>(k) || !py::isinstance<py::str>(v))
        throw py::type_error("training config 'properties' must map str to str, not " +
                             Fields::type_name(k) + " to " + Fields::type_name(v));
      c.properties[k.cast<std::string>()] = v.cast<std::string>();
    }
  }
  f.finish();
  validate_training_config(c);  // Error(invalid_argument) -> modelzip.InvalidArgumentError
  return c;
}

namespace {

py::str text(std::string_view s) {
  return py::str(s.data(), s.size());
}

// The scalar fields of an updater, schedule or map step into `d`, in order;
// integer fields stay Python ints.
template <class S>
void put_scalars(py::dict& d, const S& s) {
  graph::detail::for_each_scalar(
      s, [&](std::string_view key, auto value) { d[text(key)] = py::cast(value); });
}

py::dict schedule_to_python(const Schedule& schedule) {
  py::dict d;
  d["schedule"] = text(schedule_name(schedule));
  std::visit(
      [&](const auto& s) {
        if constexpr (requires { s.type; }) d["type"] = text(schedule_type_name(s.type));
        put_scalars(d, s);
      },
      static_cast<const ScheduleVariant&>(schedule));
  if (const auto* m = std::get_if<MapSchedule>(&schedule)) {
    py::list steps;
    for (const ScheduleStep& step : m->steps) {
      py::dict sd;
      put_scalars(sd, step);
      steps.append(std::move(sd));
    }
    d["steps"] = std::move(steps);
  }
  if (const auto* r = std::get_if<RampSchedule>(&schedule))
    d["base"] = r->base ? py::object(schedule_to_python(*r->base)) : py::object(py::none());
  return d;
}

py::list texts_to_python(const std::vector<std::string>& items) {
  py::list out;
  for (const std::string& s : items) out.append(text(s));
  return out;
}

}  // namespace

py::object training_config_to_python(const TrainingConfig& config) {
  py::dict out;
  py::dict updater;
  updater["type"] = text(updater_name(config.updater));
  std::visit([&](const auto& u) { put_scalars(updater, u); }, config.updater);
  out["updater"] = std::move(updater);
  out["learning_rate_schedule"] =
      config.learning_rate_schedule ? py::object(schedule_to_python(*config.learning_rate_schedule))
                                    : py::object(py::none());
  py::list regularization;
  for (const Regularization& r : config.regularization) {
    py::dict rd;
    rd["type"] = text(regularization_name(r.type));
    rd["coefficient"] = schedule_to_python(r.coefficient);
    rd["apply_learning_rate"] = py::bool_(r.apply_learning_rate);
    regularization.append(std::move(rd));
  }
  out["regularization"] = std::move(regularization);
  out["minimize"] = py::bool_(config.minimize);
  out["feature_mapping"] = texts_to_python(config.feature_mapping);
  out["label_mapping"] = texts_to_python(config.label_mapping);
  out["feature_mask_mapping"] = texts_to_python(config.feature_mask_mapping);
  out["label_mask_mapping"] = texts_to_python(config.label_mask_mapping);
  out["loss_variables"] = texts_to_python(config.loss_variables);
  out["iteration_count"] = py::int_(config.iteration_count);
  out["epoch_count"] = py::int_(config.epoch_count);
  py::dict properties;
  for (const auto& [k, v] : config.properties) properties[text(k)] = text(v);
  out["properties"] = std::move(properties);
  return out;
}

}  // namespace modelzip::python
