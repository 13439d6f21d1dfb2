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
// Reading renders the config as that JSON and parses it with Python's json
// module, so both front ends show the same document. Writing accepts the
// same shape: absent keys take the schema's defaults, unknown keys and
// wrong types are errors (TypeError / ValueError naming the key), and the
// result is validated by the library (modelzip.InvalidArgumentError).
#include <pybind11/stl.h>

#include <string>
#include <utility>

#include "bindings.hpp"
#include "graph/render.hpp"
#include "modelzip/error.hpp"
#include "modelzip/training.hpp"

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

  bool has(const char* key) const { return dict_.contains(key); }
  py::object get(const char* key) {
    seen_.append(py::str(key));
    return dict_.contains(key) ? py::object(dict_[key]) : py::object(py::none());
  }
  std::string where(const char* key) const { return what_ + " '" + key + "'"; }

  void number(const char* key, double& target) {
    py::object v = get(key);
    if (v.is_none()) return;
    if (py::isinstance<py::bool_>(v) ||
        !(py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)))
      throw py::type_error(where(key) + " must be a number, not " + type_name(v));
    target = v.cast<double>();
  }
  void integer(const char* key, std::int64_t& target) {
    py::object v = get(key);
    if (v.is_none()) return;
    if (py::isinstance<py::bool_>(v) || !py::isinstance<py::int_>(v))
      throw py::type_error(where(key) + " must be an int, not " + type_name(v));
    target = v.cast<std::int64_t>();
  }
  void flag(const char* key, bool& target) {
    py::object v = get(key);
    if (v.is_none()) return;
    if (!py::isinstance<py::bool_>(v))
      throw py::type_error(where(key) + " must be a bool, not " + type_name(v));
    target = v.cast<bool>();
  }
  std::string text(const char* key, std::string fallback) {
    py::object v = get(key);
    if (v.is_none()) return fallback;
    if (!py::isinstance<py::str>(v))
      throw py::type_error(where(key) + " must be a str, not " + type_name(v));
    return v.cast<std::string>();
  }
  void texts(const char* key, std::vector<std::string>& target) {
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

  static std::string type_name(py::handle v) {
    return py::str(py::type::of(v).attr("__name__")).cast<std::string>();
  }

 private:
  std::string what_;
  py::dict dict_;
  py::list seen_;
};

template <class U>
U adam_like(Fields& f, U u) {
  f.number("learning_rate", u.learning_rate);
  f.number("beta1", u.beta1);
  f.number("beta2", u.beta2);
  f.number("epsilon", u.epsilon);
  return u;
}

Updater updater_from(py::handle object) {
  Fields f(object, "training config 'updater'");
  const std::string type = f.text("type", "");
  Updater out;
  if (type == "Sgd") {
    Sgd u;
    f.number("learning_rate", u.learning_rate);
    out = u;
  } else if (type == "Nesterovs") {
    Nesterovs u;
    f.number("learning_rate", u.learning_rate);
    f.number("momentum", u.momentum);
    out = u;
  } else if (type == "Adam") {
    out = adam_like(f, Adam{});
  } else if (type == "AdamW") {
    AdamW u = adam_like(f, AdamW{});
    f.number("weight_decay", u.weight_decay);
    out = u;
  } else if (type == "AdaMax") {
    out = adam_like(f, AdaMax{});
  } else if (type == "AmsGrad") {
    out = adam_like(f, AmsGrad{});
  } else if (type == "Nadam") {
    out = adam_like(f, Nadam{});
  } else if (type == "RmsProp") {
    RmsProp u;
    f.number("learning_rate", u.learning_rate);
    f.number("rms_decay", u.rms_decay);
    f.number("epsilon", u.epsilon);
    out = u;
  } else if (type == "AdaGrad") {
    AdaGrad u;
    f.number("learning_rate", u.learning_rate);
    f.number("epsilon", u.epsilon);
    out = u;
  } else if (type == "AdaDelta") {
    AdaDelta u;
    f.number("rho", u.rho);
    f.number("epsilon", u.epsilon);
    out = u;
  } else if (type == "NoOp") {
    out = NoOp{};
  } else {
    throw py::value_error(
        "training config 'updater' 'type' must be one of Sgd, Nesterovs, Adam, AdamW, AdaMax, "
        "AmsGrad, Nadam, RmsProp, AdaGrad, AdaDelta, NoOp; not '" +
        type + "'");
  }
  f.finish();
  return out;
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
  Schedule out;
  if (kind == "FixedSchedule") {
    FixedSchedule s;
    f.number("value", s.value);
    out = s;
  } else if (kind == "StepSchedule") {
    StepSchedule s;
    s.type = schedule_type_from(f);
    f.number("initial_value", s.initial_value);
    f.number("decay_rate", s.decay_rate);
    f.number("step", s.step);
    out = s;
  } else if (kind == "ExponentialSchedule") {
    ExponentialSchedule s;
    s.type = schedule_type_from(f);
    f.number("initial_value", s.initial_value);
    f.number("gamma", s.gamma);
    out = s;
  } else if (kind == "InverseSchedule") {
    InverseSchedule s;
    s.type = schedule_type_from(f);
    f.number("initial_value", s.initial_value);
    f.number("gamma", s.gamma);
    f.number("power", s.power);
    out = s;
  } else if (kind == "PolySchedule") {
    PolySchedule s;
    s.type = schedule_type_from(f);
    f.number("initial_value", s.initial_value);
    f.number("power", s.power);
    f.integer("max_iterations", s.max_iterations);
    out = s;
  } else if (kind == "SigmoidSchedule") {
    SigmoidSchedule s;
    s.type = schedule_type_from(f);
    f.number("initial_value", s.initial_value);
    f.number("gamma", s.gamma);
    f.integer("step_size", s.step_size);
    out = s;
  } else if (kind == "CycleSchedule") {
    CycleSchedule s;
    s.type = schedule_type_from(f);
    f.number("initial_value", s.initial_value);
    f.number("max_value", s.max_value);
    f.integer("cycle_length", s.cycle_length);
    f.integer("annealing_length", s.annealing_length);
    f.number("annealing_decay", s.annealing_decay);
    out = s;
  } else if (kind == "MapSchedule") {
    MapSchedule s;
    s.type = schedule_type_from(f);
    py::object steps = f.get("steps");
    if (!steps.is_none()) {
      if (!py::isinstance<py::list>(steps) && !py::isinstance<py::tuple>(steps))
        throw py::type_error(f.where("steps") + " must be a list");
      for (py::handle step : steps) {
        Fields sf(step, f.where("steps") + " item");
        ScheduleStep st;
        sf.integer("start", st.start);
        sf.number("value", st.value);
        sf.finish();
        s.steps.push_back(st);
      }
    }
    out = s;
  } else if (kind == "RampSchedule") {
    std::int64_t n = 1;
    f.integer("num_iterations", n);
    py::object base = f.get("base");
    if (base.is_none()) throw py::value_error(f.where("base") + " is required");
    out = ramp(schedule_from(base, f.where("base")), n);
  } else {
    throw py::value_error(what +
                          " must be a number or a dict whose 'schedule' is one of FixedSchedule, "
                          "StepSchedule, ExponentialSchedule, InverseSchedule, PolySchedule, "
                          "SigmoidSchedule, CycleSchedule, MapSchedule, RampSchedule; not '" +
                          kind + "'");
  }
  f.finish();
  return out;
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

py::object training_config_to_python(const TrainingConfig& config) {
  return py::module_::import("json").attr("loads")(graph::training_config_json(config));
}

}  // namespace modelzip::python
