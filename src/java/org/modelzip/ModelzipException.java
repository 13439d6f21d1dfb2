package org.modelzip;

import java.util.NoSuchElementException;
import java.util.OptionalLong;

/**
 * Any failure of the modelzip library: bad input files, I/O errors, invalid
 * requests. It mirrors the C++ {@code modelzip::Error}: {@link #getMessage()}
 * is the full message with its context, e.g.
 * {@code "model.zip: entry 'v2/params.txt': line 3: invalid escape '%G1'"};
 * the parts are available one by one.
 *
 * <p>Missing tags, parameters and words: the methods that look one up by
 * name ({@link Archive#tensor}, {@link Archive#params}, {@link Archive#load},
 * {@link Archive#updaterState},
 * {@link Archive#removeTag}, {@link Embeddings#vector}...) throw
 * {@link NoSuchElementException}, as Java lookups do, with the
 * ModelzipException of code {@link Code#NOT_FOUND} (and its context) as its
 * {@linkplain Throwable#getCause() cause}.
 *
 * <p>The methods of an {@link java.io.InputStream} ({@link
 * Archive#entryStream}) throw it as the cause of a {@link
 * ModelzipIOException}, the checked IOException those methods declare.
 *
 * <p>Immutable; safe to share between threads.
 */
public class ModelzipException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** What kind of failure (the C++ ErrorCode). */
  public enum Code {
    /** The operating system refused a read, write, sync, rename... */
    IO,
    /** Bytes that do not follow the format. */
    CORRUPT,
    /** A tag, parameter or entry that does not exist. */
    NOT_FOUND,
    /** The caller asked for something impossible. */
    INVALID_ARGUMENT,
    /** E.g. a tag that exists already (in any letter case). */
    ALREADY_EXISTS,
    /** A valid but unsupported feature (format version, data type...). */
    UNSUPPORTED,
    /** A work or size limit protecting against hostile input. */
    LIMIT_EXCEEDED,
    /** A progress callback asked to stop. */
    CANCELLED,
  }

  private final Code code;
  private final String bareMessage;
  private final String archive;
  private final String entry;
  private final String tag;
  private final long line;
  private final long offset;
  private final int systemError;

  /**
   * Built by the native glue. Texts are UTF-8; an empty context text means
   * unknown (kept as null); line and offset are -1 when unknown.
   */
  ModelzipException(byte[] fullMessage, byte[] code, byte[] bareMessage, byte[] archive,
      byte[] entry, byte[] tag, long line, long offset, int systemError) {
    super(Native.string(fullMessage));
    this.code = Code.valueOf(Native.string(code).toUpperCase(java.util.Locale.ROOT));
    this.bareMessage = Native.string(bareMessage);
    this.archive = nullIfEmpty(Native.string(archive));
    this.entry = nullIfEmpty(Native.string(entry));
    this.tag = nullIfEmpty(Native.string(tag));
    this.line = line;
    this.offset = offset;
    this.systemError = systemError;
  }

  private static String nullIfEmpty(String text) {
    return text == null || text.isEmpty() ? null : text;
  }

  /** What kind of failure. */
  public Code code() {
    return code;
  }

  /** The message without its context. */
  public String bareMessage() {
    return bareMessage;
  }

  /** The path, URL or name of the archive (or standalone file); null if unknown. */
  public String archive() {
    return archive;
  }

  /** The entry inside the archive; null if unknown or not about one entry. */
  public String entry() {
    return entry;
  }

  /** The checkpoint tag; null if unknown or not about one tag. */
  public String tag() {
    return tag;
  }

  /** The 1-based line in a text entry, if known. */
  public OptionalLong line() {
    return line < 0 ? OptionalLong.empty() : OptionalLong.of(line);
  }

  /** The byte offset inside the entry or file, if known. */
  public OptionalLong offset() {
    return offset < 0 ? OptionalLong.empty() : OptionalLong.of(offset);
  }

  /** The errno of a failed system call (code IO), else 0. */
  public int systemError() {
    return systemError;
  }

  /** Runs a lookup, turning NOT_FOUND into NoSuchElementException (cause: the error). */
  static <R> R lookup(java.util.function.Supplier<R> lookup) {
    try {
      return lookup.get();
    } catch (ModelzipException e) {
      if (e.code == Code.NOT_FOUND) {
        throw new NoSuchElementException(e.getMessage(), e);
      }
      throw e;
    }
  }
}
