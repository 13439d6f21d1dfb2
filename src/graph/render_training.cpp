// training_config_json and training_config_text.
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/printable.hpp"
#include "graph/json_writer.hpp"
#include "graph/render.hpp"
#include "graph/training_fields.hpp"

namespace modelzip::graph {
namespace {

using detail::JsonWriter;
using detail::shortest_double;
using namespace modelzip::training;

// A field's value: integer fields stay integers (JSON readers such as
// Python's json module must read 10, not 1e+01, back as an int).
using Number = std::variant<double, std::int64_t>;
using Fields = std::vector<std::pair<std::string_view, Number>>;

std::string number_text(const Number& n) {
  return std::visit(
      [](auto v) {
        if constexpr (std::is_same_v<decltype(v), double>)
          return shortest_double(v);
        else
          return std::to_string(v);
      },
      n);
}

void write_number(JsonWriter& w, const Number& n) {
  std::visit([&](auto v) { w.value(v); }, n);
}

// The scalar fields of an updater or schedule (training_fields.hpp).
template <class S>
Fields numbers_of(const S& s) {
  Fields out;
  detail::for_each_scalar(s,
                          [&](std::string_view key, auto value) { out.emplace_back(key, value); });
  return out;
}

Fields updater_fields(const Updater& updater) {
  return std::visit([](const auto& u) { return numbers_of(u); }, updater);
}

// Everything of a schedule but a map's steps and a ramp's base.
struct ScheduleFields {
  std::optional<ScheduleType> type;
  Fields numbers;
};

ScheduleFields schedule_fields(const Schedule& schedule) {
  return std::visit(
      [](const auto& s) {
        ScheduleFields out{{}, numbers_of(s)};
        if constexpr (requires { s.type; }) out.type = s.type;
        return out;
      },
      static_cast<const ScheduleVariant&>(schedule));
}

void write_schedule(JsonWriter& w, const Schedule& schedule) {
  ScheduleFields f = schedule_fields(schedule);
  w.begin_object(true);
  w.key("schedule").value(schedule_name(schedule));
  if (f.type) w.key("type").value(schedule_type_name(*f.type));
  for (const auto& [k, v] : f.numbers) write_number(w.key(k), v);
  if (const auto* m = std::get_if<MapSchedule>(&schedule)) {
    w.key("steps").begin_array();
    for (const auto& st : m->steps) {
      w.begin_object();
      w.key("start").value(st.start).key("value").value(st.value);
      w.end_object();
    }
    w.end_array();
  }
  if (const auto* r = std::get_if<RampSchedule>(&schedule)) {
    w.key("base");
    if (r->base)
      write_schedule(w, *r->base);
    else
      w.null();
  }
  w.end_object();
}

std::string schedule_text(const Schedule& schedule) {
  ScheduleFields f = schedule_fields(schedule);
  if (const auto* fixed = std::get_if<FixedSchedule>(&schedule))
    return shortest_double(fixed->value);
  std::string s = std::string(schedule_name(schedule)) + "(";
  bool first = true;
  auto sep = [&] {
    if (!first) s += ", ";
    first = false;
  };
  if (f.type) {
    sep();
    s += schedule_type_name(*f.type);
  }
  for (const auto& [k, v] : f.numbers) {
    sep();
    s += std::string(k) + "=" + number_text(v);
  }
  if (const auto* m = std::get_if<MapSchedule>(&schedule)) {
    sep();
    s += "steps={";
    for (std::size_t i = 0; i < m->steps.size(); ++i)
      s += (i ? ", " : "") + std::to_string(m->steps[i].start) + ": " +
           shortest_double(m->steps[i].value);
    s += "}";
  }
  if (const auto* r = std::get_if<RampSchedule>(&schedule)) {
    sep();
    s += "base=" + (r->base ? schedule_text(*r->base) : std::string("none"));
  }
  return s + ")";
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i)
    s += (i ? ", " : "") + modelzip::detail::printable_name(items[i]);
  return s;
}

}  // namespace

std::string training_config_json(const TrainingConfig& config) {
  JsonWriter w;
  w.begin_object();
  w.key("updater").begin_object(true);
  w.key("type").value(updater_name(config.updater));
  for (const auto& [k, v] : updater_fields(config.updater)) write_number(w.key(k), v);
  w.end_object();
  w.key("learning_rate_schedule");
  if (config.learning_rate_schedule)
    write_schedule(w, *config.learning_rate_schedule);
  else
    w.null();
  w.key("regularization").begin_array();
  for (const auto& r : config.regularization) {
    w.begin_object(true);
    w.key("type").value(regularization_name(r.type));
    w.key("coefficient");
    write_schedule(w, r.coefficient);
    w.key("apply_learning_rate").value(r.apply_learning_rate);
    w.end_object();
  }
  w.end_array();
  w.key("minimize").value(config.minimize);
  auto list = [&](std::string_view key, const std::vector<std::string>& items) {
    w.key(key).begin_array(true);
    for (const auto& s : items) w.value(s);
    w.end_array();
  };
  list("feature_mapping", config.feature_mapping);
  list("label_mapping", config.label_mapping);
  list("feature_mask_mapping", config.feature_mask_mapping);
  list("label_mask_mapping", config.label_mask_mapping);
  list("loss_variables", config.loss_variables);
  w.key("iteration_count").value(config.iteration_count);
  w.key("epoch_count").value(config.epoch_count);
  w.key("properties").begin_object();
  for (const auto& [k, v] : config.properties) w.key(k).value(v);
  w.end_object();
  w.end_object();
  return w.take();
}

std::string training_config_text(const TrainingConfig& config) {
  std::string s = "updater: " + std::string(updater_name(config.updater));
  auto fields = updater_fields(config.updater);
  if (!fields.empty()) {
    s += " (";
    for (std::size_t i = 0; i < fields.size(); ++i)
      s += (i ? ", " : "") + std::string(fields[i].first) + " " + number_text(fields[i].second);
    s += ")";
  }
  // A torch checkpoint's optimizer without an exact schema equivalent (modelzip.torch):
  // the updater above only stands in for it.
  const auto exact = config.properties.find("torch.updater_exact");
  const auto optimizer = config.properties.find("torch.optimizer");
  const bool stand_in = exact != config.properties.end() && exact->second == "false";
  if (stand_in && optimizer != config.properties.end())
    s += ": not the optimizer, which is " + modelzip::detail::printable_name(optimizer->second) +
         " (no exact equivalent: property torch.param_groups holds its settings)";
  else if (stand_in && config.properties.count("torch.optimizers"))
    s += ": not the optimizers (no exact equivalent: property torch.optimizers holds each "
         "one's class and settings)";
  s += "\n";
  if (config.learning_rate_schedule)
    s += "learning-rate schedule: " + schedule_text(*config.learning_rate_schedule) + "\n";
  for (const auto& r : config.regularization) {
    s += "regularization: " + std::string(regularization_name(r.type)) + " " +
         schedule_text(r.coefficient);
    if (r.type == RegularizationType::weight_decay)
      s += r.apply_learning_rate ? " (times the learning rate)" : " (not times the learning rate)";
    s += "\n";
  }
  s += std::string(config.minimize ? "minimize" : "maximize") + "; iteration " +
       std::to_string(config.iteration_count) + ", epoch " + std::to_string(config.epoch_count) +
       "\n";
  auto list = [&](std::string_view label, const std::vector<std::string>& items) {
    if (!items.empty()) s += std::string(label) + ": " + joined(items) + "\n";
  };
  list("features", config.feature_mapping);
  list("labels", config.label_mapping);
  list("feature masks", config.feature_mask_mapping);
  list("label masks", config.label_mask_mapping);
  list("loss variables", config.loss_variables);
  for (const auto& [k, v] : config.properties)
    s += "property " + modelzip::detail::printable_name(k) + " = " +
         modelzip::detail::printable_name(v) + "\n";
  return s;
}

}  // namespace modelzip::graph
