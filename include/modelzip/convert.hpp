// Converters between modelzip Tensors and other tensor file formats, used by
// `modelzip import` and `modelzip export`:
//
//  - NumPy .npy (format versions 1.0, 2.0 and 3.0). The header dict must hold
//    exactly 'descr', 'fortran_order' and 'shape'. Read: dtypes b1 i1 i2 i4
//    i8 u1 u2 u4 u8 f2 f4 f8 c8 c16 in any byte order ('<', '>', '|';
//    big-endian data is byte-swapped, a complex element's real and imaginary
//    parts each on its own), fortran_order=True (transposed into row-major),
//    and unicode arrays ('<U'/'>U', UCS-4 with trailing NULs stripped as
//    numpy does) as utf8 string tensors. Object arrays ('O'), byte strings,
//    structured, complex256 and datetime dtypes, and '<U0' (items of no bytes,
//    whose shape alone could claim any size): Error(unsupported). Data must
//    fill the file exactly after the header.
//    Written: version 1.0 (2.0 when the header needs more than 65535 bytes),
//    C order, little-endian, header padded to 64 bytes like numpy.
//    bfloat16: numpy has no bfloat16, so modelzip writes bfloat16 tensors as
//    raw '<u2' (the bit patterns); reading them back gives uint16. Likewise
//    float8_e4m3fn, float8_e5m2, float8_e8m0fnu and float4_e2m1fn_x2 (one
//    byte per pair, shape in bytes) are written as raw '|u1' and read back as
//    uint8. complex64 and complex128 are written as '<c8' and '<c16'.
//    utf8 tensors are written as '<U<n>' (n = longest string in code
//    points); a string ending in U+0000 cannot be stored (numpy strips
//    trailing NULs): Error(unsupported).
//  - NumPy .npz: a zip of .npy members, stored or deflated (as np.savez and
//    np.savez_compressed make them); a tensor's name is its member name
//    without ".npy". Read through modelzip's zip layer (bounds-checked
//    directory, libzip for deflate): declared sizes are checked against the
//    file and against deflate's maximal ratio (Limits::max_deflate_ratio)
//    before anything is allocated, a member may not inflate past its
//    declared size, and CRCs are checked. Written with stored members whose
//    data starts at 64-byte aligned file offsets.
//  - safetensors: 8-byte little-endian header size (at most 100 MB), a JSON
//    header {"name": {"dtype", "shape", "data_offsets"}, "__metadata__":
//    {string: string}}, then the data. Read strictly: the JSON is parsed by
//    a small strict parser (no duplicate keys, no unknown fields), data
//    offsets must cover the data area exactly, without gaps or overlaps;
//    dtypes BOOL U8 I8 U16 I16 U32 I32 U64 I64 F16 BF16 F32 F64, and
//    F8_E4M3 / F8_E5M2 / F8_E8M0 as float8_e4m3fn / float8_e5m2 /
//    float8_e8m0fnu, C64 as complex64, and F4 as float4_e2m1fn_x2 with the
//    last dimension halved (F4 counts 4-bit values, float4_e2m1fn_x2 bytes
//    of two values, as torch's safetensors integration converts them; an odd
//    last dimension: Error(unsupported), an odd number of values, which ends
//    in half a byte: Error(corrupt)). Writing doubles the last dimension back;
//    a 0-dimensional float4_e2m1fn_x2 has none: Error(unsupported). Other
//    safetensors dtypes (F6_E2M3, F6_E3M2: no byte packing is defined):
//    Error(unsupported). safetensors has no complex128: writing one is
//    Error(unsupported) naming the tensor. Written as the
//    safetensors library writes: tensors ordered by descending dtype
//    alignment, then by name; no gaps; compact JSON with "__metadata__"
//    first (omitted when empty) and the tensors in data order; header padded
//    with spaces to a multiple of 8.
//  - TFRT Binary Tensor Format (BTF, tensorflow/runtime
//    documents/binary_tensor_format.md and lib/tensor/btf_util.cc): u64
//    num_tensors, u64 record offsets, then per record a 16-byte header (u64
//    rank, u8 dtype, u8 layout, 6 reserved bytes), u64 dims[rank], the
//    payload and zero padding to a multiple of 8. dtypes: i8=0 i16=1 i32=2
//    i64=3 f32=4 f64=5 u8=6 u16=7 u32=8 u64=9. Layouts: 0 row-major dense;
//    1 COO (TFRT's TensorLayout::kCOO_EXPERIMENTAL; the design document says
//    2, which is accepted when reading), whose payload is dims[rank], then
//    the indices as a dense payload (dims [nnz, rank], int64 data) and the
//    values as a dense payload (dims [nnz], data). BTF tensors have no
//    names: they are read as "0", "1", ... and written in the given order
//    (names dropped). Record offsets must be multiples of 8 (as TFRT's
//    btf_info checks) and records may not overlap; reserved header bytes
//    are ignored when reading (TFRT leaves them uninitialized) and written
//    as zeros.
//
//  - Quantized tensors (Layout::quantized, FORMAT.md section 6.1) as plain
//    arrays, in .npz and .safetensors files only: a quantized tensor NAME
//    becomes
//      NAME              the integers, the original shape: int8 for int8
//                        storage, uint8 for uint8, and int8 for int4 storage
//                        (unpacked, one value in [-8, 7] per element);
//      NAME.scales       affine-per-tensor: float64, shape []; affine-per-
//                        axis: float64, [shape[axis]]; block-symmetric: the
//                        stored float16 or float32 scales, shape[:axis] +
//                        [ceil(K / block_size)] with K = the product of
//                        shape[axis:];
//      NAME.zero_points  int64, the shape of NAME.scales (affine schemes
//                        only);
//      NAME.quantization a compact JSON object: "version" 1, "scheme"
//                        (quant_scheme_name), "storage" (quant_storage_name),
//                        "bits" (8 or 4), "axis" (the two schemes that have
//                        one), "block_size" (block-symmetric) and "dtype" (the
//                        original type, dtype_name). safetensors: a
//                        "__metadata__" entry; npz: a 0-d unicode array
//                        ('<U<n>', read by np.load(allow_pickle=False)).
//    Values are then x = (NAME - zero_points) * scales in float64, the
//    scales broadcast along `axis` (per axis) or repeated block_size times
//    along the row and cut to K (block-wise), rounded once to "dtype".
//    read_tensor_file() joins such arrays back into quantized tensors
//    (arrays_to_quantized); read_npz() and read_safetensors() do not.
//
// Reading: inputs are untrusted. Every size and offset is checked
// (overflow-safe) against the bytes really there before use or allocation;
// tensors are zero-copy views into the input Bytes when the data is
// little-endian, row-major and aligned for its type, and owned copies
// otherwise. Malformed input: Error(corrupt) with the byte offset (and the
// npz member as ErrorContext::entry); a rank above Limits::max_rank or a
// deflate ratio above the limit: Error(limit_exceeded).
//
// Writing to a path is crash-safe: the file is written beside the target,
// fsynced and renamed over it, so the target is either the old file or the
// complete new one. A symbolic link stays a link (the file it leads to is
// replaced); a folder, pipe or device is refused (Error(io)), never renamed
// over. A tensor a format cannot hold (strings in safetensors
// or BTF, complex128 in safetensors, float16/bfloat16/float8/float4/complex/bool in
// BTF, sparse COO in npy/npz/safetensors,
// quantized tensors anywhere but through write_tensor_file to npz/safetensors)
// gives Error(unsupported) naming the tensor; duplicate or invalid names
// Error(invalid_argument); I/O failures Error(io).
//
// All functions are thread-safe for distinct arguments.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "modelzip/bytes.hpp"
#include "modelzip/error.hpp"
#include "modelzip/export.hpp"
#include "modelzip/limits.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::convert {

struct MODELZIP_API NamedTensor {
  std::string name{};
  Tensor tensor{};
};

using StringMap = std::map<std::string, std::string>;

enum class TensorFormat { npy, npz, safetensors, btf };
// "npy", "npz", "safetensors", "btf".
MODELZIP_API std::string_view tensor_format_name(TensorFormat format) noexcept;
// The format of `path` by its extension (".npy", ".npz", ".safetensors",
// ".btf"; letter case ignored); nullopt otherwise (read_tensor_file and
// write_tensor_file then throw Error(unsupported) naming the path), as
// finalfusion::embedding_format_for_extension.
MODELZIP_API std::optional<TensorFormat> tensor_format_for_extension(
    const std::filesystem::path& path) noexcept;

#ifndef MODELZIP_NO_DEPRECATED
// The spellings of 0.1, removed in 0.3 (docs/cpp.md, "Changes in 0.2"):
// with `using namespace` of both modelzip::convert and
// modelzip::finalfusion, Format named two types (define
// MODELZIP_NO_DEPRECATED to drop these now).
using Format [[deprecated("use convert::TensorFormat")]] = TensorFormat;
[[deprecated("use convert::tensor_format_name")]] inline std::string_view format_name(
    TensorFormat format) noexcept {
  return tensor_format_name(format);
}
// 0.1's format_from_extension threw where tensor_format_for_extension
// returns nullopt; it still does.
[[deprecated(
    "use convert::tensor_format_for_extension (nullopt for an unknown "
    "extension)")]] inline TensorFormat
format_from_extension(const std::filesystem::path& path) {
  if (auto format = tensor_format_for_extension(path)) return *format;
  throw Error(ErrorCode::unsupported,
              "unknown tensor file extension '" + path.extension().string() +
                  "' (known: .npy, .npz, .safetensors, .btf)",
              ErrorContext{.archive = path.string()});
}
#endif

// The tensors of a file with the format's metadata (safetensors'
// "__metadata__"; empty for the other formats).
struct MODELZIP_API TensorFile {
  TensorFormat format = TensorFormat::npy;
  std::vector<NamedTensor> tensors{};
  StringMap metadata{};
};

// --- Readers. The returned tensors may view `data` (they keep it alive).
// `source` is what `data` is (a file name, a URL, "upload 12"): errors name
// it as ErrorContext::archive, as read_tensor_file's name the path; empty
// (the default), they name no file.
// One tensor named `name`.
MODELZIP_API std::vector<NamedTensor> read_npy(const Bytes& data, std::string name,
                                               const Limits& limits = {},
                                               std::string_view source = {});
// Every member, in the archive's central directory order.
MODELZIP_API std::vector<NamedTensor> read_npz(const Bytes& data, const Limits& limits = {},
                                               std::string_view source = {});
// Tensors in data order, and the "__metadata__" map.
MODELZIP_API TensorFile read_safetensors(const Bytes& data, const Limits& limits = {},
                                         std::string_view source = {});
// Tensors in file order, named "0", "1", ...
MODELZIP_API std::vector<NamedTensor> read_btf(const Bytes& data, const Limits& limits = {},
                                               std::string_view source = {});

// Memory-maps `path` and reads it in `format` (the first form: of its
// extension, as write_tensor_file chooses it); a .npy file's tensor is named
// after the file's stem; quantized tensors written as plain arrays are joined
// back (arrays_to_quantized). Errors name the path (ErrorContext::archive).
MODELZIP_API TensorFile read_tensor_file(const std::filesystem::path& path,
                                         const Limits& limits = {});
MODELZIP_API TensorFile read_tensor_file(const std::filesystem::path& path, TensorFormat format,
                                         const Limits& limits = {});

// --- Writers to streams. Throw Error(io) when the stream fails.
MODELZIP_API void write_npy(std::ostream& out, const Tensor& tensor);
MODELZIP_API void write_safetensors(std::ostream& out, std::span<const NamedTensor> tensors,
                                    const StringMap& metadata = {});
MODELZIP_API void write_btf(std::ostream& out, std::span<const NamedTensor> tensors);

// --- Writers to files (crash-safe replacement of `path`).
MODELZIP_API void write_npy(const std::filesystem::path& path, const Tensor& tensor);
MODELZIP_API void write_npz(const std::filesystem::path& path,
                            std::span<const NamedTensor> tensors);
MODELZIP_API void write_safetensors(const std::filesystem::path& path,
                                    std::span<const NamedTensor> tensors,
                                    const StringMap& metadata = {});
MODELZIP_API void write_btf(const std::filesystem::path& path,
                            std::span<const NamedTensor> tensors);

// Writes `tensors` in `format` (the first form: of `path`'s extension),
// quantized tensors as plain arrays (quantized_to_arrays). A .npy file holds
// exactly one tensor (Error(invalid_argument) otherwise); `metadata` is
// written only to safetensors (Error(unsupported) if non-empty for another
// format).
MODELZIP_API void write_tensor_file(const std::filesystem::path& path,
                                    std::span<const NamedTensor> tensors,
                                    const StringMap& metadata = {});
MODELZIP_API void write_tensor_file(const std::filesystem::path& path, TensorFormat format,
                                    std::span<const NamedTensor> tensors,
                                    const StringMap& metadata = {});

// --- Quantized tensors as plain arrays (see the top of this file).
// `tensors` with every quantized tensor replaced by its arrays (dense tensors
// are kept; views stay views, int4 values are unpacked into owned memory);
// for safetensors the NAME.quantization descriptions are added to
// `metadata`. Error(unsupported) naming the tensor for npy and btf, which
// cannot hold them; Error(invalid_argument) when a produced name is used
// twice (a parameter named like another's NAME.scales) or a description's key
// is already in `metadata`.
MODELZIP_API std::vector<NamedTensor> quantized_to_arrays(std::span<const NamedTensor> tensors,
                                                          TensorFormat format, StringMap& metadata);
// The reverse, in place: for every description (safetensors: a
// "__metadata__" key ending in ".quantization"; npz: a utf8 tensor whose name
// ends in ".quantization"), its arrays become one quantized tensor NAME at
// NAME's position, and the description leaves `file.metadata`. Everything
// is checked as the tensor blob reader checks it (Tensor::quantized: scheme
// and storage, axis, block size, every scale positive and finite, zero
// points in range), plus each array's dtype and exact shape, int4 values in
// [-8, 7], and the description's JSON (strict: no unknown or duplicate
// keys). Errors: Error(corrupt) (Error(unsupported) for an unknown version,
// scheme or storage) whose message names the quantized tensor and whose
// ErrorContext::entry names the array at fault.
MODELZIP_API void arrays_to_quantized(TensorFile& file);

}  // namespace modelzip::convert
