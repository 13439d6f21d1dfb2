package org.modelzip;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.LongConsumer;
import java.util.function.LongFunction;

/**
 * Owns one native object (a {@code long} made by {@link Native}) and frees it
 * exactly once: at {@link #close()}, or when this handle becomes unreachable
 * (through a {@link Cleaner}), whichever comes first.
 *
 * <p>Use after close is safe: {@link #use()} throws
 * {@link IllegalStateException} once the handle is closed. Thread safety:
 * any number of threads may use the handle at once (a shared lock is held for
 * the duration of each native call); {@link #close()} waits for the calls in
 * progress and is idempotent.
 */
final class NativeHandle implements AutoCloseable {
  /** The one cleaner thread of the binding (for handles and direct buffers). */
  static final Cleaner CLEANER = Cleaner.create();

  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private final Cleaner.Cleanable cleanable;
  /** Names the object in errors; set once more by {@link #describe}. */
  private volatile String what;
  private long pointer;

  /**
   * Takes ownership of {@code pointer}; {@code free} releases it (it must
   * not refer to the object owning this handle, or that would never be
   * collected). {@code what} names the object in errors ("archive 'm.zip'").
   */
  NativeHandle(long pointer, LongConsumer free, String what) {
    this.pointer = pointer;
    this.what = what;
    this.cleanable = CLEANER.register(this, () -> free.accept(pointer));
  }

  /** Names the object in errors from now on ("tensor 'w' of archive 'm.zip'"). */
  void describe(String what) {
    this.what = what;
  }

  /** A use of the native object; it stays valid until the Use is closed. */
  final class Use implements AutoCloseable {
    private final long usedPointer;

    private Use(long usedPointer) {
      this.usedPointer = usedPointer;
    }

    long pointer() {
      return usedPointer;
    }

    @Override
    public void close() {
      lock.readLock().unlock();
      // Keeps the handle (and so the native object) reachable until here.
      Reference.reachabilityFence(NativeHandle.this);
    }
  }

  /** Starts a use; throws IllegalStateException when the handle is closed. */
  Use use() {
    lock.readLock().lock();
    if (pointer == 0) {
      lock.readLock().unlock();
      throw new IllegalStateException(what + " is closed");
    }
    return new Use(pointer);
  }

  /** A native call on the object: {@code call.apply(pointer)} under a use. */
  <R> R call(LongFunction<R> call) {
    try (Use use = use()) {
      return call.apply(use.pointer());
    }
  }

  /** Frees the native object now (after the calls in progress); idempotent. */
  @Override
  public void close() {
    lock.writeLock().lock();
    try {
      if (pointer != 0) {
        pointer = 0;
        cleanable.clean();
      }
    } finally {
      lock.writeLock().unlock();
    }
  }
}
