// The JNI glue's common ground: Java types it creates, conversions of
// strings and arrays, ownership of native objects held by Java, and the
// translation of C++ exceptions into Java ones.
//
// Only modelzip's public API (include/modelzip/) and the JDK's jni.h are
// used, and the header-only core/float16.hpp (the library's exact decoders of
// float16, bfloat16 and the float8 types, inline) and graph/training_fields.hpp
// (the field names of training configs, shared with Python and the command).
// Strings cross the boundary as UTF-8 byte[] (Java encodes and decodes them;
// see org.modelzip.Native).
//
// Thread safety: the cached classes and method ids are set once in
// JNI_OnLoad (init_java_types) and only read afterwards; everything else
// works on the JNIEnv of the calling thread.
#pragma once

#include <jni.h>

#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "modelzip/error.hpp"
#include "modelzip/tensor.hpp"

namespace modelzip::jni {

// Thrown by the glue when a JNI call left a Java exception pending; guarded()
// returns to Java, which then throws it.
struct JavaExceptionPending {};

// Throws JavaExceptionPending if the last JNI call raised a Java exception.
void check(JNIEnv* env);

// Classes and constructors of org.modelzip the glue instantiates (global
// references, valid for the life of the library).
struct JavaTypes {
  jclass byte_array = nullptr;  // byte[]
  jclass exception = nullptr;   // ModelzipException
  jmethodID exception_init = nullptr;
  jclass tensor = nullptr;  // Tensor
  jmethodID tensor_init = nullptr;
  jclass param = nullptr;  // Param
  jmethodID param_init = nullptr;
  jclass word_similarity = nullptr;  // WordSimilarity
  jmethodID word_similarity_init = nullptr;
};
// Looks the types up with the class loader of the loading class; returns
// false with a Java exception pending when one is missing.
bool init_java_types(JNIEnv* env);
const JavaTypes& java_types() noexcept;

// One entry of a RegisterNatives table (JNI's struct takes non-const char*).
template <class Function>
JNINativeMethod native_method(const char* name, const char* signature, Function* function) {
  return {const_cast<char*>(name), const_cast<char*>(signature), reinterpret_cast<void*>(function)};
}

// Registers `methods` as the natives of `cls`; returns false with a Java
// exception pending (NoSuchMethodError names the mismatch) on failure.
bool register_natives(JNIEnv* env, jclass cls, std::span<const JNINativeMethod> methods);

// --- Conversions. Each throws JavaExceptionPending when the JVM fails
// (OutOfMemoryError...).
// The text of a UTF-8 byte[]; null gives "".
std::string to_string(JNIEnv* env, jbyteArray utf8);
jbyteArray to_java_bytes(JNIEnv* env, std::string_view text);
jobjectArray to_java_byte_arrays(JNIEnv* env, std::span<const std::string> texts);
std::vector<std::string> to_strings(JNIEnv* env, jobjectArray utf8_arrays);
jlongArray to_java_longs(JNIEnv* env, std::span<const std::int64_t> values);
std::vector<std::int64_t> to_longs(JNIEnv* env, jlongArray values);

// A new org.modelzip.Tensor owning a heap copy of `tensor` (cheap: its
// bytes are shared, so a view keeps its mapping alive).
jobject to_java_tensor(JNIEnv* env, Tensor tensor);

// A frame for `capacity` local references, popped (with every reference
// made in it) when the scope ends, also while a Java exception is pending.
class LocalFrame {
 public:
  LocalFrame(JNIEnv* env, jint capacity) : env_(env) {
    if (env_->PushLocalFrame(capacity) != 0) throw JavaExceptionPending{};
  }
  ~LocalFrame() { env_->PopLocalFrame(nullptr); }
  LocalFrame(const LocalFrame&) = delete;
  LocalFrame& operator=(const LocalFrame&) = delete;

 private:
  JNIEnv* env_;
};

// --- Native objects owned by Java. to_handle moves `value` to the heap and
// returns its address as the jlong Java keeps; from_handle borrows it;
// free_handle destroys it. Java's NativeHandle guarantees that a handle is
// used only while it is alive and freed exactly once.
template <class T>
jlong to_handle(T value) {
  return static_cast<jlong>(
      reinterpret_cast<std::intptr_t>(std::make_unique<T>(std::move(value)).release()));
}
template <class T>
T& from_handle(jlong handle) noexcept {
  return *reinterpret_cast<T*>(static_cast<std::intptr_t>(handle));
}
template <class T>
void free_handle(jlong handle) noexcept {
  std::unique_ptr<T> owned(&from_handle<T>(handle));
}

// --- Exceptions. Throws the Java equivalent of the C++ exception being
// handled: modelzip::Error -> ModelzipException with code and context,
// std::bad_alloc -> OutOfMemoryError, other std::exception ->
// IllegalStateException. Leaves an already pending Java exception alone.
void throw_current_exception(JNIEnv* env) noexcept;
void throw_java(JNIEnv* env, const char* class_name, const std::string& message) noexcept;

// Runs `body` for a native method: returns its result, or a zero value after
// turning any exception into a pending Java exception. No C++ exception
// crosses into the JVM.
template <class Body>
auto guarded(JNIEnv* env, Body&& body) noexcept -> decltype(body()) {
  using Result = decltype(body());
  try {
    return body();
  } catch (...) {
    throw_current_exception(env);
  }
  if constexpr (!std::is_void_v<Result>) return Result{};
}

}  // namespace modelzip::jni
