package org.modelzip.tests;

import java.nio.file.Files;
import java.nio.file.Paths;
import org.modelzip.Archive;

/**
 * Reads entry {@code args[1]} of archive {@code args[0]} whole with
 * {@code Archive.entry} and prints how far the process's peak resident
 * memory rose meanwhile, in bytes: run by ArchiveAccessTest in a JVM of its
 * own whose heap is touched in advance (-Xms = -Xmx, -XX:+AlwaysPreTouch),
 * so that the Java array costs no new pages and the rise is the native
 * memory the read used. Prints "unsupported" where the peak cannot be reset
 * (/proc/self/clear_refs).
 */
public final class EntryMemoryProbe {
  public static void main(String[] args) throws Exception {
    try (Archive archive = Archive.open(args[0])) {
      archive.entry(args[1], 0, 1); // the glue's first-use costs, before the peak is reset
      try {
        Files.writeString(Paths.get("/proc/self/clear_refs"), "5"); // peak RSS := current RSS
      } catch (java.io.IOException e) {
        System.out.println("unsupported");
        return;
      }
      long before = peakBytes();
      byte[] whole = archive.entry(args[1]);
      long after = peakBytes();
      if (whole.length != archive.entrySize(args[1])) {
        throw new AssertionError("read " + whole.length + " bytes");
      }
      System.out.println(after - before);
    }
  }

  /** VmHWM of /proc/self/status, in bytes. */
  private static long peakBytes() throws java.io.IOException {
    for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
      if (line.startsWith("VmHWM:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
      }
    }
    throw new AssertionError("no VmHWM in /proc/self/status");
  }
}
