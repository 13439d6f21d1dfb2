package org.modelzip.tests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assume.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/**
 * What the tests share: the environment tests/java/meson.build sets, running
 * the other front ends (Python, the modelzip command) with time-outs, and
 * counting the mappings of a file in /proc/self/maps.
 */
final class TestSupport {
  private TestSupport() {}

  static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  static final String CLI = env("MODELZIP_CLI", "modelzip");
  static final Path TESTS_DIR = Paths.get(env("MODELZIP_TESTS_DIR", "tests"));
  static final Path SHARED_TESTDATA = Paths.get(env("MODELZIP_SHARED_TESTDATA", "../shared/testdata"));
  static final String PYTHON = env("MODELZIP_PYTHON", "");
  static final Path INTEROP = TESTS_DIR.resolve("java").resolve("interop.py");

  /** Skips the calling test when the Python bindings were not built. */
  static void assumePython() {
    assumeTrue("the Python bindings are not built (MODELZIP_PYTHON unset)", !PYTHON.isEmpty());
  }

  /** The result of a program run. */
  static final class Run {
    final int exitCode;
    final byte[] stdout;
    final String stderr;

    Run(int exitCode, byte[] stdout, String stderr) {
      this.exitCode = exitCode;
      this.stdout = stdout;
      this.stderr = stderr;
    }

    String out() {
      return new String(stdout, StandardCharsets.UTF_8);
    }
  }

  /** Runs a program with a time-out (it is killed after 120 s). */
  static Run run(List<String> command) throws IOException, InterruptedException {
    Path err = Files.createTempFile("modelzip-java-", ".err");
    try {
      Process p = new ProcessBuilder(command).redirectError(err.toFile()).start();
      p.getOutputStream().close();
      byte[] out = p.getInputStream().readAllBytes();
      if (!p.waitFor(120, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        throw new AssertionError("timed out: " + command);
      }
      return new Run(p.exitValue(), out, Files.readString(err));
    } finally {
      Files.deleteIfExists(err);
    }
  }

  /** Runs a program that must succeed; returns its output. */
  static Run runOk(String... command) throws IOException, InterruptedException {
    Run r = run(Arrays.asList(command));
    assertEquals("exit status of " + String.join(" ", command) + "\n" + r.stderr + r.out(), 0,
        r.exitCode);
    return r;
  }

  /** tests/java/interop.py under the build's Python bindings (must succeed). */
  static Run python(String... args) throws IOException, InterruptedException {
    assumePython();
    List<String> command = new ArrayList<>(List.of(PYTHON, INTEROP.toString()));
    command.addAll(Arrays.asList(args));
    return runOk(command.toArray(new String[0]));
  }

  /** The modelzip command (must succeed). */
  static Run cli(String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>(List.of(CLI));
    command.addAll(Arrays.asList(args));
    return runOk(command.toArray(new String[0]));
  }

  /** Writes {@code data} as the stored entry {@code name} of {@code zip}. */
  static void putStored(ZipOutputStream zip, String name, byte[] data) throws IOException {
    ZipEntry entry = new ZipEntry(name);
    CRC32 crc = new CRC32();
    crc.update(data);
    entry.setMethod(ZipEntry.STORED);
    entry.setSize(data.length);
    entry.setCompressedSize(data.length);
    entry.setCrc(crc.getValue());
    zip.putNextEntry(entry);
    zip.write(data);
    zip.closeEntry();
  }

  /** Lines of /proc/self/maps that map {@code file}. */
  static long mappings(Path file) throws IOException {
    String name = file.toAbsolutePath().toString();
    try (var lines = Files.lines(Paths.get("/proc/self/maps"))) {
      return lines.filter(l -> l.endsWith(" " + name)).count();
    }
  }

  /**
   * Runs the garbage collector until {@code done} holds, for at most 30 s;
   * returns whether it did.
   */
  static boolean collectUntil(BooleanSupplier done) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() < deadline) {
      if (done.getAsBoolean()) {
        return true;
      }
      System.gc();
      Thread.sleep(20);
    }
    return done.getAsBoolean();
  }
}
