// Format detection by extension and the file-level dispatchers.
#include <algorithm>
#include <cctype>

#include "convert/tensor_bytes.hpp"
#include "io/mapped_file.hpp"
#include "modelzip/convert.hpp"
#include "remote/remote_source.hpp"

namespace modelzip::convert {

std::string_view tensor_format_name(TensorFormat format) noexcept {
  switch (format) {
    case TensorFormat::npy:
      return "npy";
    case TensorFormat::npz:
      return "npz";
    case TensorFormat::safetensors:
      return "safetensors";
    case TensorFormat::btf:
      return "btf";
  }
  return "unknown";
}

namespace {

std::string lowercase_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

}  // namespace

std::optional<TensorFormat> tensor_format_for_extension(
    const std::filesystem::path& path) noexcept {
  const std::string ext = lowercase_extension(path);
  if (ext == ".npy") return TensorFormat::npy;
  if (ext == ".npz") return TensorFormat::npz;
  if (ext == ".safetensors") return TensorFormat::safetensors;
  if (ext == ".btf") return TensorFormat::btf;
  return std::nullopt;
}

namespace {

// The format of `path` by its extension, for the forms of read_tensor_file
// and write_tensor_file that choose it: Error(unsupported) naming the path
// otherwise.
TensorFormat format_of(const std::filesystem::path& path) {
  if (auto format = tensor_format_for_extension(path)) return *format;
  const std::string ext = lowercase_extension(path);
  if (ext == ".h5" || ext == ".hdf5")
    throw Error(ErrorCode::unsupported,
                "HDF5 is not a format modelzip reads or writes: in Python, h5py reads the "
                "datasets and modelzip.save stores them (docs/python.md, \"HDF5 files\")",
                ErrorContext{.archive = path.string()});
  throw Error(ErrorCode::unsupported,
              "unknown tensor file extension '" + path.extension().string() +
                  "' (known: .npy, .npz, .safetensors, .btf)",
              ErrorContext{.archive = path.string()});
}

}  // namespace

TensorFile read_tensor_file(const std::filesystem::path& path, const Limits& limits) {
  return read_tensor_file(path, format_of(path), limits);
}

TensorFile read_tensor_file(const std::filesystem::path& path, TensorFormat format,
                            const Limits& limits) {
  remote::refuse_url_of_file(path.native(), "tensor");
  try {
    const Bytes data = io::map_file(path);
    const std::string source = path.string();
    TensorFile file;
    switch (format) {
      case TensorFormat::npy:
        file = {format, read_npy(data, path.stem().string(), limits, source), {}};
        break;
      case TensorFormat::npz:
        file = {format, read_npz(data, limits, source), {}};
        break;
      case TensorFormat::safetensors:
        file = read_safetensors(data, limits, source);
        break;
      case TensorFormat::btf:
        file = {format, read_btf(data, limits, source), {}};
        break;
    }
    arrays_to_quantized(file);
    return file;
  } catch (const Error& e) {
    throw e.with_context({.archive = path.string()});
  }
}

void write_tensor_file(const std::filesystem::path& path, TensorFormat format,
                       std::span<const NamedTensor> tensors, const StringMap& metadata) {
  if (!metadata.empty() && format != TensorFormat::safetensors)
    throw Error(
        ErrorCode::unsupported,
        std::string(tensor_format_name(format)) + " files cannot hold metadata (safetensors can)",
        ErrorContext{.archive = path.string()});
  StringMap meta = metadata;
  std::vector<NamedTensor> arrays;
  try {
    arrays = quantized_to_arrays(tensors, format, meta);
  } catch (const Error& e) {
    throw e.with_context({.archive = path.string()});
  }
  try {
    switch (format) {
      case TensorFormat::npy:
        if (arrays.size() != 1)
          throw Error(ErrorCode::invalid_argument,
                      "a .npy file holds exactly one tensor, got " + std::to_string(arrays.size()));
        try {
          write_npy(path, arrays[0].tensor);
        } catch (const Error& e) {
          throw detail::name_error(e, arrays[0].name);
        }
        return;
      case TensorFormat::npz:
        return write_npz(path, arrays);
      case TensorFormat::safetensors:
        return write_safetensors(path, arrays, meta);
      case TensorFormat::btf:
        return write_btf(path, arrays);
    }
  } catch (const Error& e) {
    throw e.with_context({.archive = path.string()});  // what cannot be written, and where
  }
}

void write_tensor_file(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                       const StringMap& metadata) {
  write_tensor_file(path, format_of(path), tensors, metadata);
}

}  // namespace modelzip::convert
