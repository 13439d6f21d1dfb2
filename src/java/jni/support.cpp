#include "support.hpp"

#include <exception>
#include <limits>

namespace modelzip::jni {
namespace {

JavaTypes g_types;  // written once by init_java_types (JNI_OnLoad), then read-only

jclass global_class(JNIEnv* env, const char* name) {
  jclass local = env->FindClass(name);
  if (local == nullptr) return nullptr;
  auto global = static_cast<jclass>(env->NewGlobalRef(local));
  env->DeleteLocalRef(local);
  return global;
}

void throw_modelzip_exception(JNIEnv* env, const Error& e) {
  const ErrorContext& c = e.context();
  jbyteArray full = to_java_bytes(env, e.what());
  jbyteArray code = to_java_bytes(env, modelzip::error_code_name(e.code()));
  jbyteArray bare = to_java_bytes(env, e.message());
  jbyteArray archive = to_java_bytes(env, c.archive);
  jbyteArray entry = to_java_bytes(env, c.entry);
  jbyteArray tag = to_java_bytes(env, c.tag);
  auto number = [](const std::optional<std::uint64_t>& n) -> jlong {
    return n && *n <= static_cast<std::uint64_t>(std::numeric_limits<jlong>::max())
               ? static_cast<jlong>(*n)
               : -1;
  };
  auto exception = static_cast<jthrowable>(
      env->NewObject(g_types.exception, g_types.exception_init, full, code, bare, archive, entry,
                     tag, number(c.line), number(c.offset), static_cast<jint>(e.system_error())));
  check(env);
  env->Throw(exception);
}

}  // namespace

void check(JNIEnv* env) {
  if (env->ExceptionCheck()) throw JavaExceptionPending{};
}

bool init_java_types(JNIEnv* env) {
  JavaTypes t;
  if (!(t.byte_array = global_class(env, "[B"))) return false;
  if (!(t.exception = global_class(env, "org/modelzip/ModelzipException"))) return false;
  if (!(t.exception_init = env->GetMethodID(t.exception, "<init>", "([B[B[B[B[B[BJJI)V")))
    return false;
  if (!(t.tensor = global_class(env, "org/modelzip/Tensor"))) return false;
  if (!(t.tensor_init = env->GetMethodID(t.tensor, "<init>", "(J[B[J[BJ)V"))) return false;
  if (!(t.param = global_class(env, "org/modelzip/Param"))) return false;
  if (!(t.param_init = env->GetMethodID(t.param, "<init>", "([B[B[B[JJZ[B[BZZ[B)V"))) return false;
  if (!(t.word_similarity = global_class(env, "org/modelzip/WordSimilarity"))) return false;
  if (!(t.word_similarity_init = env->GetMethodID(t.word_similarity, "<init>", "([BF)V")))
    return false;
  g_types = t;
  return true;
}

const JavaTypes& java_types() noexcept {
  return g_types;
}

bool register_natives(JNIEnv* env, jclass cls, std::span<const JNINativeMethod> methods) {
  return env->RegisterNatives(cls, methods.data(), static_cast<jint>(methods.size())) == JNI_OK;
}

std::string to_string(JNIEnv* env, jbyteArray utf8) {
  if (utf8 == nullptr) return {};
  const jsize n = env->GetArrayLength(utf8);
  std::string out(static_cast<std::size_t>(n), '\0');
  env->GetByteArrayRegion(utf8, 0, n, reinterpret_cast<jbyte*>(out.data()));
  check(env);
  return out;
}

jbyteArray to_java_bytes(JNIEnv* env, std::string_view text) {
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<jsize>::max()))
    throw Error(ErrorCode::limit_exceeded, "text too long for a Java array");
  const auto n = static_cast<jsize>(text.size());
  jbyteArray out = env->NewByteArray(n);
  check(env);
  env->SetByteArrayRegion(out, 0, n, reinterpret_cast<const jbyte*>(text.data()));
  check(env);
  return out;
}

jobjectArray to_java_byte_arrays(JNIEnv* env, std::span<const std::string> texts) {
  if (texts.size() > static_cast<std::size_t>(std::numeric_limits<jsize>::max()))
    throw Error(ErrorCode::limit_exceeded, "too many strings for a Java array");
  jobjectArray out =
      env->NewObjectArray(static_cast<jsize>(texts.size()), g_types.byte_array, nullptr);
  check(env);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    jbyteArray item = to_java_bytes(env, texts[i]);
    env->SetObjectArrayElement(out, static_cast<jsize>(i), item);
    env->DeleteLocalRef(item);
  }
  return out;
}

std::vector<std::string> to_strings(JNIEnv* env, jobjectArray utf8_arrays) {
  std::vector<std::string> out;
  if (utf8_arrays == nullptr) return out;
  const jsize n = env->GetArrayLength(utf8_arrays);
  out.reserve(static_cast<std::size_t>(n));
  for (jsize i = 0; i < n; ++i) {
    auto item = static_cast<jbyteArray>(env->GetObjectArrayElement(utf8_arrays, i));
    check(env);
    out.push_back(to_string(env, item));
    env->DeleteLocalRef(item);
  }
  return out;
}

jlongArray to_java_longs(JNIEnv* env, std::span<const std::int64_t> values) {
  if (values.size() > static_cast<std::size_t>(std::numeric_limits<jsize>::max()))
    throw Error(ErrorCode::limit_exceeded, "too many values for a Java array");
  const auto n = static_cast<jsize>(values.size());
  jlongArray out = env->NewLongArray(n);
  check(env);
  std::vector<jlong> copy(values.begin(), values.end());
  env->SetLongArrayRegion(out, 0, n, copy.data());
  check(env);
  return out;
}

std::vector<std::int64_t> to_longs(JNIEnv* env, jlongArray values) {
  if (values == nullptr) return {};
  const jsize n = env->GetArrayLength(values);
  std::vector<jlong> copy(static_cast<std::size_t>(n));
  env->GetLongArrayRegion(values, 0, n, copy.data());
  check(env);
  return {copy.begin(), copy.end()};
}

jobject to_java_tensor(JNIEnv* env, Tensor tensor) {
  jbyteArray dtype = to_java_bytes(env, dtype_name(tensor.dtype()));
  jlongArray shape = to_java_longs(env, tensor.shape());
  jbyteArray layout = to_java_bytes(env, layout_name(tensor.layout()));
  const auto byte_size = static_cast<jlong>(tensor.values().size());
  const jlong handle = to_handle(std::move(tensor));
  jobject out = env->NewObject(java_types().tensor, java_types().tensor_init, handle, dtype, shape,
                               layout, byte_size);
  if (env->ExceptionCheck()) {
    free_handle<Tensor>(handle);
    throw JavaExceptionPending{};
  }
  env->DeleteLocalRef(dtype);
  env->DeleteLocalRef(shape);
  env->DeleteLocalRef(layout);
  return out;
}

void throw_java(JNIEnv* env, const char* class_name, const std::string& message) noexcept {
  // ThrowNew takes modified UTF-8: anything but printable ASCII becomes '?'.
  std::string ascii = message;
  for (char& c : ascii)
    if (c < 0x20 || c > 0x7e) c = '?';
  jclass cls = env->FindClass(class_name);
  if (cls != nullptr) env->ThrowNew(cls, ascii.c_str());
}

void throw_current_exception(JNIEnv* env) noexcept {
  if (env->ExceptionCheck()) return;  // the JVM's own exception goes first
  try {
    throw;
  } catch (const JavaExceptionPending&) {
  } catch (const Error& e) {
    try {
      throw_modelzip_exception(env, e);
    } catch (...) {
      if (!env->ExceptionCheck()) throw_java(env, "java/lang/IllegalStateException", e.what());
    }
  } catch (const std::bad_alloc&) {
    throw_java(env, "java/lang/OutOfMemoryError", "modelzip: native allocation failed");
  } catch (const std::exception& e) {
    throw_java(env, "java/lang/IllegalStateException", std::string("modelzip: ") + e.what());
  } catch (...) {
    throw_java(env, "java/lang/IllegalStateException", "modelzip: unknown native exception");
  }
}

}  // namespace modelzip::jni
