// What a Java Embeddings owns (its NativeHandle's jlong): shared by the
// embeddings natives and the save in archive_natives.cpp.
#pragma once

#include "modelzip/bytes.hpp"
#include "modelzip/finalfusion/embeddings.hpp"

namespace modelzip::jni {

struct JavaEmbeddings {
  finalfusion::Embeddings embeddings;
  // The complete finalfusion file `embeddings` were parsed from, as it is (a
  // view of the mapped file or of the archive's entry); empty for embeddings
  // made from a matrix. A save stores these bytes unchanged: a re-encoding
  // would cost a decode and a copy, and need not give the same bytes (the
  // library's writer lists a norms chunk some files' headers leave out).
  Bytes file{};

  // The file's bytes, or the embeddings encoded when they have no file.
  Bytes file_bytes() const { return file.size() != 0 ? file : embeddings.to_bytes(); }
};

}  // namespace modelzip::jni
