package org.modelzip;

import java.io.IOException;
import java.io.InputStream;
import java.util.Objects;

/**
 * One zip entry of an archive read front to back ({@link Archive#entryStream}):
 * each read continues where the last one ended, so a deflated entry is
 * decompressed once however many reads it takes (C++ {@code EntryStream}).
 * The read that returns the entry's last bytes checks its size and CRC-32;
 * damaged data throws {@link ModelzipIOException} (an {@link IOException}, as
 * the InputStream contract has it; its cause the library's
 * {@link ModelzipException}: CORRUPT, naming the archive and the entry; IO
 * when another writer changed the file since the archive was opened), and
 * every later read throws it again.
 *
 * <p>Lifetimes: it keeps the archive's mapping alive, also after the
 * {@link Archive} is closed, until {@link #close()} or garbage collection.
 * Thread safety: the methods are synchronized (one read at a time, as for
 * any InputStream). A read after {@link #close()} throws {@link IOException}.
 */
final class EntryInputStream extends InputStream {
  private final NativeHandle handle;
  private final String what;
  private boolean closed;
  // read()'s one byte, reused: the methods are synchronized, so one read uses it at a time.
  private final byte[] one = new byte[1];

  EntryInputStream(long pointer, String what) {
    this.what = what;
    this.handle = new NativeHandle(pointer, Native::entryStreamFree, what);
  }

  @Override
  public synchronized int read() throws IOException {
    return read(one, 0, 1) == 1 ? one[0] & 0xff : -1;
  }

  @Override
  public synchronized int read(byte[] b, int off, int len) throws IOException {
    Objects.checkFromIndexSize(off, len, b.length);
    ensureOpen();
    if (len == 0) {
      return 0;
    }
    int n;
    try {
      n = handle.call(p -> Native.entryStreamRead(p, b, off, len));
    } catch (ModelzipException e) {
      throw new ModelzipIOException(e);
    }
    return n == 0 ? -1 : n;
  }

  /** Skips by reading (a deflated entry has to be decompressed through). */
  @Override
  public synchronized long skip(long n) throws IOException {
    ensureOpen();
    byte[] scratch = new byte[(int) Math.min(Math.max(n, 0), 1 << 16)];
    long skipped = 0;
    while (skipped < n) {
      int got = read(scratch, 0, (int) Math.min(n - skipped, scratch.length));
      if (got < 0) {
        break;
      }
      skipped += got;
    }
    return skipped;
  }

  /** Releases the native stream now; idempotent. */
  @Override
  public synchronized void close() {
    closed = true;
    handle.close();
  }

  private void ensureOpen() throws IOException {
    if (closed) {
      throw new IOException(what + " is closed");
    }
  }

  @Override
  public String toString() {
    return what;
  }
}
