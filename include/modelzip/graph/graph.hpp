// Graph: the computation graph of a checkpoint tag (SameDiff style), stored
// as <tag>/graph.fb (schemas/graph.fbs).
//
// A graph is plain data: variables (parameters, constants, placeholders,
// activations, sequences), ops that read and produce variables, named op
// arguments, output and loss variable names. Build one by filling the
// vectors or through the add_* helpers, inspect it with the find_* helpers.
// The values of VARIABLE and CONSTANT variables are not part of the graph:
// they are the tag's parameters of the same name (see checkpoint.hpp).
//
// Validity rules (checked by validate_graph, by encode_graph and, for
// untrusted bytes, by decode_graph):
//  - variable names are non-empty UTF-8 and unique; so are op names; op types
//    are non-empty UTF-8;
//  - shapes: every dimension >= 0 or kUnknownDim; rank at most
//    Limits::max_rank; VARIABLE and CONSTANT shapes are fully known;
//  - every op input, output and control dependency names a variable; an op's
//    outputs are distinct ARRAY or SEQUENCE variables produced by no other
//    op; every ARRAY variable is produced by exactly one op;
//  - argument names are non-empty and unique within each of the five argument
//    lists of an op;
//  - graph outputs and loss variables name variables and are distinct.
//
// Thread safety: value types; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/dtype.hpp"
#include "modelzip/export.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::graph {

// SameDiff's variable types; numbers as stored in graph.fb.
enum class VariableKind : std::uint8_t {
  variable = 0,     // trainable parameter: has a stored value
  constant = 1,     // fixed value: has a stored value, never trained
  array = 2,        // activation: output of one op, no stored value
  placeholder = 3,  // input fed at run time, no stored value
  sequence = 4,     // list of arrays produced at run time, no stored value
};
// "variable", "constant", "array", "placeholder", "sequence".
MODELZIP_API std::string_view variable_kind_name(VariableKind kind) noexcept;

// A dimension whose size is known only at run time (e.g. a batch size).
inline constexpr std::int64_t kUnknownDim = -1;

struct MODELZIP_API Variable {
  std::string name{};
  VariableKind kind = VariableKind::variable;
  DType dtype = DType::float32;
  // Dimensions (kUnknownDim where unknown); nullopt when even the rank is
  // unknown. Default: a scalar.
  std::optional<Shape> shape = Shape{};

  // VARIABLE and CONSTANT variables have a stored value (a parameter).
  bool has_value() const noexcept {
    return kind == VariableKind::variable || kind == VariableKind::constant;
  }
  // Trained by the updater: a VARIABLE of a floating-point or complex type
  // (complex parameters are trained too, e.g. spectral weights). Only
  // trainable variables may have updater state.
  bool is_trainable() const noexcept {
    return kind == VariableKind::variable && (dtype_is_floating(dtype) || dtype_is_complex(dtype));
  }
  bool operator==(const Variable&) const = default;
};

// One named op argument.
template <class T>
struct NamedArg {
  std::string name{};
  T value{};
  bool operator==(const NamedArg&) const = default;
};

struct MODELZIP_API Op {
  std::string name{};
  std::string type{};  // op type name, e.g. "matmul"
  std::vector<std::string> inputs{};
  std::vector<std::string> outputs{};
  std::vector<std::string> control_deps{};  // variables computed first
  // SameDiff's iArgs, tArgs, bArgs and dArgs with their names, plus strings.
  std::vector<NamedArg<std::int64_t>> i_args{};
  std::vector<NamedArg<double>> t_args{};
  std::vector<NamedArg<bool>> b_args{};
  std::vector<NamedArg<DType>> d_args{};
  std::vector<NamedArg<std::string>> s_args{};

  // Append an argument; return *this for chaining.
  Op& add_i_arg(std::string arg_name, std::int64_t value);
  Op& add_t_arg(std::string arg_name, double value);
  Op& add_b_arg(std::string arg_name, bool value);
  Op& add_d_arg(std::string arg_name, DType value);
  Op& add_s_arg(std::string arg_name, std::string value);

  // The argument of that name, or nullopt.
  std::optional<std::int64_t> i_arg(std::string_view arg_name) const;
  std::optional<double> t_arg(std::string_view arg_name) const;
  std::optional<bool> b_arg(std::string_view arg_name) const;
  std::optional<DType> d_arg(std::string_view arg_name) const;
  std::optional<std::string> s_arg(std::string_view arg_name) const;

  // Bitwise comparison of t_args (so NaN arguments compare equal to
  // themselves, as a round trip requires).
  bool operator==(const Op& other) const;
};

struct MODELZIP_API Graph {
  std::vector<Variable> variables{};
  std::vector<Op> ops{};  // in execution order when known
  std::vector<std::string> outputs{};
  std::vector<std::string> loss_variables{};

  // Append a variable of the given kind. The returned reference is valid
  // until the next append. Names are checked by validate_graph, not here.
  Variable& add_variable(std::string name, DType dtype, Shape shape);
  Variable& add_constant(std::string name, DType dtype, Shape shape);
  Variable& add_placeholder(std::string name, DType dtype, std::optional<Shape> shape);
  Variable& add_array(std::string name, DType dtype, std::optional<Shape> shape);
  Variable& add_sequence(std::string name, DType dtype);
  Op& add_op(std::string name, std::string type, std::vector<std::string> inputs,
             std::vector<std::string> outputs);

  // Linear searches; nullptr when absent. Called on an rvalue (a
  // temporary, as in `load_graph(archive).find_op("fc")`), a copy of what
  // is found (nullopt when absent), which outlives it.
  const Variable* find_variable(std::string_view name) const& noexcept;
  std::optional<Variable> find_variable(std::string_view name) const&& {
    if (const Variable* v = find_variable(name)) return *v;
    return std::nullopt;
  }
  const Op* find_op(std::string_view name) const& noexcept;
  std::optional<Op> find_op(std::string_view name) const&& {
    if (const Op* op = find_op(name)) return *op;
    return std::nullopt;
  }
  // The op that lists `variable` among its outputs.
  const Op* producer(std::string_view variable) const& noexcept;
  std::optional<Op> producer(std::string_view variable) const&& {
    if (const Op* op = producer(variable)) return *op;
    return std::nullopt;
  }
  // Names of the trainable variables, in variable order.
  std::vector<std::string> trainable_variables() const;

  bool operator==(const Graph&) const = default;
};

// Throws Error(invalid_argument) naming the first rule `graph` breaks (see
// the top of this file). Work is linear in the size of the graph.
MODELZIP_API void validate_graph(const Graph& graph, const Limits& limits = {});

// graph.fb: a FlatBuffer (identifier "MZGR", not size-prefixed). Validates
// first (Error(invalid_argument)).
MODELZIP_API Bytes encode_graph(const Graph& graph);

// Decodes untrusted bytes: runs the FlatBuffers verifier (limits: depth,
// tables, Limits::max_flatbuffer_bytes) before reading anything, then checks
// every rule above. Errors: corrupt (verifier, broken rules),
// unsupported (min_reader_version > 1, an unknown variable kind, value kind
// or data type), limit_exceeded (size, rank). The result owns its memory.
MODELZIP_API Graph decode_graph(const Bytes& bytes, const Limits& limits = {});

}  // namespace modelzip::graph
