// The natives of org.modelzip.Embeddings (declared in Native.java). A jlong
// embeddings is a heap JavaEmbeddings owned by a Java NativeHandle; it keeps
// its file (or the archive's mapping) alive.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "embeddings_handle.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/finalfusion/convert.hpp"
#include "modelzip/finalfusion/embeddings.hpp"
#include "natives.hpp"
#include "support.hpp"

namespace modelzip::jni {
namespace {

using finalfusion::Embeddings;

const Embeddings& embeddings_of(jlong handle) {
  return from_handle<JavaEmbeddings>(handle).embeddings;
}

jfloatArray to_java_floats(JNIEnv* env, std::span<const float> values) {
  if (values.size() > static_cast<std::size_t>(std::numeric_limits<jsize>::max()))
    throw Error(ErrorCode::limit_exceeded, "too many values for a Java array");
  jfloatArray out = env->NewFloatArray(static_cast<jsize>(values.size()));
  check(env);
  env->SetFloatArrayRegion(out, 0, static_cast<jsize>(values.size()), values.data());
  check(env);
  return out;
}

// The regular file at `path` mapped read-only, whole; nullopt when it cannot
// be (missing, empty, not a regular file...: Embeddings::open says why).
std::optional<Bytes> map_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  void* at = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    at = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (at == MAP_FAILED) return std::nullopt;
  const auto size = static_cast<std::size_t>(st.st_size);
  std::shared_ptr<const void> mapping(
      at, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  return Bytes::borrow({static_cast<const std::byte*>(at), size}, std::move(mapping));
}

// The file's own mapping is parsed (Embeddings::read, which keeps it as the
// bytes a save stores); where that fails, or for a URL, Embeddings::open reads the
// file, so that its errors (I/O, naming the file as the archive) are those
// of every front end.
jlong embeddings_open(JNIEnv* env, jclass, jbyteArray path) {
  return guarded(env, [&] {
    const std::string file = to_string(env, path);
    if (!Archive::is_remote_url(file)) {
      if (std::optional<Bytes> bytes = map_regular_file(file)) {
        try {
          return to_handle(JavaEmbeddings{Embeddings::read(std::move(*bytes), file)});
        } catch (const Error&) {
          // Embeddings::open below throws the error as it words it.
        }
      }
    }
    return to_handle(JavaEmbeddings{Embeddings::open(file)});
  });
}

jlong embeddings_from_archive(JNIEnv* env, jclass, jlong archive, jbyteArray name, jbyteArray tag) {
  return guarded(env, [&] {
    const std::string param = to_string(env, name);
    const Archive& a = from_handle<Archive>(archive);
    return to_handle(
        JavaEmbeddings{Embeddings::read(a.embedding_file(param, to_string(env, tag)), param)});
  });
}

std::vector<float> to_floats(JNIEnv* env, jfloatArray values) {
  const jsize n = env->GetArrayLength(values);
  std::vector<float> out(static_cast<std::size_t>(n));
  env->GetFloatArrayRegion(values, 0, n, out.data());
  check(env);
  return out;
}

// Java checked that `words` and `matrix` are not null and `dims` not negative.
jlong embeddings_from_matrix(JNIEnv* env, jclass, jobjectArray words, jfloatArray matrix, jint dims,
                             jfloatArray norms) {
  return guarded(env, [&] {
    if (dims < 0) throw Error(ErrorCode::invalid_argument, "negative dims");
    std::optional<std::vector<float>> norm_values;
    if (norms != nullptr) norm_values = to_floats(env, norms);
    return to_handle(JavaEmbeddings{Embeddings::from_matrix(
        finalfusion::Vocab::simple(to_strings(env, words)), to_floats(env, matrix),
        static_cast<std::size_t>(dims), std::move(norm_values))});
  });
}

void embeddings_save(JNIEnv* env, jclass, jlong embeddings, jbyteArray path) {
  guarded(env, [&] {
    const std::string file = to_string(env, path);
    try {
      finalfusion::store(file, embeddings_of(embeddings),
                         finalfusion::EmbeddingFormat::finalfusion);
    } catch (const Error& e) {
      throw e.with_context({.archive = file});
    }
  });
}

void embeddings_free(JNIEnv*, jclass, jlong embeddings) {
  free_handle<JavaEmbeddings>(embeddings);
}

jint embeddings_dims(JNIEnv*, jclass, jlong embeddings) {
  return static_cast<jint>(embeddings_of(embeddings).dims());
}

jlong embeddings_rows(JNIEnv*, jclass, jlong embeddings) {
  return static_cast<jlong>(embeddings_of(embeddings).rows());
}

jobjectArray embeddings_words(JNIEnv* env, jclass, jlong embeddings) {
  return guarded(
      env, [&] { return to_java_byte_arrays(env, embeddings_of(embeddings).vocab().words()); });
}

jfloatArray embeddings_vector(JNIEnv* env, jclass, jlong embeddings, jbyteArray word) {
  return guarded(env, [&]() -> jfloatArray {
    const std::optional<std::vector<float>> v =
        embeddings_of(embeddings).embedding(to_string(env, word));
    return v ? to_java_floats(env, *v) : nullptr;
  });
}

jobjectArray embeddings_similar(JNIEnv* env, jclass, jlong embeddings, jbyteArray word, jint k) {
  return guarded(env, [&]() -> jobjectArray {
    const auto found = embeddings_of(embeddings)
                           .similar(to_string(env, word), static_cast<std::size_t>(k < 0 ? 0 : k));
    if (!found) return nullptr;
    jobjectArray out = env->NewObjectArray(static_cast<jsize>(found->size()),
                                           java_types().word_similarity, nullptr);
    check(env);
    for (std::size_t i = 0; i < found->size(); ++i) {
      jbyteArray text = to_java_bytes(env, (*found)[i].word);
      jobject item = env->NewObject(java_types().word_similarity, java_types().word_similarity_init,
                                    text, (*found)[i].similarity);
      check(env);
      env->SetObjectArrayElement(out, static_cast<jsize>(i), item);
      env->DeleteLocalRef(item);
      env->DeleteLocalRef(text);
    }
    return out;
  });
}

// Throws the library's NOT_FOUND error of a word without embedding (its
// message escaped as every error message is), naming the file or archive
// `source` and, for an archive's parameter, `param` (null for a file).
void embeddings_not_found(JNIEnv* env, jclass, jbyteArray source, jbyteArray param,
                          jbyteArray word) {
  guarded(env, [&] {
    const std::string where = param ? "parameter '" + to_string(env, param) + "': " : "";
    throw Error(ErrorCode::not_found, where + "no embedding for '" + to_string(env, word) + "'",
                {.archive = to_string(env, source)});
  });
}

const JNINativeMethod kMethods[] = {
    native_method("embeddingsOpen", "([B)J", embeddings_open),
    native_method("embeddingsFromArchive", "(J[B[B)J", embeddings_from_archive),
    native_method("embeddingsFree", "(J)V", embeddings_free),
    native_method("embeddingsFromMatrix", "([[B[FI[F)J", embeddings_from_matrix),
    native_method("embeddingsSave", "(J[B)V", embeddings_save),
    native_method("embeddingsDims", "(J)I", embeddings_dims),
    native_method("embeddingsRows", "(J)J", embeddings_rows),
    native_method("embeddingsWords", "(J)[[B", embeddings_words),
    native_method("embeddingsVector", "(J[B)[F", embeddings_vector),
    native_method("embeddingsNotFound", "([B[B[B)V", embeddings_not_found),
    native_method("embeddingsSimilar", "(J[BI)[Lorg/modelzip/WordSimilarity;", embeddings_similar),
};

}  // namespace

bool register_embeddings_natives(JNIEnv* env, jclass native_class) {
  return register_natives(env, native_class, kMethods);
}

}  // namespace modelzip::jni
