package org.modelzip;

import java.util.List;
import java.util.NoSuchElementException;
import java.util.Objects;

/**
 * finalfusion word embeddings: a standalone .fifu file, an embedding
 * parameter of an archive, or made from a matrix ({@link #fromMatrix}); any
 * of them saved as an embedding parameter ({@link SaveOptions#embedding})
 * or a .fifu file ({@link #save}). Lookups of known words give their row; unknown
 * words of a subword vocabulary give the normalised sum of their n-gram rows.
 *
 * <p>Lifetimes: the matrix is a zero-copy view of the mapped file (or of the
 * archive's mapping, which it keeps alive after the Archive is closed) until
 * {@link #close()} or garbage collection.
 *
 * <p>Thread safety: immutable; all methods may be called from several threads
 * at once ({@link #close()} waits for calls in progress; later calls throw
 * {@link IllegalStateException}).
 */
public final class Embeddings implements AutoCloseable {
  private final NativeHandle handle;
  /** The file, or the archive, the embeddings come from (errors name it). */
  private final String source;
  /** The parameter of that archive; null for a standalone file. */
  private final String param;

  private Embeddings(long pointer, String source, String param) {
    this.source = source;
    this.param = param;
    this.handle = new NativeHandle(pointer, Native::embeddingsFree,
        "embeddings '" + source + (param != null ? ":" + param : "") + "'");
  }

  /**
   * Maps and reads a finalfusion file.
   *
   * @throws ModelzipException IO, CORRUPT (with the byte offset) or UNSUPPORTED
   */
  public static Embeddings open(String path) {
    Objects.requireNonNull(path, "path");
    return new Embeddings(Native.embeddingsOpen(Native.utf8(path)), path, null);
  }

  /**
   * The embedding parameter {@code name} of {@code tag} ({@code null}: the
   * newest) of an archive.
   *
   * @throws NoSuchElementException if the tag or parameter does not exist
   * @throws ModelzipException INVALID_ARGUMENT if the parameter is a tensor
   */
  public static Embeddings open(Archive archive, String name, String tag) {
    Objects.requireNonNull(archive, "archive");
    Objects.requireNonNull(name, "name");
    long pointer = ModelzipException.lookup(() -> archive.handle().call(
        p -> Native.embeddingsFromArchive(p, Native.utf8(name), Native.utf8(tag))));
    return new Embeddings(pointer, archive.name(), name);
  }

  /**
   * Embeddings of {@code words} (a simple vocabulary: no subwords), row i of
   * the row-major {@code matrix} ({@code words.size()} x {@code dims}
   * floats, copied) the vector of word i (Python's {@code
   * Embeddings.from_matrix}, C++ {@code Embeddings::from_matrix}); in
   * memory, to be saved as an embedding parameter ({@link
   * SaveOptions#embedding}) or a .fifu file ({@link #save}). The vectors
   * are stored as given (no normalising, no norms).
   *
   * @throws IllegalArgumentException (its cause the library's INVALID_ARGUMENT)
   *     if the matrix does not hold {@code words.size()} rows of {@code dims},
   *     or a word is repeated; also for a negative {@code dims}
   * @throws NullPointerException for a null list, matrix or word
   */
  public static Embeddings fromMatrix(List<String> words, float[] matrix, int dims) {
    return fromMatrix(words, matrix, dims, null);
  }

  /**
   * As {@link #fromMatrix(List, float[], int)}, with the original norms of
   * the vectors, one per word (finalfusion's norms chunk: the matrix then
   * holds the vectors divided by their norms, as finalfusion stores them);
   * {@code null}: none.
   *
   * @throws IllegalArgumentException also if there is not one norm per word
   */
  public static Embeddings fromMatrix(List<String> words, float[] matrix, int dims, float[] norms) {
    Objects.requireNonNull(words, "words");
    Objects.requireNonNull(matrix, "matrix");
    if (dims < 0) {
      throw new IllegalArgumentException("dims must not be negative: " + dims);
    }
    byte[][] utf8 = Native.utf8(words.toArray(new String[0]));
    long pointer;
    try {
      pointer = Native.embeddingsFromMatrix(utf8, matrix, dims, norms);
    } catch (ModelzipException e) {
      if (e.code() == ModelzipException.Code.INVALID_ARGUMENT) {
        throw new IllegalArgumentException(e.getMessage(), e);
      }
      throw e;
    }
    return new Embeddings(pointer, "matrix of " + words.size() + " words x " + dims, null);
  }

  /**
   * Writes these embeddings to {@code path} as a finalfusion file, which
   * {@link #open(String)}, Python and the {@code modelzip} command read
   * (C++ {@code finalfusion::store}): to a temporary file beside it, fsynced
   * and renamed over it, so {@code path} holds the old file or the new one.
   * Embeddings read from a file or an archive's parameter write that file's
   * bytes as they are (not decoded and encoded again, which could list a
   * norms chunk the file's header leaves out); those made from a matrix are
   * encoded.
   *
   * @throws ModelzipException IO when the file cannot be written
   */
  public void save(String path) {
    Objects.requireNonNull(path, "path");
    handle.call(p -> {
      Native.embeddingsSave(p, Native.utf8(path));
      return null;
    });
  }

  NativeHandle handle() { return handle; }

  /** Components per vector. */
  public int dims() {
    return handle.call(Native::embeddingsDims);
  }

  /**
   * Rows of the storage matrix: the known words' rows, then those of their
   * subwords (n-gram buckets...) for a subword vocabulary (C++ and Python
   * {@code rows}). A {@code long}: a bucket vocabulary may have 2^31 rows or more.
   */
  public long rows() { return handle.call(Native::embeddingsRows); }

  /** The known words, in vocabulary order. */
  public List<String> words() {
    return List.of(Native.strings(handle.call(Native::embeddingsWords)));
  }

  /** Whether {@code word} has an embedding (known, or made of known subwords). */
  public boolean contains(String word) {
    Objects.requireNonNull(word, "word");
    return handle.call(p -> Native.embeddingsVector(p, Native.utf8(word))) != null;
  }

  /**
   * The embedding of {@code word}.
   *
   * @throws NoSuchElementException if the word has none
   */
  public float[] vector(String word) {
    Objects.requireNonNull(word, "word");
    float[] vector = handle.call(p -> Native.embeddingsVector(p, Native.utf8(word)));
    if (vector == null) {
      throw noEmbedding(word);
    }
    return vector;
  }

  /**
   * The {@code k} words most similar (cosine) to {@code word}, best first,
   * the word itself excluded.
   *
   * @throws NoSuchElementException if the word has no embedding
   */
  public List<WordSimilarity> similar(String word, int k) {
    Objects.requireNonNull(word, "word");
    if (k < 0) {
      throw new IllegalArgumentException("k < 0");
    }
    WordSimilarity[] found = handle.call(p -> Native.embeddingsSimilar(p, Native.utf8(word), k));
    if (found == null) {
      throw noEmbedding(word);
    }
    return List.of(found);
  }

  /**
   * A word without embedding, as the other lookups report a missing name:
   * NoSuchElementException caused by the library's NOT_FOUND error naming
   * the file (or archive and parameter) and the word.
   */
  private NoSuchElementException noEmbedding(String word) {
    try {
      // The library words the error, escaping what is not printable.
      Native.embeddingsNotFound(Native.utf8(source), param != null ? Native.utf8(param) : null,
          Native.utf8(word));
    } catch (ModelzipException cause) {
      return (NoSuchElementException) new NoSuchElementException(cause.getMessage())
          .initCause(cause);
    }
    throw new AssertionError("embeddingsNotFound returned");
  }

  /** Releases the embeddings now; idempotent. */
  @Override
  public void close() {
    handle.close();
  }

  /** "Embeddings(FILE)", or "Embeddings(ARCHIVE:PARAMETER)" for an archive's parameter. */
  @Override
  public String toString() {
    return "Embeddings(" + source + (param != null ? ":" + param : "") + ")";
  }
}
