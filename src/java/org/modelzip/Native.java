package org.modelzip;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The native methods of libmodelzip_jni and the loading of that library.
 *
 * <p>Strings cross the boundary as UTF-8 {@code byte[]} (encoded and decoded
 * here, in Java, so names with any Unicode character arrive exactly), lists
 * of strings as {@code byte[][]}. A {@code long} handle is a native object
 * that Java owns: it is made by one of the methods below and freed exactly
 * once by the matching {@code ...Free} method ({@link NativeHandle} makes sure
 * of both). Every method throws {@link ModelzipException} for the library's
 * errors.
 *
 * <p>The library is loaded when this class is initialised: from the file
 * named by the system property {@code org.modelzip.library} when it is set,
 * else as {@code modelzip_jni} from {@code java.library.path}.
 */
final class Native {
  private Native() {}

  static {
    String explicit = System.getProperty("org.modelzip.library");
    try {
      if (explicit != null && !explicit.isEmpty()) {
        System.load(explicit);
      } else {
        System.loadLibrary("modelzip_jni");
      }
    } catch (UnsatisfiedLinkError e) {
      String where = explicit != null && !explicit.isEmpty()
          ? "the file " + explicit + " (system property org.modelzip.library)"
          : System.mapLibraryName("modelzip_jni") + " in java.library.path="
              + System.getProperty("java.library.path");
      UnsatisfiedLinkError error = new UnsatisfiedLinkError(
          "modelzip: cannot load its JNI library: looked for " + where
              + " (run java with -Djava.library.path=<folder of libmodelzip_jni.so>): "
              + e.getMessage());
      error.initCause(e);
      throw error;
    }
  }

  /**
   * The UTF-8 bytes of {@code text} (null stays null).
   *
   * @throws IllegalArgumentException if it holds an unpaired surrogate, which
   *     UTF-8 cannot encode ({@code getBytes} would silently turn it into '?',
   *     and a name, tag or path would name something else)
   */
  static byte[] utf8(String text) {
    if (text == null) {
      return null;
    }
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < text.length()
          && Character.isLowSurrogate(text.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        throw new IllegalArgumentException(String.format(
            "\"%s\" is not valid Unicode: unpaired surrogate U+%04X at index %d (UTF-8 cannot encode it)",
            text.replace(c, '\uFFFD'), (int) c, i));
      }
    }
    return text.getBytes(StandardCharsets.UTF_8);
  }

  static String string(byte[] utf8) {
    return utf8 == null ? null : new String(utf8, StandardCharsets.UTF_8);
  }

  static byte[][] utf8(String[] texts) {
    byte[][] out = new byte[texts.length][];
    for (int i = 0; i < texts.length; i++) {
      out[i] = utf8(java.util.Objects.requireNonNull(texts[i], "string " + i + " is null"));
    }
    return out;
  }

  static String[] strings(byte[][] utf8) {
    String[] out = new String[utf8.length];
    for (int i = 0; i < utf8.length; i++) {
      out[i] = string(utf8[i]);
    }
    return out;
  }

  // --- Archive (jni/archive_natives.cpp). A null tag means the newest.
  static native long archiveOpen(byte[] pathOrUrl);
  static native void archiveFree(long archive);
  static native byte[][] archiveTags(long archive);
  static native Param[] archiveParams(long archive, byte[] tag);
  static native Tensor archiveTensor(long archive, byte[] name, byte[] tag);
  /** Returns {byte[][] names, Tensor[] tensors}, in params.txt order. */
  static native Object[] archiveLoad(long archive, byte[] tag);
  static native byte[][] archiveVerify(long archive);
  /**
   * {@code replace}: the tag replaces one of its name in the same commit
   * (Writer::replace_tag); {@code keepLast} > 0: Writer::keep_last in the same
   * commit, 0: every tag kept; {@code compress}: every tensor deflated;
   * {@code durable}, {@code dedup}: WriterOptions; {@code replaceHint}: what
   * the error of an existing tag names as the way to replace it.
   */
  static native void archiveSave(byte[] path, byte[] tag, byte[][] names, long[] tensors,
      boolean replace, int keepLast, boolean durable, boolean compress, boolean dedup,
      byte[] replaceHint);
  /**
   * {format_version (decimal), model_name, model_version, quantization,
   * description, writer}; an unset optional field is null.
   */
  static native byte[][] archiveMetadata(long archive);
  static native void archiveRemoveTag(byte[] path, byte[] tag);

  // --- Tensor (jni/tensor_natives.cpp)
  /** {@code array} is a primitive array whose elements are elementBytes wide. */
  static native Tensor tensorFromArray(byte[] dtype, Object array, int elementBytes, long[] shape);
  static native Tensor tensorFromStrings(byte[][] utf8, long[] shape);
  static native void tensorFree(long tensor);
  static native boolean tensorIsMapped(long tensor);
  /** Copies the values into {@code array}, a primitive array of exactly their byte size. */
  static native void tensorCopyValues(long tensor, Object array, int elementBytes);
  /**
   * Decodes the values of a dense floating-point tensor into {@code array}, a
   * float[] (elementBytes 4) or double[] (8) of exactly their count (complex
   * parts counted twice), widening each exactly.
   */
  static native void tensorDecodeValues(long tensor, Object array, int elementBytes);
  static native byte[][] tensorStrings(long tensor);
  static native Tensor tensorDequantize(long tensor);
  /** A new reference to the tensor's value bytes (freed by bytesFree). */
  static native long tensorRetainValues(long tensor);
  static native void bytesFree(long bytes);
  /** A direct buffer over [offset, offset + length) of the bytes; they must outlive it. */
  static native ByteBuffer bytesBuffer(long bytes, long offset, int length);

  // --- Embeddings (jni/embeddings_natives.cpp)
  static native long embeddingsOpen(byte[] path);
  static native long embeddingsFromArchive(long archive, byte[] name, byte[] tag);
  static native void embeddingsFree(long embeddings);
  static native int embeddingsDims(long embeddings);
  static native byte[][] embeddingsWords(long embeddings);
  /** null when the word has no embedding. */
  static native float[] embeddingsVector(long embeddings, byte[] word);
  /** null when the word has no embedding. */
  static native WordSimilarity[] embeddingsSimilar(long embeddings, byte[] word, int k);
}
