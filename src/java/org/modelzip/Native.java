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

  /** {@link Utf8#encode}: the UTF-8 bytes of {@code text}, null stays null. */
  static byte[] utf8(String text) {
    return Utf8.encode(text);
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
  static native boolean archiveChangedSinceOpen(long archive);
  /** A new native archive: Archive::reopen. */
  static native long archiveReopen(long archive);
  static native Param[] archiveParams(long archive, byte[] tag);
  static native Tensor archiveTensor(long archive, byte[] name, byte[] tag, boolean copy);
  static native Param[] archiveUpdaterStates(long archive, byte[] tag);
  static native Tensor archiveUpdaterState(long archive, byte[] variable, byte[] state,
      byte[] tag, boolean copy);
  /** Returns {byte[][] names, Tensor[] tensors}, in params.txt order. */
  static native Object[] archiveLoad(long archive, byte[] tag, boolean copy);
  static native Param archiveParam(long archive, byte[] name, byte[] tag);
  static native byte[][] archiveEntryNames(long archive);
  static native boolean archiveHasEntry(long archive, byte[] name);
  /** The whole entry, CRC-checked. */
  static native byte[] archiveEntry(long archive, byte[] name);
  /** The entry's size as the central directory declares it (Archive::entry_size). */
  static native long archiveEntrySize(long archive, byte[] name);
  /** Bytes [offset, offset + length) of the entry, within its size (checked by the caller). */
  static native byte[] archiveEntryPart(long archive, byte[] name, long offset, int length);
  /** A new EntryStream (EntryStream::open), for EntryInputStream. */
  static native long archiveEntryStream(long archive, byte[] name);
  static native void entryStreamFree(long stream);
  /** Reads into b[off, off + len) (checked by the caller): len bytes, fewer at the end, 0 after. */
  static native int entryStreamRead(long stream, byte[] b, int off, int len);
  /**
   * Returns {byte[][] entries, byte[][] messages, long[] counts}, one
   * element each per problem, in verify's order; counts[i]: how many
   * problems problem i stands for (C++ problems_found of it alone).
   */
  static native Object[] archiveVerify(long archive);
  /** The parts of a TrainingConfig ({@link TrainingConfig#fromNative}); null when the tag has none. */
  static native Object[] archiveTrainingConfig(long archive, byte[] tag);
  /**
   * The parts of a TrainingConfig as the library holds the one {@code parts}
   * describes (every field, defaults filled in, schema order); throws
   * ModelzipException INVALID_ARGUMENT naming the first rule it breaks.
   */
  static native Object[] trainingConfigNormalize(Object[] parts);
  /**
   * {@code replace}: the tag replaces one of its name in the same commit
   * (Writer::replace_tag); {@code keepLast} > 0: Writer::keep_last in the same
   * commit, 0: every tag kept; {@code compress}: every tensor deflated;
   * {@code durable}, {@code dedup}: WriterOptions; {@code embeddingNames}[i]
   * is an embedding parameter of the native Embeddings {@code embeddings}[i]
   * (NewTag::add_embedding of its finalfusion file); {@code metadataChanged},
   * {@code metadataValues}: the metadata fields changed in the same commit,
   * as {@link #archiveUpdateMetadata} takes them; {@code shareNames}[i] is
   * parameter {@code shareParams}[i] of tag {@code shareTags}[i]
   * (NewTag::share); the updater state {@code stateShareStates}[i] of
   * {@code stateShareVariables}[i] is that of tag {@code stateShareTags}[i]
   * (NewTag::share_updater_state); {@code trainingConfig}: the parts of the
   * tag's trainingConfig.fb ({@link TrainingConfig#toNative}), or null;
   * {@code replaceHint}: what
   * the error of an existing tag names as the way to replace it.
   */
  static native void archiveSave(byte[] path, byte[] tag, byte[][] names, long[] tensors,
      byte[][] updaterVariables, byte[][] updaterStates, long[] updaterTensors, byte[][] shareNames,
      byte[][] shareTags, byte[][] shareParams, byte[][] stateShareVariables,
      byte[][] stateShareStates, byte[][] stateShareTags, byte[][] embeddingNames,
      long[] embeddings, Object[] trainingConfig, boolean replace, int keepLast, boolean durable,
      boolean compress, boolean dedup, int metadataChanged, byte[][] metadataValues,
      byte[] replaceHint);
  /**
   * {format_version (decimal), model_name, model_version, quantization,
   * description, writer}; an unset optional field is null.
   */
  static native byte[][] archiveMetadata(long archive);
  /**
   * Commits a change of the metadata of the existing archive at {@code path}
   * (Writer::update_metadata): bit i of {@code changed} (i: the ordinal of a
   * Metadata.Field) changes that field to {@code values[i]}, null clearing
   * it. Returns the metadata read after the commit, as archiveMetadata.
   */
  static native byte[][] archiveUpdateMetadata(byte[] path, int changed, byte[][] values);
  static native void archiveRemoveTag(byte[] path, byte[] tag);

  // --- Tensor (jni/tensor_natives.cpp)
  /** {@code array} is a primitive array whose elements are elementBytes wide. */
  static native Tensor tensorFromArray(byte[] dtype, Object array, int elementBytes, long[] shape);
  static native Tensor tensorFromStrings(byte[][] utf8, long[] shape);
  /**
   * A dense tensor of the bytes of {@code parts} one after the other: the
   * {@code lengths[i]} bytes of {@code parts[i]} (a direct ByteBuffer or a
   * byte[]) from byte {@code offsets[i]}.
   */
  static native Tensor tensorFromBuffers(
      byte[] dtype, Object[] parts, long[] offsets, int[] lengths, long[] shape);
  static native void tensorFree(long tensor);
  static native boolean tensorIsMapped(long tensor);
  /** Copies the values into {@code array}, a primitive array of exactly their byte size. */
  static native void tensorCopyValues(long tensor, Object array, int elementBytes);
  /**
   * Decodes the values {@code first}... of a dense floating-point tensor into
   * {@code array}, a float[] (elementBytes 4) or double[] (8) of at most the
   * values from {@code first} (complex parts and FP4 values count one each),
   * widening each exactly.
   */
  static native void tensorDecodeValues(long tensor, Object array, int elementBytes,
      long first);
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
  /**
   * Embeddings::from_matrix of a simple vocabulary of {@code words}, the
   * row-major {@code matrix} of {@code dims} columns and {@code norms}
   * (null: none); INVALID_ARGUMENT for sizes that do not match.
   */
  static native long embeddingsFromMatrix(byte[][] words, float[] matrix, int dims, float[] norms);
  /** Embeddings::save (durable). */
  static native void embeddingsSave(long embeddings, byte[] path);
  static native int embeddingsDims(long embeddings);
  static native long embeddingsRows(long embeddings);
  static native byte[][] embeddingsWords(long embeddings);
  /** null when the word has no embedding. */
  static native float[] embeddingsVector(long embeddings, byte[] word);
  /** null when the word has no embedding. */
  static native WordSimilarity[] embeddingsSimilar(long embeddings, byte[] word, int k);
  /** Throws the library's NOT_FOUND error for {@code word} ({@code param} null: a file). */
  static native void embeddingsNotFound(byte[] source, byte[] param, byte[] word);
}
