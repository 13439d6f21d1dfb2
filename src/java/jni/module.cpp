// The entry point of libmodelzip_jni: JNI_OnLoad, run when
// org.modelzip.Native loads the library, caches the Java types the glue
// creates and registers the natives (no other symbol is exported).
#include "natives.hpp"
#include "support.hpp"

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_10) != JNI_OK) return JNI_ERR;
  jclass native_class = env->FindClass("org/modelzip/Native");
  if (native_class == nullptr || !modelzip::jni::init_java_types(env) ||
      !modelzip::jni::register_archive_natives(env, native_class) ||
      !modelzip::jni::register_tensor_natives(env, native_class) ||
      !modelzip::jni::register_embeddings_natives(env, native_class))
    return JNI_ERR;
  return JNI_VERSION_10;
}
