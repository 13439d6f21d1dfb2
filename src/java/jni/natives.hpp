// Registration of the natives of org.modelzip.Native, one function per
// concept (archive, tensor, embeddings), called from JNI_OnLoad. Each returns
// false with a Java exception pending when the JVM refuses a method (a
// signature that does not match Native.java).
#pragma once

#include <jni.h>

namespace modelzip::jni {

bool register_archive_natives(JNIEnv* env, jclass native_class);
bool register_tensor_natives(JNIEnv* env, jclass native_class);
bool register_embeddings_natives(JNIEnv* env, jclass native_class);

}  // namespace modelzip::jni
