package org.modelzip.tests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.Embeddings;
import org.modelzip.ModelzipException;
import org.modelzip.Param;

/**
 * The hostile corpus (tests/hostile/corpus/) opened from Java: every row of
 * tests/hostile/expected.tsv with a mode the binding reaches (open, load:
 * zero-copy, copied and every optimizer state, verify, fifu) gives the expected ModelzipException, or succeeds where the
 * row says ok; none crashes the JVM.
 */
public class HostileTest {
  private static final Path HOSTILE = TestSupport.TESTS_DIR.resolve("hostile");

  /** A text field of expected.tsv: \xHH is a byte, \\ a backslash; read as UTF-8. */
  private static String unescape(String field) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] in = field.getBytes(StandardCharsets.UTF_8);
    for (int i = 0; i < in.length; i++) {
      if (in[i] == '\\' && i + 1 < in.length && in[i + 1] == '\\') {
        out.write('\\');
        i++;
      } else if (in[i] == '\\' && i + 3 < in.length && in[i + 1] == 'x') {
        out.write(Integer.parseInt(new String(in, i + 2, 2, StandardCharsets.US_ASCII), 16));
        i += 3;
      } else {
        out.write(in[i]);
      }
    }
    return new String(out.toByteArray(), StandardCharsets.UTF_8);
  }

  private static void checkField(String row, String what, String expected, String actual) {
    if (expected.equals("*")) {
      return;
    }
    assertEquals(row + ": " + what, expected.equals("-") ? null : unescape(expected), actual);
  }

  private static void checkNumber(String row, String what, String expected, java.util.OptionalLong actual) {
    if (expected.equals("*")) {
      return;
    }
    assertEquals(row + ": " + what, expected.equals("-") ? "-" : expected,
        actual.isPresent() ? Long.toString(actual.getAsLong()) : "-");
  }

  /** Runs one row's operation; returns the error it threw, or null. */
  private static ModelzipException attempt(String mode, String file) {
    try {
      switch (mode) {
        case "open":
          Archive.open(file).close();
          break;
        case "load":
          try (Archive archive = Archive.open(file)) {
            for (String tag : archive.tags()) {
              archive.params(tag);
              archive.load(tag).values().forEach(t -> t.close());
              archive.load(tag, true).values().forEach(t -> t.close());
              // As tests/hostile/corpus_test.cpp: every optimizer state too.
              for (Param state : archive.updaterStates(tag)) {
                archive.updaterState(state.name(), state.state(), tag).close();
              }
            }
          }
          break;
        default:  // fifu
          try (Embeddings embeddings = Embeddings.open(file)) {
            embeddings.words();
          }
          break;
      }
      return null;
    } catch (ModelzipException e) {
      return e;
    }
  }

  @Test
  public void everyReachableRowGivesItsExpectedOutcome() throws Exception {
    List<String> rows = Files.readAllLines(HOSTILE.resolve("expected.tsv"), StandardCharsets.UTF_8);
    int checked = 0;
    List<String> failures = new ArrayList<>();
    for (String line : rows) {
      if (line.startsWith("#") || line.startsWith("file\t") || line.isBlank()) {
        continue;
      }
      String[] f = line.split("\t", -1);
      String mode = f[1];
      if (!List.of("open", "load", "verify", "fifu").contains(mode)) {
        continue;
      }
      String file = HOSTILE.resolve("corpus").resolve(f[0]).toString();
      String code = f[2];
      try {
        if (mode.equals("verify")) {
          try (Archive archive = Archive.open(file)) {
            List<String> problems = archive.verify();
            if (code.equals("ok")) {
              assertEquals(line, List.of(), problems);
            } else {
              String entry = unescape(f[4]) + ": ";
              String message = unescape(f[3]);
              assertTrue(line + " -> " + problems,
                  problems.stream().anyMatch(p -> p.startsWith(entry) && p.contains(message)));
            }
          }
        } else {
          ModelzipException e = attempt(mode, file);
          if (code.equals("ok")) {
            if (e != null) {
              throw new AssertionError(line + ": unexpected " + e.getMessage(), e);
            }
          } else {
            assertNotNull(line + ": no error", e);
            assertEquals(line + ": " + e.getMessage(), code.toUpperCase(Locale.ROOT), e.code().name());
            assertTrue(line + ": " + e.getMessage(), e.getMessage().contains(unescape(f[3])));
            assertEquals(line, file, e.archive());
            checkField(line, "entry", f[4], e.entry());
            checkField(line, "tag", f[5], e.tag());
            checkNumber(line, "line", f[6], e.line());
            checkNumber(line, "offset", f[7], e.offset());
          }
        }
        checked++;
      } catch (AssertionError failure) {
        failures.add(failure.getMessage());
      }
    }
    if (!failures.isEmpty()) {
      fail(failures.size() + " rows failed:\n" + String.join("\n", failures));
    }
    assertTrue("rows checked: " + checked, checked > 100);
  }
}
