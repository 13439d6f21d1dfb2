#include "arrays.hpp"

#include <bit>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "modelzip/error.hpp"
#include "modelzip/quantization.hpp"

namespace modelzip::python {
namespace {

std::vector<py::ssize_t> numpy_shape(const Shape& shape) {
  return std::vector<py::ssize_t>(shape.begin(), shape.end());
}

// Row-major strides; throws ValueError when a stride does not fit (possible
// only for shapes with a zero dimension and absurd other dimensions).
std::vector<py::ssize_t> c_strides(const std::vector<py::ssize_t>& shape, py::ssize_t itemsize) {
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t step = itemsize;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    if (shape[i] != 0 && __builtin_mul_overflow(step, shape[i], &step))
      throw py::value_error("tensor shape too large for numpy");
  }
  return strides;
}

void set_read_only(py::array& array) {
  py::detail::array_proxy(array.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
}

// An ndarray viewing `bytes` (kept alive by the array's base capsule).
py::array view_of(const Bytes& bytes, const py::dtype& dtype, const std::vector<py::ssize_t>& shape,
                  bool writable) {
  auto strides = c_strides(shape, dtype.itemsize());
  py::array array;
  if (bytes.empty()) {
    // numpy needs a data pointer to make a view; an empty array owns nothing.
    array = py::array(dtype, shape, strides);
  } else {
    auto* owner = new Bytes(bytes);
    py::capsule base(owner, [](void* p) { delete static_cast<Bytes*>(p); });
    array = py::array(dtype, shape, strides, bytes.data(), base);
  }
  if (!writable) set_read_only(array);
  return array;
}

py::object strings_to_python(const Tensor& t, bool writable) {
  py::list items;
  const std::uint64_t n = t.numel();
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string_view s = t.string_at(i);
    items.append(py::str(s.data(), s.size()));
  }
  py::module_ np = py::module_::import("numpy");
  py::array flat = np.attr("array")(items, py::arg("dtype") = "O");
  py::array array = flat.attr("reshape")(py::tuple(py::cast(numpy_shape(t.shape()))));
  if (!writable) set_read_only(array);
  return array;
}

DType dtype_named(const py::handle& name) {
  std::string text = py::cast<std::string>(name);
  auto type = dtype_from_name(text);
  if (!type) throw py::type_error("unknown modelzip dtype '" + text + "'");
  return *type;
}

py::array as_ndarray(const py::handle& object) {
  if (!py::isinstance<py::array>(object)) throw py::type_error("internal: expected an ndarray");
  return py::reinterpret_borrow<py::array>(object);
}

Shape shape_of(const py::handle& sequence) {
  Shape shape;
  for (py::handle d : sequence) shape.push_back(py::cast<std::int64_t>(d));
  return shape;
}

// The array's buffer, borrowed (see arrays.hpp). The array must be
// C-contiguous and little-endian with elements of `type`.
Bytes borrow_array(const py::array& array, DType type) {
  if (!(array.flags() & py::array::c_style))
    throw py::value_error("internal: array to save is not C-contiguous");
  const char order = array.dtype().byteorder();
  const bool little =
      order == '<' || order == '|' || (order == '=' && std::endian::native == std::endian::little);
  if (!little) throw py::value_error("internal: array to save is not little-endian");
  if (static_cast<std::size_t>(array.itemsize()) != dtype_size(type))
    throw py::type_error("internal: numpy itemsize " + std::to_string(array.itemsize()) +
                         " does not match dtype " + std::string(dtype_name(type)));
  std::span<const std::byte> data(static_cast<const std::byte*>(array.data()),
                                  static_cast<std::size_t>(array.nbytes()));
  return Bytes::borrow(data, python_keeper(py::reinterpret_borrow<py::object>(array)));
}

}  // namespace

py::dtype numpy_dtype(DType type) {
  const char* name = "O";
  switch (type) {
    case DType::bool_:
      name = "?";
      break;
    case DType::float16:
      name = "<f2";
      break;
    case DType::float32:
      name = "<f4";
      break;
    case DType::float64:
      name = "<f8";
      break;
    case DType::int8:
      name = "i1";
      break;
    case DType::int16:
      name = "<i2";
      break;
    case DType::int32:
      name = "<i4";
      break;
    case DType::int64:
      name = "<i8";
      break;
    case DType::uint8:
      name = "u1";
      break;
    case DType::uint16:
      name = "<u2";
      break;
    case DType::uint32:
      name = "<u4";
      break;
    case DType::uint64:
      name = "<u8";
      break;
    case DType::bfloat16:
      name = "<u2";
      break;
    case DType::float8_e4m3fn:
    case DType::float8_e5m2:
    case DType::float8_e8m0fnu:
    case DType::float4_e2m1fn_x2:  // one byte per pair, as torch.float4_e2m1fn_x2.view(uint8)
      name = "u1";
      break;
    case DType::complex64:
      name = "<c8";
      break;
    case DType::complex128:
      name = "<c16";
      break;
    case DType::utf8:
      name = "O";
      break;
  }
  return py::dtype::from_args(py::str(name));
}

namespace {

// A modelzip.QuantizedTensor viewing the tensor's integers, scales and zero points.
py::object quantized_to_python(const Tensor& t, bool writable) {
  const Quantization& q = *t.quantization();
  py::dict kwargs;
  if (q.storage == QuantStorage::int4) {
    kwargs["values"] = view_of(t.values(), py::dtype::from_args(py::str("u1")),
                               {static_cast<py::ssize_t>(t.values().size())}, writable);
  } else {
    kwargs["values"] = view_of(
        t.values(), py::dtype::from_args(py::str(q.storage == QuantStorage::int8 ? "i1" : "u1")),
        numpy_shape(t.shape()), writable);
  }
  kwargs["shape"] = py::tuple(py::cast(numpy_shape(t.shape())));
  kwargs["dtype"] = std::string(dtype_name(t.dtype()));
  kwargs["scheme"] = std::string(quant_scheme_name(q.scheme));
  kwargs["storage"] = std::string(quant_storage_name(q.storage));
  switch (q.scheme) {
    case QuantScheme::affine_per_tensor:
      kwargs["scale"] = q.scale;
      kwargs["zero_point"] = q.zero_point;
      break;
    case QuantScheme::affine_per_axis:
    case QuantScheme::block_symmetric: {
      kwargs["axis"] = q.axis;
      const py::dtype scale_type = numpy_dtype(q.scale_dtype);
      kwargs["scales"] =
          view_of(q.scales, scale_type,
                  {static_cast<py::ssize_t>(q.scales.size()) / scale_type.itemsize()}, writable);
      if (q.scheme == QuantScheme::affine_per_axis)
        kwargs["zero_points"] =
            view_of(q.zero_points, py::dtype::from_args(py::str("<i8")),
                    {static_cast<py::ssize_t>(q.zero_points.size() / 8)}, writable);
      else
        kwargs["block_size"] = q.block_size;
      break;
    }
  }
  return helper("_values", "QuantizedTensor")(**kwargs);
}

template <typename Enum>
Enum enum_named(const std::string& text, std::string_view (*name)(Enum) noexcept,
                std::initializer_list<Enum> values, const char* what) {
  for (Enum e : values)
    if (name(e) == text) return e;
  throw py::value_error(std::string("unknown quantization ") + what + " '" + text + "'");
}

// The bytes of an optional little-endian ndarray (None: none), borrowed.
Bytes optional_bytes(const py::handle& array, DType type) {
  if (array.is_none()) return {};
  return borrow_array(as_ndarray(array), type);
}

// ("quantized", values, dtype, shape, scheme, storage, scale, zero_point, axis,
//  block_size, scales or None, scale dtype or None, zero_points or None)
Tensor quantized_from_savable(const py::tuple& s) {
  Quantization q;
  q.scheme = enum_named(
      py::cast<std::string>(s[4]), quant_scheme_name,
      {QuantScheme::affine_per_tensor, QuantScheme::affine_per_axis, QuantScheme::block_symmetric},
      "scheme");
  q.storage = enum_named(py::cast<std::string>(s[5]), quant_storage_name,
                         {QuantStorage::int8, QuantStorage::uint8, QuantStorage::int4}, "storage");
  q.scale = py::cast<double>(s[6]);
  q.zero_point = py::cast<std::int64_t>(s[7]);
  q.axis = py::cast<std::int64_t>(s[8]);
  q.block_size = py::cast<std::uint64_t>(s[9]);
  if (!s[11].is_none()) q.scale_dtype = dtype_named(s[11]);
  q.scales = optional_bytes(s[10], q.scale_dtype);
  q.zero_points = optional_bytes(s[12], DType::int64);
  py::array values = as_ndarray(s[1]);
  const DType storage_type = q.storage == QuantStorage::int8 ? DType::int8 : DType::uint8;
  return Tensor::quantized(dtype_named(s[2]), shape_of(s[3]), std::move(q),
                           borrow_array(values, storage_type));
}

}  // namespace

py::object tensor_to_python(const Tensor& t, bool writable) {
  if (t.layout() == Layout::dense) {
    if (t.dtype() == DType::utf8) return strings_to_python(t, writable);
    return view_of(t.values(), numpy_dtype(t.dtype()), numpy_shape(t.shape()), writable);
  }
  if (t.layout() == Layout::quantized) return quantized_to_python(t, writable);
  const auto nnz = static_cast<py::ssize_t>(t.nnz());
  const auto rank = static_cast<py::ssize_t>(t.rank());
  py::array indices =
      view_of(t.indices(), py::dtype::from_args(py::str("<i8")), {nnz, rank}, writable);
  py::array values = view_of(t.values(), numpy_dtype(t.dtype()), {nnz}, writable);
  py::tuple shape = py::cast(numpy_shape(t.shape()));
  return helper("_values", "SparseCOO")(indices, values, shape);
}

Tensor tensor_from_savable(const py::tuple& savable, std::string_view name) {
  const std::string kind = py::cast<std::string>(savable[0]);
  if (kind == "dense") {
    py::array array = as_ndarray(savable[1]);
    DType type = dtype_named(savable[2]);
    Shape shape(array.shape(), array.shape() + array.ndim());
    return Tensor::dense(type, std::move(shape), borrow_array(array, type));
  }
  if (kind == "strings") {
    std::vector<std::string> items;
    for (py::handle s : savable[1]) {
      Py_ssize_t size = 0;
      const char* utf8 = PyUnicode_AsUTF8AndSize(s.ptr(), &size);
      if (utf8 == nullptr) {  // a lone surrogate: no UTF-8 for it
        const py::error_already_set error;
        throw py::value_error((name.empty() ? "" : "parameter '" + std::string(name) + "': ") +
                              "string " + std::to_string(items.size()) +
                              " is no UTF-8 text: " + py::str(error.value()).cast<std::string>());
      }
      items.emplace_back(utf8, static_cast<std::size_t>(size));
    }
    return Tensor::strings(shape_of(savable[2]), items);
  }
  if (kind == "sparse") {
    py::array indices = as_ndarray(savable[1]);
    py::array values = as_ndarray(savable[2]);
    DType type = dtype_named(savable[4]);
    return Tensor::sparse_coo(type, shape_of(savable[3]), static_cast<std::uint64_t>(values.size()),
                              borrow_array(indices, DType::int64), borrow_array(values, type));
  }
  if (kind == "quantized") return quantized_from_savable(savable);
  throw py::type_error("internal: unknown savable kind '" + kind + "'");
}

}  // namespace modelzip::python
