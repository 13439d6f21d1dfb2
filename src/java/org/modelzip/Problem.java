package org.modelzip;

import java.util.Collection;
import java.util.Objects;

/**
 * One problem found by {@link Archive#problems()}: the entry concerned and
 * what is wrong with it (C++ {@code modelzip::Problem}, Python's
 * {@code (entry, message)} pairs). An immutable value.
 */
public final class Problem {
  private final String entry;
  private final String message;
  private final long count;

  Problem(String entry, String message, long count) {
    this.entry = entry;
    this.message = message;
    this.count = count;
  }

  /**
   * The entry concerned, exactly as named in the archive (it may contain
   * ": " or any other text); empty for the archive as a whole.
   */
  public String entry() {
    return entry;
  }

  /** What is wrong, e.g. "CRC-32 mismatch" or "... and 5 more problems in this entry". */
  public String message() {
    return message;
  }

  /**
   * How many problems this one stands for: N for the "... and N more
   * problems in this entry" that ends an entry's list (verify lists at most
   * 20 per entry), 1 for every other problem (as C++
   * {@code modelzip::problems_found} counts them).
   */
  public long count() {
    return count;
  }

  /** How many problems {@code problems} stand for: the sum of their {@link #count()}s. */
  public static long found(Collection<Problem> problems) {
    long found = 0;
    for (Problem p : problems) {
      found += p.count;
    }
    return found;
  }

  /** Equal in entry, message and count. */
  @Override
  public boolean equals(Object other) {
    return other instanceof Problem o && entry.equals(o.entry) && message.equals(o.message)
        && count == o.count;
  }

  @Override
  public int hashCode() {
    return Objects.hash(entry, message, count);
  }

  /**
   * "entry: message", or the message alone for the archive as a whole (the
   * form of {@link Archive#verify()}).
   */
  @Override
  public String toString() {
    return entry.isEmpty() ? message : entry + ": " + message;
  }
}
