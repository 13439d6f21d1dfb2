package org.modelzip;

import java.io.IOException;
import java.util.Objects;
import java.util.OptionalLong;

/**
 * A failure of the library inside an {@link java.io.InputStream} method
 * (the stream of {@link Archive#entryStream}): the checked {@link
 * IOException} the InputStream contract promises, so that code catching
 * {@code IOException} around a stream also catches damaged data. Its
 * {@linkplain #getCause() cause} is the library's {@link ModelzipException},
 * whose code and context the accessors here repeat; {@link #getMessage()}
 * is that error's full message.
 *
 * <p>Immutable; safe to share between threads.
 */
public final class ModelzipIOException extends IOException {
  private static final long serialVersionUID = 1L;

  ModelzipIOException(ModelzipException error) {
    super(Objects.requireNonNull(error, "error").getMessage(), error);
  }

  /** The library's error (the cause). */
  public ModelzipException error() { return (ModelzipException) getCause(); }

  /** What kind of failure: {@link ModelzipException#code()}. */
  public ModelzipException.Code code() { return error().code(); }

  /** The archive's path or URL: {@link ModelzipException#archive()}. */
  public String archive() { return error().archive(); }

  /** The entry: {@link ModelzipException#entry()}. */
  public String entry() { return error().entry(); }

  /** The byte offset inside the entry, if known: {@link ModelzipException#offset()}. */
  public OptionalLong offset() { return error().offset(); }
}
