// What a Java Embeddings owns (its NativeHandle's jlong): shared by the
// embeddings natives and the save in archive_natives.cpp.
#pragma once

#include "modelzip/bytes.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::jni {

struct JavaEmbeddings {
  finalfusion::Embeddings embeddings;

  // What a save stores: the finalfusion file `embeddings` were read from, as
  // it is, or their encoding when they were made from a matrix
  // (Embeddings::to_bytes).
  Bytes file_bytes() const { return embeddings.to_bytes(); }
};

}  // namespace modelzip::jni
