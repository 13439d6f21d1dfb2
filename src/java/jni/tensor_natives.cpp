// The natives of org.modelzip.Tensor (declared in Native.java). A jlong
// tensor is a heap modelzip::Tensor owned by a Java NativeHandle; a jlong
// bytes a heap modelzip::Bytes (a reference to a tensor's values) owned by a
// Cleaner registered on the direct ByteBuffer made over it, so the bytes,
// and the mapping they may view, live as long as that buffer is reachable.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>

#include "core/dtype_article.hpp"  // header-only, inline
#include "core/float16.hpp"        // the library's exact decoders (header-only, inline)
#include "modelzip/dtype.hpp"
#include "modelzip/tensor.hpp"
#include "natives.hpp"
#include "support.hpp"

namespace modelzip::jni {
namespace {

const Tensor& tensor_of(jlong handle) {
  return from_handle<Tensor>(handle);
}

// The byte size of a primitive Java array of `element_bytes` wide elements.
std::size_t array_bytes(JNIEnv* env, jarray array, jint element_bytes) {
  if (array == nullptr || element_bytes <= 0) throw Error(ErrorCode::invalid_argument, "no array");
  return static_cast<std::size_t>(env->GetArrayLength(array)) *
         static_cast<std::size_t>(element_bytes);
}

// Copies between a primitive Java array and native memory of its byte size.
void copy_from_array(JNIEnv* env, jarray array, std::span<std::byte> out) {
  if (out.empty()) return;
  void* elements = env->GetPrimitiveArrayCritical(array, nullptr);
  if (elements == nullptr) throw JavaExceptionPending{};
  std::memcpy(out.data(), elements, out.size());
  env->ReleasePrimitiveArrayCritical(array, elements, JNI_ABORT);
}

void copy_to_array(JNIEnv* env, std::span<const std::byte> in, jarray array) {
  if (in.empty()) return;
  void* elements = env->GetPrimitiveArrayCritical(array, nullptr);
  if (elements == nullptr) throw JavaExceptionPending{};
  std::memcpy(elements, in.data(), in.size());
  env->ReleasePrimitiveArrayCritical(array, elements, 0);
}

// The bytes of a bool tensor (any non-zero byte is true) into a boolean[] as
// JNI_TRUE and JNI_FALSE: the JVM assumes a boolean holds 0 or 1, and a 2
// read from a file would compare unequal to true (Arrays.equals, ^).
void copy_bools_to_array(JNIEnv* env, std::span<const std::byte> in, jbooleanArray array) {
  std::array<jboolean, 4096> chunk;
  for (std::size_t start = 0; start < in.size(); start += chunk.size()) {
    const std::size_t count = std::min(chunk.size(), in.size() - start);
    for (std::size_t i = 0; i < count; ++i)
      chunk[i] = in[start + i] != std::byte{0} ? JNI_TRUE : JNI_FALSE;
    env->SetBooleanArrayRegion(array, static_cast<jsize>(start), static_cast<jsize>(count),
                               chunk.data());
    check(env);
  }
}

// The kind of Java array Tensor.of makes a `dtype` tensor from, whose
// values are `element_bytes` wide.
std::string_view java_array_name(DType dtype, jint element_bytes) {
  if (dtype == DType::bool_) return "boolean[]";
  switch (element_bytes) {
    case 1:
      return "byte[]";
    case 2:
      return "short[]";
    case 4:
      return dtype == DType::float32 || dtype == DType::complex64 ? "float[]" : "int[]";
    default:
      return dtype == DType::float64 || dtype == DType::complex128 ? "double[]" : "long[]";
  }
}

// Why an array of `length` values cannot be a `dtype` tensor of `shape`, in
// the Java caller's terms (array values, where Tensor::dense counts bytes),
// or "" when the counts are not what is wrong (a negative dimension...).
std::string java_size_mismatch(DType dtype, std::span<const std::int64_t> shape, jsize length,
                               std::string_view array) {
  std::uint64_t elements = 1;
  std::string dims;
  for (std::int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(elements, static_cast<std::uint64_t>(d), &elements))
      return {};
    dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  }
  const bool complex = dtype_is_complex(dtype);
  std::uint64_t values = elements;
  if (complex && __builtin_mul_overflow(elements, std::uint64_t{2}, &values)) return {};
  if (values == static_cast<std::uint64_t>(length)) return {};
  std::string out = std::string(dtype_name(dtype)) + " tensor of shape [" + dims + "]: the " +
                    std::string(array) + " has " + std::to_string(length) +
                    " values, the shape holds " + std::to_string(values);
  if (complex)
    out += " (" + std::to_string(elements) + " elements of 2 values: real, imaginary)";
  else if (dtype == DType::float4_e2m1fn_x2)
    out += " (the shape counts bytes, each a pair of FP4 values)";
  return out;
}

jobject tensor_from_array(JNIEnv* env, jclass, jbyteArray dtype_name_utf8, jobject array,
                          jint element_bytes, jlongArray shape) {
  return guarded(env, [&]() -> jobject {
    const std::string name = to_string(env, dtype_name_utf8);
    const std::optional<DType> dtype = dtype_from_name(name);
    if (!dtype || *dtype == DType::utf8)
      throw Error(ErrorCode::invalid_argument, "unknown fixed-size data type '" + name + "'");
    // A complex element is two array values (real, imaginary).
    const std::size_t value_bytes =
        dtype_is_complex(*dtype) ? dtype_size(*dtype) / 2 : dtype_size(*dtype);
    if (value_bytes != static_cast<std::size_t>(element_bytes))
      throw Error(ErrorCode::invalid_argument, name + " array values are " +
                                                   std::to_string(value_bytes) + " bytes, not " +
                                                   std::to_string(element_bytes));
    auto java_array = static_cast<jarray>(array);
    std::vector<std::byte> values(array_bytes(env, java_array, element_bytes));
    copy_from_array(env, java_array, values);
    const std::vector<std::int64_t> dims = to_longs(env, shape);
    // Tensor::dense checks that the shape holds exactly these bytes; its
    // error counts bytes, so a mismatch is told in array values first.
    try {
      return to_java_tensor(env, Tensor::dense(*dtype, dims, Bytes::take(std::move(values))));
    } catch (const Error& e) {
      const std::string java = java_size_mismatch(*dtype, dims, env->GetArrayLength(java_array),
                                                  java_array_name(*dtype, element_bytes));
      if (java.empty()) throw;
      throw Error(e.code(), java + " (" + e.message() + ")", e.context());
    }
  });
}

// The bytes of `parts` one after the other: lengths[i] bytes of parts[i] (a
// direct ByteBuffer or a byte[]) from byte offsets[i], copied once into
// memory of their total size (2 GiB and more: no single Java buffer holds
// a tensor that large).
jobject tensor_from_buffers(JNIEnv* env, jclass, jbyteArray dtype_name_utf8, jobjectArray parts,
                            jlongArray offsets, jintArray lengths, jlongArray shape) {
  return guarded(env, [&]() -> jobject {
    const std::string name = to_string(env, dtype_name_utf8);
    const std::optional<DType> dtype = dtype_from_name(name);
    if (!dtype || *dtype == DType::utf8)
      throw Error(ErrorCode::invalid_argument, "unknown fixed-size data type '" + name + "'");
    const jsize count = env->GetArrayLength(parts);
    if (env->GetArrayLength(offsets) != count || env->GetArrayLength(lengths) != count)
      throw Error(ErrorCode::invalid_argument, "parts, offsets and lengths differ in number");
    std::vector<jlong> from(static_cast<std::size_t>(count));
    std::vector<jint> size(static_cast<std::size_t>(count));
    env->GetLongArrayRegion(offsets, 0, count, from.data());
    env->GetIntArrayRegion(lengths, 0, count, size.data());
    check(env);
    std::uint64_t total = 0;
    for (jsize i = 0; i < count; ++i) {
      if (size[i] < 0 || from[i] < 0)
        throw Error(ErrorCode::invalid_argument, "a negative buffer range");
      total += static_cast<std::uint64_t>(size[i]);
    }
    std::vector<std::byte> values(static_cast<std::size_t>(total));
    std::size_t at = 0;
    for (jsize i = 0; i < count; ++i) {
      const LocalFrame frame(env, 1);
      jobject part = env->GetObjectArrayElement(parts, i);
      check(env);
      const auto length = static_cast<std::size_t>(size[i]);
      if (part == nullptr) throw Error(ErrorCode::invalid_argument, "a null part");
      if (!env->IsInstanceOf(part, java_types().byte_array)) {
        // A direct buffer: Java passes its position and remaining bytes,
        // which lie within its capacity.
        const auto* address = static_cast<const std::byte*>(env->GetDirectBufferAddress(part));
        const jlong capacity = env->GetDirectBufferCapacity(part);
        if (capacity < 0 || from[i] > capacity || size[i] > capacity - from[i] ||
            (address == nullptr && length > 0))
          throw Error(ErrorCode::invalid_argument, "not a direct buffer holding that range");
        if (length > 0) std::memcpy(values.data() + at, address + from[i], length);
      } else {
        auto heap = static_cast<jbyteArray>(part);
        if (from[i] > env->GetArrayLength(heap) || size[i] > env->GetArrayLength(heap) - from[i])
          throw Error(ErrorCode::invalid_argument, "not a byte[] holding that range");
        env->GetByteArrayRegion(heap, static_cast<jsize>(from[i]), size[i],
                                reinterpret_cast<jbyte*>(values.data() + at));
        check(env);
      }
      at += length;
    }
    return to_java_tensor(
        env, Tensor::dense(*dtype, to_longs(env, shape), Bytes::take(std::move(values))));
  });
}

jobject tensor_from_strings(JNIEnv* env, jclass, jobjectArray utf8, jlongArray shape) {
  return guarded(env, [&] {
    const std::vector<std::string> strings = to_strings(env, utf8);
    return to_java_tensor(env, Tensor::strings(to_longs(env, shape), strings));
  });
}

void tensor_free(JNIEnv*, jclass, jlong tensor) {
  free_handle<Tensor>(tensor);
}

jboolean tensor_is_mapped(JNIEnv*, jclass, jlong tensor) {
  return static_cast<jboolean>(tensor_of(tensor).values().is_mapped());
}

void tensor_copy_values(JNIEnv* env, jclass, jlong tensor, jobject array, jint element_bytes) {
  guarded(env, [&] {
    const Bytes& values = tensor_of(tensor).values();
    auto java_array = static_cast<jarray>(array);
    if (array_bytes(env, java_array, element_bytes) != values.size())
      throw Error(ErrorCode::invalid_argument,
                  "the Java array does not have the size of the tensor's values");
    if (tensor_of(tensor).dtype() == DType::bool_)
      copy_bools_to_array(env, values.span(), static_cast<jbooleanArray>(java_array));
    else
      copy_to_array(env, values.span(), java_array);
  });
}

// The little-endian value at `p` of a floating-point `dtype` (one part of a
// complex one) as Out (float or double). Exact for the pairs decode_values
// lets through: every value of the narrower formats is a float.
template <class Out>
Out decode_element(DType dtype, const std::byte* p) noexcept {
  // Only the element's own bytes are read (a 1-byte element may be the last
  // byte of the mapping).
  const auto u8 = static_cast<std::uint8_t>(p[0]);
  const auto u16 = [&] {
    return static_cast<std::uint16_t>(u8 | static_cast<unsigned>(p[1]) << 8);
  };
  switch (dtype) {
    case DType::float16:
      return static_cast<Out>(detail::half_to_float(u16()));
    case DType::bfloat16:
      return static_cast<Out>(detail::bfloat16_to_float(u16()));
    case DType::float8_e4m3fn:
      return static_cast<Out>(detail::float8_e4m3fn_to_float(u8));
    case DType::float8_e5m2:
      return static_cast<Out>(detail::float8_e5m2_to_float(u8));
    case DType::float8_e8m0fnu:
      return static_cast<Out>(detail::float8_e8m0fnu_to_float(u8));
    case DType::float32:
    case DType::complex64: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return static_cast<Out>(f);
    }
    default: {  // float64, complex128 (into double only)
      double d;
      std::memcpy(&d, p, sizeof d);
      return static_cast<Out>(d);
    }
  }
}

// The values `first` ... `first` + length - 1 of `t` (a dense real, complex
// or MX floating-point tensor) widened exactly to Out into the Java array
// `array` (float[] or double[]); complex parts and the FP4 values of a
// float4_e2m1fn_x2 byte count one each, the low nibble first.
template <class Out, class JavaArray>
void decode_values(JNIEnv* env, const Tensor& t, JavaArray array, jlong first,
                   void (JNIEnv::*set_region)(JavaArray, jsize, jsize, const Out*)) {
  const DType dtype = t.dtype();
  const bool fp4_pairs = dtype == DType::float4_e2m1fn_x2;
  const bool exact = dtype_is_floating(dtype) || dtype_is_complex(dtype) ||
                     dtype == DType::float8_e8m0fnu || fp4_pairs;
  const std::size_t part_bytes =
      dtype_is_complex(dtype) ? dtype_size(dtype) / 2 : dtype_size(dtype);
  if (!exact || part_bytes > sizeof(Out))
    throw Error(ErrorCode::invalid_argument, detail::dtype_with_article(dtype) +
                                                 " tensor does not widen exactly to " +
                                                 (sizeof(Out) == 4 ? "float" : "double"));
  const std::span<const std::byte> bytes = t.values().span();
  const std::size_t total = fp4_pairs ? bytes.size() * 2 : bytes.size() / part_bytes;
  const auto n = static_cast<std::size_t>(env->GetArrayLength(array));
  if (first < 0 || static_cast<std::uint64_t>(first) > total ||
      n > total - static_cast<std::size_t>(first))
    throw Error(ErrorCode::invalid_argument, "values " + std::to_string(first) + " + " +
                                                 std::to_string(n) + " outside the tensor's " +
                                                 std::to_string(total));
  const auto offset = static_cast<std::size_t>(first);
  // In chunks through a buffer: no critical section while converting.
  std::array<Out, 1024> chunk;
  for (std::size_t start = 0; start < n; start += chunk.size()) {
    const std::size_t count = std::min(chunk.size(), n - start);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t value = offset + start + i;
      chunk[i] = fp4_pairs ? static_cast<Out>(detail::float4_e2m1fn_x2_value(bytes.data(), value))
                           : decode_element<Out>(dtype, bytes.data() + value * part_bytes);
    }
    (env->*set_region)(array, static_cast<jsize>(start), static_cast<jsize>(count), chunk.data());
    check(env);
  }
}

void tensor_decode_values(JNIEnv* env, jclass, jlong tensor, jobject array, jint element_bytes,
                          jlong first) {
  guarded(env, [&] {
    const Tensor& t = tensor_of(tensor);
    if (t.layout() != Layout::dense)
      throw Error(ErrorCode::invalid_argument, "only dense tensors are decoded");
    if (element_bytes == 4)
      decode_values<jfloat>(env, t, static_cast<jfloatArray>(array), first,
                            &JNIEnv::SetFloatArrayRegion);
    else if (element_bytes == 8)
      decode_values<jdouble>(env, t, static_cast<jdoubleArray>(array), first,
                             &JNIEnv::SetDoubleArrayRegion);
    else
      throw Error(ErrorCode::invalid_argument, "values decode into float[] or double[] only");
  });
}

jobjectArray tensor_strings(JNIEnv* env, jclass, jlong tensor) {
  return guarded(env, [&] {
    const Tensor& t = tensor_of(tensor);
    std::vector<std::string> strings;
    const std::uint64_t n = t.numel();
    if (n > static_cast<std::uint64_t>(std::numeric_limits<jsize>::max()))
      throw Error(ErrorCode::limit_exceeded, "too many strings for a Java array");
    strings.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) strings.emplace_back(t.string_at(i));
    return to_java_byte_arrays(env, strings);
  });
}

jobject tensor_dequantize(JNIEnv* env, jclass, jlong tensor) {
  return guarded(env, [&] { return to_java_tensor(env, tensor_of(tensor).dequantize()); });
}

jlong tensor_retain_values(JNIEnv* env, jclass, jlong tensor) {
  return guarded(env, [&] { return to_handle(Bytes(tensor_of(tensor).values())); });
}

void bytes_free(JNIEnv*, jclass, jlong bytes) {
  free_handle<Bytes>(bytes);
}

jobject bytes_buffer(JNIEnv* env, jclass, jlong bytes, jlong offset, jint length) {
  return guarded(env, [&]() -> jobject {
    const Bytes& b = from_handle<Bytes>(bytes);
    if (offset < 0 || length < 0 || static_cast<std::uint64_t>(offset) > b.size() ||
        static_cast<std::uint64_t>(length) > b.size() - static_cast<std::uint64_t>(offset))
      throw Error(ErrorCode::invalid_argument, "buffer range outside the tensor's values");
    // A zero-length buffer needs an address all the same.
    static std::byte empty_address;
    const std::byte* start = length == 0 ? &empty_address : b.data() + offset;
    // Read-only by contract: Java only hands out asReadOnlyBuffer() views.
    jobject out = env->NewDirectByteBuffer(const_cast<std::byte*>(start), length);
    if (out == nullptr) {
      check(env);
      throw Error(ErrorCode::unsupported, "this JVM does not support direct buffers from JNI");
    }
    return out;
  });
}

const JNINativeMethod kMethods[] = {
    native_method("tensorFromArray", "([BLjava/lang/Object;I[J)Lorg/modelzip/Tensor;",
                  tensor_from_array),
    native_method("tensorFromStrings", "([[B[J)Lorg/modelzip/Tensor;", tensor_from_strings),
    native_method("tensorFromBuffers", "([B[Ljava/lang/Object;[J[I[J)Lorg/modelzip/Tensor;",
                  tensor_from_buffers),
    native_method("tensorFree", "(J)V", tensor_free),
    native_method("tensorIsMapped", "(J)Z", tensor_is_mapped),
    native_method("tensorCopyValues", "(JLjava/lang/Object;I)V", tensor_copy_values),
    native_method("tensorDecodeValues", "(JLjava/lang/Object;IJ)V", tensor_decode_values),
    native_method("tensorStrings", "(J)[[B", tensor_strings),
    native_method("tensorDequantize", "(J)Lorg/modelzip/Tensor;", tensor_dequantize),
    native_method("tensorRetainValues", "(J)J", tensor_retain_values),
    native_method("bytesFree", "(J)V", bytes_free),
    native_method("bytesBuffer", "(JJI)Ljava/nio/ByteBuffer;", bytes_buffer),
};

}  // namespace

bool register_tensor_natives(JNIEnv* env, jclass native_class) {
  return register_natives(env, native_class, kMethods);
}

}  // namespace modelzip::jni
