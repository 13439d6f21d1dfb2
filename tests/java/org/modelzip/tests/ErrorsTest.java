package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipOutputStream;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.function.ThrowingRunnable;
import org.modelzip.Archive;
import org.modelzip.ModelzipException;
import org.modelzip.Tensor;

/** The library's errors as Java sees them: code, context, NoSuchElementException. */
public class ErrorsTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  @Before
  public void setUp() throws Exception {
    Archive.save(scratch.archive(), "v1", Map.of("w", Tensor.of(new float[] {1, 2})));
  }

  private static ModelzipException notFound(NoSuchElementException e) {
    assertTrue("cause is the library's error", e.getCause() instanceof ModelzipException);
    ModelzipException cause = (ModelzipException) e.getCause();
    assertEquals(ModelzipException.Code.NOT_FOUND, cause.code());
    assertEquals(cause.getMessage(), e.getMessage());
    return cause;
  }

  @Test
  public void aMissingFileIsAnIoErrorWithErrno() {
    String missing = scratch.file("missing.zip");
    ModelzipException e = assertThrows(ModelzipException.class, () -> Archive.open(missing));
    assertEquals(ModelzipException.Code.IO, e.code());
    assertEquals(2, e.systemError());  // ENOENT
    assertEquals(missing, e.archive());
    assertTrue(e.getMessage(), e.getMessage().startsWith(missing));
  }

  @Test
  public void aFileThatIsNoZipIsCorrupt() throws Exception {
    Path junk = Paths.get(scratch.file("junk.zip"));
    Files.writeString(junk, "not a zip archive at all, just some text");
    ModelzipException e = assertThrows(ModelzipException.class, () -> Archive.open(junk.toString()));
    assertEquals(ModelzipException.Code.CORRUPT, e.code());
    assertEquals(junk.toString(), e.archive());
    assertTrue(e.bareMessage(), e.getMessage().endsWith(e.bareMessage()));
    assertEquals(0, e.systemError());
  }

  @Test
  public void missingTagsAndNamesAreNoSuchElement() {
    try (Archive archive = Archive.open(scratch.archive())) {
      ModelzipException e = notFound(
          assertThrows(NoSuchElementException.class, () -> archive.tensor("nope", null)));
      assertTrue(e.getMessage(), e.getMessage().contains("nope"));
      e = notFound(assertThrows(NoSuchElementException.class, () -> archive.params("v9")));
      assertTrue(e.getMessage(), e.getMessage().contains("v9"));
      notFound(assertThrows(NoSuchElementException.class, () -> archive.load("v9")));
      notFound(assertThrows(NoSuchElementException.class, () -> archive.tensor("w", "v9")));
    }
  }

  @Test
  public void copiedReadsCheckTheCrcThatZeroCopyViewsDoNotCheck() throws Exception {
    String file = scratch.file("flipped.zip");
    float[] values = {1.5f, 2.5f, 3.5f, 4.5f};
    Archive.save(file, "v", Map.of("w", Tensor.of(values)));
    // One bit of the stored values flipped: 4.5 (0x40900000) becomes 0x40900001.
    byte[] bytes = Files.readAllBytes(Paths.get(file));
    java.nio.ByteBuffer pattern = java.nio.ByteBuffer.allocate(16)
        .order(java.nio.ByteOrder.LITTLE_ENDIAN);
    for (float v : values) pattern.putFloat(v);
    int at = -1;
    for (int i = 0; i + 16 <= bytes.length && at < 0; i++) {
      if (java.util.Arrays.equals(bytes, i, i + 16, pattern.array(), 0, 16)) at = i;
    }
    assertTrue("the values are stored as they are", at >= 0);
    bytes[at + 12] ^= 1;
    Files.write(Paths.get(file), bytes);
    try (Archive archive = Archive.open(file)) {
      // The zero-copy view reads the bytes as they are (no CRC at open).
      assertNotEquals(4.5f, archive.tensor("w", null).toFloatArray()[3], 0f);
      for (ThrowingRunnable copy : List.<ThrowingRunnable>of(
               () -> archive.tensor("w", null, true), () -> archive.load("v", true))) {
        ModelzipException e = assertThrows(ModelzipException.class, copy);
        assertEquals(ModelzipException.Code.CORRUPT, e.code());
        assertEquals(file, e.archive());
        assertEquals("v/params/0.fb", e.entry());
        assertTrue(e.getMessage(), e.getMessage().contains("CRC"));
      }
      assertTrue(archive.verify().toString(),
          archive.verify().stream().anyMatch(p -> p.startsWith("v/params/0.fb: ")));
    }
    // An intact entry read as a copy: the same values, not mapped.
    Archive.save(scratch.archive(), "v2", Map.of("w", Tensor.of(values)));
    try (Archive archive = Archive.open(scratch.archive())) {
      Tensor copied = archive.tensor("w", "v2", true);
      assertFalse(copied.isMapped());
      assertArrayEquals(values, copied.toFloatArray(), 0f);
      assertFalse(archive.load("v2", true).get("w").isMapped());
    }
  }

  @Test
  public void aDamagedTableNamesItsEntryTagAndLine() {
    Path file = TestSupport.TESTS_DIR.resolve("hostile/corpus/updater_missing_field.zip");
    try (Archive archive = Archive.open(file.toString())) {
      ModelzipException e = assertThrows(ModelzipException.class, () -> archive.load("t1"));
      assertEquals(ModelzipException.Code.CORRUPT, e.code());
      assertEquals("t1/updater.txt", e.entry());
      assertEquals("t1", e.tag());
      assertEquals(1, e.line().getAsLong());
      assertFalse(e.offset().isPresent());
      assertEquals(file.toString(), e.archive());
      assertTrue(archive.verify().stream().anyMatch(p -> p.startsWith("t1/updater.txt: ")));
    }
  }

  @Test
  public void verifyListsTwentyProblemsOfAnEntryAndProblemsFoundCountsAll() throws Exception {
    Path damaged = Paths.get(scratch.file("damaged.zip"));
    try (ZipFile in = new ZipFile(scratch.archive());
         ZipOutputStream out = new ZipOutputStream(Files.newOutputStream(damaged))) {
      for (ZipEntry e : Collections.list(in.entries())) {
        byte[] data = in.getInputStream(e).readAllBytes();
        if (e.getName().equals("v1/params.txt")) {
          StringBuilder lines = new StringBuilder();
          for (int i = 0; i < 25; ++i) lines.append("bad line ").append(i).append('\n');
          data = lines.toString().getBytes(StandardCharsets.UTF_8);
        }
        TestSupport.putStored(out, e.getName(), data);
      }
    }
    try (Archive archive = Archive.open(damaged.toString())) {
      List<String> problems = archive.verify();
      assertEquals(21, problems.size());
      assertEquals("v1/params.txt: ... and 5 more problems in this entry", problems.get(20));
      assertEquals(25, Archive.problemsFound(problems));
    }
    assertEquals(0, Archive.problemsFound(List.of()));
    assertEquals(1 + 7 + 1 + 1,
        Archive.problemsFound(List.of("a: ... and 1 more problem in this entry",
            "b: ... and 7 more problems in this entry", "... and 7 more problem in this entry",
            "c: x... and 2 more problems in this entry")));
  }

  /**
   * The message of the IllegalArgumentException {@code make} throws (a
   * caller's mistake, as TrainingConfig.build reports one), whose cause is
   * the library's INVALID_ARGUMENT with the same message.
   */
  private static String refusedShape(ThrowingRunnable make) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, make);
    assertTrue("cause is the library's error", e.getCause() instanceof ModelzipException);
    ModelzipException cause = (ModelzipException) e.getCause();
    assertEquals(e.getMessage(), ModelzipException.Code.INVALID_ARGUMENT, cause.code());
    assertEquals(cause.getMessage(), e.getMessage());
    return e.getMessage();
  }

  @Test
  public void aShapeThatDoesNotFitTheArrayIsToldInArrayValues() {
    // The library counts bytes; the message counts what the caller gave.
    assertEquals("float32 tensor of shape [2, 2]: the float[] has 3 values, the shape holds 4"
        + " (a float32 tensor of shape [2, 2] needs 16 bytes, got 12)",
        refusedShape(() -> Tensor.of(new float[] {1, 2, 3}, 2, 2)));
    assertEquals("int64 tensor of shape [3]: the long[] has 2 values, the shape holds 3"
        + " (an int64 tensor of shape [3] needs 24 bytes, got 16)",
        refusedShape(() -> Tensor.of(new long[] {1, 2}, 3)));
    String m = refusedShape(() -> Tensor.ofComplex64(new float[] {1, 2, 3, 4, 5, 6}, 2));
    assertTrue(m, m.startsWith("complex64 tensor of shape [2]: the float[] has 6 values, the"
        + " shape holds 4 (2 elements of 2 values: real, imaginary) ("));
    m = refusedShape(() -> Tensor.of("float4_e2m1fn_x2", new byte[] {1, 2, 3}, new long[] {6}));
    assertTrue(m, m.startsWith("float4_e2m1fn_x2 tensor of shape [6]: the byte[] has 3 values,"
        + " the shape holds 6 (the shape counts bytes, each a pair of FP4 values) ("));
    m = refusedShape(() -> Tensor.of(new boolean[] {true}, 1, 2));
    assertTrue(m, m.startsWith("bool tensor of shape [1, 2]: the boolean[] has 1 values"));
    // Where the counts are not what is wrong, the library's message stays.
    m = refusedShape(() -> Tensor.of(new float[] {1, 2}, -1, -2));
    assertTrue(m, m.contains("negative dimension -1") && !m.contains("float[]"));
    // The other makers refuse a shape alike.
    m = refusedShape(() -> Tensor.of(new String[] {"a", "b"}, 3));
    assertTrue(m, m.contains("[3]"));
    m = refusedShape(() -> Tensor.of("float32", java.nio.ByteBuffer.allocate(8), new long[] {3}));
    assertTrue(m, m.contains("12 bytes, got 8"));
    m = refusedShape(
        () -> Tensor.of("int16", java.nio.ByteBuffer.allocateDirect(6), new long[] {2, 2}));
    assertTrue(m, m.contains("8 bytes, got 6"));
  }

  @Test
  public void invalidTagNamesAreInvalidArguments() {
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "a/b", Map.of("w", Tensor.of(new float[] {1}))));
    assertEquals(ModelzipException.Code.INVALID_ARGUMENT, e.code());
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("v1"), archive.tags());  // the failed save changed nothing
    }
  }

  @Test
  public void unpairedSurrogatesAreRefusedNotTurnedIntoQuestionMarks() {
    // String.getBytes(UTF_8) would save "w" + U+D800 as "w?", a different name.
    Tensor one = Tensor.of(new float[] {1});
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Archive.save(scratch.archive(), "v2", Map.of("w\uD800", one)));
    assertTrue(e.getMessage(), e.getMessage().contains("unpaired surrogate U+D800 at index 1"));
    assertThrows(IllegalArgumentException.class,
        () -> Archive.save(scratch.archive() + "\uDC00", "v2", Map.of("w", one)));
    assertThrows(IllegalArgumentException.class, () -> Tensor.of(new String[] {"ok", "\uDBFFx"}));
    assertFalse(Files.exists(Paths.get(scratch.archive() + "?")));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("v1"), archive.tags());
      assertThrows(IllegalArgumentException.class, () -> archive.tensor("w\uD800", null));
    }
    // A surrogate pair (U+1F642) is a character like any other.
    Archive.save(scratch.archive(), "v2", Map.of("\uD83D\uDE42", one));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals("\uD83D\uDE42", archive.params("v2").get(0).name());
    }
  }

  @Test
  public void aRefusedSaveNamesTheArchiveAndTag() {
    String path = scratch.archive();
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(path, "v2", Map.of("", Tensor.of(new float[] {1}))));
    assertEquals(ModelzipException.Code.INVALID_ARGUMENT, e.code());
    assertEquals(path, e.archive());
    assertEquals("v2", e.tag());
    assertTrue(e.getMessage(), e.getMessage().startsWith(path + ": tag 'v2': "));
    e = assertThrows(ModelzipException.class,
        () -> Archive.save(path, "a/b", Map.of("w", Tensor.of(new float[] {1}))));
    assertEquals(path, e.archive());
    // An empty path is refused before anything is written (it failed at the
    // final rename, "cannot replace the archive", naming no file).
    e = assertThrows(ModelzipException.class,
        () -> Archive.save("", "v2", Map.of("w", Tensor.of(new float[] {1}))));
    assertEquals(ModelzipException.Code.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage(), e.getMessage().contains("the archive path is empty"));
  }

  /** LoadProbe in a JVM of its own, with these system properties. */
  private TestSupport.Run probe(String... properties) throws Exception {
    List<String> command = new java.util.ArrayList<>();
    command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(List.of(properties));
    command.addAll(List.of("-cp", System.getProperty("java.class.path"),
        LoadProbe.class.getName(), scratch.archive()));
    return TestSupport.run(command);
  }

  @Test
  public void aMissingJniLibraryNamesWhereItWasLookedFor() throws Exception {
    TestSupport.Run r = probe("-Djava.library.path=/nonexistent-modelzip");
    assertNotEquals(0, r.exitCode);
    assertTrue(r.stderr, r.stderr.contains("java.library.path=/nonexistent-modelzip"));
    assertTrue(r.stderr, r.stderr.contains("libmodelzip_jni.so"));
    r = probe("-Dorg.modelzip.library=/nonexistent-modelzip/libmodelzip_jni.so");
    assertNotEquals(0, r.exitCode);
    assertTrue(r.stderr, r.stderr.contains("/nonexistent-modelzip/libmodelzip_jni.so (system property org.modelzip.library)"));
    // With the right folder, or the library named by the property, the same program works.
    String folder = System.getProperty("java.library.path");
    r = probe("-Djava.library.path=" + folder);
    assertEquals(r.stderr, 0, r.exitCode);
    assertEquals("[v1]\n", r.out());
    r = probe("-Djava.library.path=/nonexistent-modelzip",
        "-Dorg.modelzip.library=" + new File(folder, "libmodelzip_jni.so").getAbsolutePath());
    assertEquals(r.stderr, 0, r.exitCode);
    assertEquals("[v1]\n", r.out());
  }
}
