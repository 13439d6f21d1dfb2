package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipOutputStream;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.ModelzipException;
import org.modelzip.ModelzipIOException;
import org.modelzip.Param;
import org.modelzip.Problem;
import org.modelzip.Tensor;
import org.modelzip.TrainingConfig;

/**
 * The reads Python and C++ have beside tensors: verify's problems as (entry,
 * message), one parameter's description, raw entries, the training config,
 * and "" as the newest tag.
 */
public class ArchiveAccessTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  private static final String NOTES = "notes: read me.txt";
  private static final byte[] NOTES_TEXT =
      "written by another tool, kept by modelzip".getBytes(StandardCharsets.UTF_8);

  /** Copies the test's archive to {@code name}, stored, with {@link #NOTES} added. */
  private Path withNotes(String name) throws Exception {
    Path out = Paths.get(scratch.file(name));
    try (ZipFile in = new ZipFile(scratch.archive());
         ZipOutputStream zip = new ZipOutputStream(Files.newOutputStream(out))) {
      List<ZipEntry> entries = new ArrayList<>(Collections.list(in.entries()));
      entries.add(new ZipEntry(NOTES));
      for (ZipEntry e : entries) {
        byte[] data = e.getName().equals(NOTES) ? NOTES_TEXT : in.getInputStream(e).readAllBytes();
        TestSupport.putStored(zip, e.getName(), data);
      }
    }
    return out;
  }

  /** Flips one bit of the only copy of {@code pattern} in {@code file}. */
  private static void damage(Path file, byte[] pattern) throws Exception {
    byte[] bytes = Files.readAllBytes(file);
    int at = -1;
    for (int i = 0; i + pattern.length <= bytes.length; i++) {
      if (java.util.Arrays.equals(bytes, i, i + pattern.length, pattern, 0, pattern.length)) {
        assertEquals("one copy of the pattern", -1, at);
        at = i;
      }
    }
    assertTrue("the pattern is stored as it is", at >= 0);
    bytes[at + 3] ^= 1;
    Files.write(file, bytes);
  }

  @Test
  public void problemsKeepAnEntryNameThatContainsColonSpace() throws Exception {
    Archive.save(scratch.archive(), "v1", Map.of("w", Tensor.of(new float[] {1, 2})));
    Path damaged = withNotes("damaged.zip");
    damage(damaged, NOTES_TEXT);
    try (Archive archive = Archive.open(damaged.toString())) {
      List<Problem> problems = archive.problems();
      assertEquals(problems.toString(), 1, problems.size());
      Problem p = problems.get(0);
      assertEquals(NOTES, p.entry());
      assertTrue(p.message(), p.message().contains("CRC"));
      assertFalse(p.message(), p.message().startsWith("read me.txt"));
      assertEquals(1, p.count());
      assertEquals(1, Problem.found(problems));
      // verify() keeps its "entry: message" strings, which cannot be split
      // back: the first ": " is inside the entry name.
      assertEquals(List.of(NOTES + ": " + p.message()), archive.verify());
      assertEquals(List.of(p.toString()), archive.verify());
      // Python's (entry, message) pairs are the same.
      Object python = Json.parse(TestSupport.python("verify", damaged.toString()).out());
      assertEquals(List.of(List.of(p.entry(), p.message())), python);
    }
    try (Archive intact = Archive.open(withNotes("intact.zip").toString())) {
      assertEquals(List.of(), intact.problems());
      assertEquals(0, Problem.found(intact.problems()));
    }
  }

  @Test
  public void problemsCountWhatVerifyFoundButDidNotList() throws Exception {
    Archive.save(scratch.archive(), "v1", Map.of("w", Tensor.of(new float[] {1, 2})));
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
        out.putNextEntry(new ZipEntry(e.getName()));
        out.write(data);
        out.closeEntry();
      }
    }
    try (Archive archive = Archive.open(damaged.toString())) {
      List<Problem> problems = archive.problems();
      assertEquals(21, problems.size());
      for (Problem p : problems) assertEquals("v1/params.txt", p.entry());
      assertEquals(1, problems.get(0).count());
      assertEquals("... and 5 more problems in this entry", problems.get(20).message());
      assertEquals(5, problems.get(20).count());
      assertEquals(25, Problem.found(problems));
      assertEquals(Archive.problemsFound(archive.verify()), Problem.found(problems));
    }
  }

  @Test
  public void paramDescribesOneParameterAsParamsDoes() {
    Tensor w = Tensor.of(new double[] {1, 2, 3, 4, 5, 6}, 2, 3);
    Archive.save(scratch.archive(), "a", Map.of("w", w));
    Map<String, Tensor> b = new LinkedHashMap<>();
    b.put("w", w);
    b.put("n", Tensor.of(new long[] {8}));
    Archive.save(scratch.archive(), "b", b);
    try (Archive archive = Archive.open(scratch.archive())) {
      List<Param> params = archive.params("b");
      assertEquals(params.get(0), archive.param("w", "b"));
      assertEquals(params.get(1), archive.param("n", null));
      assertEquals(params.get(1), archive.param("n", "B"));
      Param shared = archive.param("w", null);
      assertTrue(shared.shared());
      assertEquals("a", shared.ownerTag());
      assertArrayEquals(new long[] {2, 3}, shared.shape());
      assertFalse(archive.param("w", "a").shared());
      for (String[] missing : new String[][] {{"x", "b"}, {"n", "a"}, {"w", "c"}}) {
        NoSuchElementException e = assertThrows(NoSuchElementException.class,
            () -> archive.param(missing[0], missing[1]));
        assertEquals(ModelzipException.Code.NOT_FOUND, ((ModelzipException) e.getCause()).code());
      }
    }
  }

  @Test
  public void entriesAreListedAndReadAsTheZipHoldsThem() throws Exception {
    Archive.save(scratch.archive(), "v1", Map.of("w", Tensor.of(new float[] {1, 2})));
    Path file = withNotes("notes.zip");
    try (Archive archive = Archive.open(file.toString());
         ZipFile zip = new ZipFile(file.toFile())) {
      List<String> names = new ArrayList<>();
      for (ZipEntry e : Collections.list(zip.entries())) {
        names.add(e.getName());
        assertTrue(e.getName(), archive.hasEntry(e.getName()));
        assertArrayEquals(e.getName(), zip.getInputStream(e).readAllBytes(),
            archive.entry(e.getName()));
      }
      assertEquals(names, archive.entryNames());
      assertTrue(names.contains("v1/params.txt"));
      assertArrayEquals(NOTES_TEXT, archive.entry(NOTES));
      assertFalse(archive.hasEntry("v1"));
      assertFalse(archive.hasEntry("V1/params.txt"));  // exact names
      NoSuchElementException e =
          assertThrows(NoSuchElementException.class, () -> archive.entry("v1/nothing"));
      assertEquals("v1/nothing", ((ModelzipException) e.getCause()).entry());
    }
    // Read with its CRC-32 checked.
    damage(file, NOTES_TEXT);
    try (Archive archive = Archive.open(file.toString())) {
      ModelzipException e = assertThrows(ModelzipException.class, () -> archive.entry(NOTES));
      assertEquals(ModelzipException.Code.CORRUPT, e.code());
      assertEquals(NOTES, e.entry());
      assertEquals(file.toString(), e.archive());
    }
  }

  /** One entry of {@link #rawZip}: its data as stored and the sizes and CRC it declares. */
  private record RawEntry(String name, int method, long crc, byte[] data, long size) {}

  /**
   * A zip of {@code entries} written byte by byte, declaring what each entry
   * says (no ZIP64: sizes and offsets below 4 GiB), followed by
   * {@code holeBefore} zero bytes in front of the data of the entry named
   * {@code holeEntry}, left as a hole of a sparse file.
   */
  private static void rawZip(Path out, List<RawEntry> entries, String holeEntry, long hole)
      throws Exception {
    java.io.ByteArrayOutputStream central = new java.io.ByteArrayOutputStream();
    try (java.io.RandomAccessFile file = new java.io.RandomAccessFile(out.toFile(), "rw")) {
      file.setLength(0);
      for (RawEntry e : entries) {
        byte[] name = e.name().getBytes(StandardCharsets.UTF_8);
        long at = file.getFilePointer();
        long stored = e.data().length + (e.name().equals(holeEntry) ? hole : 0);
        java.nio.ByteBuffer local = java.nio.ByteBuffer.allocate(30 + name.length)
            .order(java.nio.ByteOrder.LITTLE_ENDIAN);
        local.putInt(0x04034b50).putShort((short) 20).putShort((short) 0x0800)
            .putShort((short) e.method()).putShort((short) 0).putShort((short) 0x21)
            .putInt((int) e.crc()).putInt((int) stored).putInt((int) e.size())
            .putShort((short) name.length).putShort((short) 0).put(name);
        file.write(local.array());
        file.seek(file.getFilePointer() + stored - e.data().length);
        file.write(e.data());
        java.nio.ByteBuffer record = java.nio.ByteBuffer.allocate(46 + name.length)
            .order(java.nio.ByteOrder.LITTLE_ENDIAN);
        record.putInt(0x02014b50).putShort((short) 20).putShort((short) 20)
            .putShort((short) 0x0800).putShort((short) e.method()).putShort((short) 0)
            .putShort((short) 0x21).putInt((int) e.crc()).putInt((int) stored)
            .putInt((int) e.size()).putShort((short) name.length).putShort((short) 0)
            .putShort((short) 0).putShort((short) 0).putShort((short) 0).putInt(0)
            .putInt((int) at).put(name);
        central.write(record.array());
      }
      long cd = file.getFilePointer();
      file.write(central.toByteArray());
      java.nio.ByteBuffer end = java.nio.ByteBuffer.allocate(22)
          .order(java.nio.ByteOrder.LITTLE_ENDIAN);
      end.putInt(0x06054b50).putShort((short) 0).putShort((short) 0)
          .putShort((short) entries.size()).putShort((short) entries.size())
          .putInt(central.size()).putInt((int) cd).putShort((short) 0);
      file.write(end.array());
    }
  }

  private static RawEntry storedEntry(String name, String text) {
    byte[] data = text.getBytes(StandardCharsets.UTF_8);
    CRC32 crc = new CRC32();
    crc.update(data);
    return new RawEntry(name, 0, crc.getValue(), data, data.length);
  }

  @Test
  public void anEntryBeyondOneJavaArrayIsRefusedByItsSizeBeforeItIsRead() throws Exception {
    // A deflated entry that declares 2^31 bytes (its 2 MB of data are within
    // the ratio deflate reaches) but whose data is no deflate stream: reading
    // it would fail as CORRUPT, so LIMIT_EXCEEDED shows that the size alone
    // refused it.
    Path file = Paths.get(scratch.file("big.zip"));
    long declared = 1L << 31;
    rawZip(file, List.of(storedEntry("modelzip.toml", "format_version = 1\n"),
        storedEntry("tags.txt", ""), new RawEntry("big.bin", 8, 0, new byte[2_000_000],
            declared)), null, 0);
    try (Archive archive = Archive.open(file.toString())) {
      assertEquals(declared, archive.entrySize("big.bin"));
      ModelzipException e = assertThrows(ModelzipException.class, () -> archive.entry("big.bin"));
      assertEquals(e.getMessage(), ModelzipException.Code.LIMIT_EXCEEDED, e.code());
      assertEquals("big.bin", e.entry());
      assertEquals(file.toString(), e.archive());
      assertTrue(e.getMessage(), e.getMessage().contains("entry of 2147483648 bytes"));
      assertTrue(e.getMessage(), e.getMessage().contains("entry(name, offset, length)"));
      assertEquals(19, archive.entrySize("modelzip.toml"));
      NoSuchElementException missing =
          assertThrows(NoSuchElementException.class, () -> archive.entrySize("small.bin"));
      assertEquals("small.bin", ((ModelzipException) missing.getCause()).entry());
    }
  }

  @Test
  public void aStoredEntryBeyondOneJavaArrayIsReadInParts() throws Exception {
    // 2 GiB + 32 bytes stored: a hole of a sparse file (nothing is written
    // but the headers and the last bytes), then "the last 32 bytes of it...".
    Path file = Paths.get(scratch.file("sparse.zip"));
    byte[] tail = "the last 32 bytes of the entry.\n".getBytes(StandardCharsets.UTF_8);
    long hole = 1L << 31;
    long size = hole + tail.length;
    rawZip(file, List.of(storedEntry("modelzip.toml", "format_version = 1\n"),
        storedEntry("tags.txt", ""), new RawEntry("huge.bin", 0, 0, tail, size)),
        "huge.bin", hole);
    try (Archive archive = Archive.open(file.toString())) {
      assertEquals(size, archive.entrySize("huge.bin"));
      ModelzipException e = assertThrows(ModelzipException.class, () -> archive.entry("huge.bin"));
      assertEquals(e.getMessage(), ModelzipException.Code.LIMIT_EXCEEDED, e.code());
      assertArrayEquals(tail, archive.entry("huge.bin", hole, tail.length));
      assertArrayEquals(new byte[] {0, 0, 't', 'h'}, archive.entry("huge.bin", hole - 2, 4));
      assertArrayEquals(new byte[0], archive.entry("huge.bin", size, 0));
      assertThrows(IndexOutOfBoundsException.class, () -> archive.entry("huge.bin", size - 1, 2));
      assertThrows(IndexOutOfBoundsException.class, () -> archive.entry("huge.bin", -1, 1));
      assertThrows(IndexOutOfBoundsException.class, () -> archive.entry("huge.bin", 0, -1));
      assertThrows(NoSuchElementException.class, () -> archive.entry("none.bin", 0, 0));
    }
  }

  @Test
  public void partsOfEntriesAreTheirBytesStoredOrDeflated() throws Exception {
    Archive.save(scratch.archive(), "v1", Map.of("w", Tensor.of(new float[] {1, 2})),
        org.modelzip.SaveOptions.defaults().compress(true));
    Path file = withNotes("notes.zip");
    try (Archive archive = Archive.open(file.toString())) {
      for (String name : List.of(NOTES, "v1/params.txt", "modelzip.toml")) {
        byte[] whole = archive.entry(name);
        assertEquals(name, whole.length, archive.entrySize(name));
        for (int from = 0; from <= whole.length; from += 7) {
          int length = Math.min(5, whole.length - from);
          assertArrayEquals(name + " at " + from,
              java.util.Arrays.copyOfRange(whole, from, from + length),
              archive.entry(name, from, length));
        }
      }
    }
    // A deflated tensor blob, read in parts as the zip holds it.
    try (Archive archive = Archive.open(scratch.archive());
         ZipFile zip = new ZipFile(scratch.archive())) {
      String blob = archive.entryNames().stream().filter(n -> n.startsWith("v1/params/"))
          .findFirst().orElseThrow();
      assertEquals(ZipEntry.DEFLATED, zip.getEntry(blob).getMethod());
      byte[] whole = zip.getInputStream(zip.getEntry(blob)).readAllBytes();
      assertEquals(whole.length, archive.entrySize(blob));
      assertArrayEquals(java.util.Arrays.copyOfRange(whole, 3, whole.length),
          archive.entry(blob, 3, whole.length - 3));
    }
  }

  /** {@code n} bytes that deflate cannot shrink, the same for each call. */
  private static byte[] noise(int n) {
    byte[] out = new byte[n];
    new java.util.Random(12345).nextBytes(out);
    return out;
  }

  /** {@code data} as a raw deflate stream (no zlib header), as zip entries hold it. */
  private static byte[] deflateRaw(byte[] data) {
    java.util.zip.Deflater deflater = new java.util.zip.Deflater(6, true);
    deflater.setInput(data);
    deflater.finish();
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    byte[] buffer = new byte[1 << 16];
    while (!deflater.finished()) out.write(buffer, 0, deflater.deflate(buffer));
    deflater.end();
    return out.toByteArray();
  }

  @Test
  public void aPartOfADeflatedEntryDecompressesOnlyUpToItsEnd() throws Exception {
    // cut.bin: the first half of the deflated data of 12 MiB (the rest is
    // missing); lie.bin: all of 3 MiB, declared as 2^31 bytes.
    byte[] data = noise(12 << 20);
    byte[] packed = deflateRaw(data);
    CRC32 crc = new CRC32();
    crc.update(data);
    byte[] small = java.util.Arrays.copyOf(data, 3 << 20);
    CRC32 smallCrc = new CRC32();
    smallCrc.update(small);
    Path file = Paths.get(scratch.file("deflated.zip"));
    rawZip(file, List.of(storedEntry("modelzip.toml", "format_version = 1\n"),
        storedEntry("tags.txt", ""),
        new RawEntry("cut.bin", 8, crc.getValue(),
            java.util.Arrays.copyOf(packed, packed.length / 2), data.length),
        new RawEntry("lie.bin", 8, smallCrc.getValue(), deflateRaw(small), 1L << 31)), null, 0);
    try (Archive archive = Archive.open(file.toString())) {
      // Before the missing data: read, whatever follows.
      assertArrayEquals(java.util.Arrays.copyOfRange(data, 1000, 1000 + (1 << 20)),
          archive.entry("cut.bin", 1000, 1 << 20));
      // A part that reaches it, and the whole entry: refused.
      for (long from : new long[] {0, 10 << 20}) {
        ModelzipException e = assertThrows(ModelzipException.class,
            () -> archive.entry("cut.bin", from, (int) (data.length - from)));
        assertEquals(e.getMessage(), ModelzipException.Code.CORRUPT, e.code());
        assertEquals("cut.bin", e.entry());
      }
      assertThrows(ModelzipException.class, () -> archive.entry("cut.bin"));
      // The declared 2 GiB sizes no memory: the data there reads, beyond it is CORRUPT.
      assertArrayEquals(java.util.Arrays.copyOfRange(small, (3 << 20) - 16, 3 << 20),
          archive.entry("lie.bin", (3 << 20) - 16, 16));
      ModelzipException e = assertThrows(ModelzipException.class,
          () -> archive.entry("lie.bin", 3 << 20, 1));
      assertEquals(e.getMessage(), ModelzipException.Code.CORRUPT, e.code());
      assertTrue(e.getMessage(), e.getMessage().contains("less data than the entry's size"));
    }
  }

  /** Everything {@code in} gives, read {@code part} bytes at a time. */
  private static byte[] readInParts(java.io.InputStream in, int part) throws Exception {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    byte[] buffer = new byte[part];
    for (int n; (n = in.read(buffer, 0, part)) != -1;) {
      assertTrue(n > 0);
      out.write(buffer, 0, n);
    }
    return out.toByteArray();
  }

  @Test
  public void entryStreamsReadEachEntryAsZipInputStreamDoes() throws Exception {
    // A deflated save, and its stored copy with NOTES, read by java.util.zip's
    // own streaming reader and by entryStream in parts of several sizes
    // (across the 1 MiB the glue copies at a time), and byte by byte.
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    tensors.put("w", Tensor.of(new float[] {1, 2}));
    tensors.put("big", Tensor.of(noise(3 << 20)));
    Archive.save(scratch.archive(), "v1", tensors,
        org.modelzip.SaveOptions.defaults().compress(true));
    Path deflated = Paths.get(scratch.archive());
    Path stored = withNotes("notes.zip");
    String blob;
    try (Archive archive = Archive.open(scratch.archive())) {
      Param p = archive.param("big", null);
      blob = p.blob();
      assertTrue(blob, blob.startsWith("v1/params/"));
      assertTrue(p.compressed());
    }
    for (Path file : List.of(deflated, stored)) {
      Map<String, byte[]> expected = new LinkedHashMap<>();
      try (java.util.zip.ZipInputStream zip =
               new java.util.zip.ZipInputStream(Files.newInputStream(file))) {
        for (ZipEntry e; (e = zip.getNextEntry()) != null; ) {
          expected.put(e.getName(), zip.readAllBytes());
          if (e.getName().equals(blob)) {
            assertEquals(file.equals(deflated) ? ZipEntry.DEFLATED : ZipEntry.STORED, e.getMethod());
          }
        }
      }
      try (Archive archive = Archive.open(file.toString())) {
        assertEquals(new ArrayList<>(expected.keySet()), archive.entryNames());
        for (Map.Entry<String, byte[]> e : expected.entrySet()) {
          for (int part : new int[] {1 << 22, 1 << 20, 8191}) {
            try (java.io.InputStream in = archive.entryStream(e.getKey())) {
              assertArrayEquals(e.getKey() + " in parts of " + part, e.getValue(),
                  readInParts(in, part));
              assertEquals(-1, in.read());
              assertEquals(0, in.read(new byte[4], 0, 0));
            }
          }
        }
      }
    }
    try (Archive archive = Archive.open(stored.toString())) {
      try (java.io.InputStream in = archive.entryStream(NOTES)) {
        for (byte b : NOTES_TEXT) assertEquals(b & 0xff, in.read());
        assertEquals(-1, in.read());
      }
      NoSuchElementException missing =
          assertThrows(NoSuchElementException.class, () -> archive.entryStream("v1/nothing"));
      assertEquals("v1/nothing", ((ModelzipException) missing.getCause()).entry());
    }
    Archive archive = Archive.open(deflated.toString());
    byte[] whole = archive.entry(blob);
    java.io.InputStream kept = archive.entryStream(blob);
    assertEquals(1000, kept.skip(1000));
    archive.close();  // the stream keeps the mapping
    assertArrayEquals(java.util.Arrays.copyOfRange(whole, 1000, whole.length), kept.readAllBytes());
    kept.close();
    kept.close();  // idempotent
    assertThrows(java.io.IOException.class, () -> kept.read());
    assertThrows(IndexOutOfBoundsException.class, () -> kept.read(new byte[2], 1, 2));
  }

  @Test
  public void entryStreamsReadByteByByteAsZipInputStreamReadsAndAllocateNoArrayPerByte()
      throws Exception {
    // Deflated entries (a save with compress) read with read(), one byte at a
    // time, against java.util.zip's streaming reader.
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    tensors.put("w", Tensor.of(new float[] {1, 2, 3}));
    tensors.put("part", Tensor.of(noise(100_000)));
    Archive.save(
        scratch.archive(), "v1", tensors, org.modelzip.SaveOptions.defaults().compress(true));
    Map<String, byte[]> expected = new LinkedHashMap<>();
    try (java.util.zip.ZipInputStream zip =
             new java.util.zip.ZipInputStream(Files.newInputStream(Paths.get(scratch.archive())))) {
      for (ZipEntry e; (e = zip.getNextEntry()) != null;) {
        expected.put(e.getName(), zip.readAllBytes());
      }
    }
    String blob;
    try (Archive archive = Archive.open(scratch.archive())) {
      blob = archive.param("part", null).blob();
      assertTrue(archive.param("part", null).compressed());
      for (Map.Entry<String, byte[]> e : expected.entrySet()) {
        try (java.io.InputStream in = archive.entryStream(e.getKey())) {
          java.io.ByteArrayOutputStream got = new java.io.ByteArrayOutputStream();
          for (int b; (b = in.read()) != -1;) {
            assertTrue(b >= 0 && b <= 255);
            got.write(b);
          }
          assertArrayEquals(e.getKey(), e.getValue(), got.toByteArray());
          assertEquals(-1, in.read());
        }
      }
      // read() costs what read(b, 0, 1) into a kept array costs: no new
      // byte[1] (16 bytes on the heap) per byte. Counted by the JVM per
      // thread; the same reads each way, after a warm-up of both.
      com.sun.management.ThreadMXBean threads =
          (com.sun.management.ThreadMXBean)
              java.lang.management.ManagementFactory.getThreadMXBean();
      long thread = Thread.currentThread().getId();
      byte[] one = new byte[1];
      final int reads = 40_000;
      long[] singles = new long[2];
      for (int round = 0; round < 2; round++) {
        try (java.io.InputStream a = archive.entryStream(blob);
             java.io.InputStream b = archive.entryStream(blob)) {
          long before = threads.getThreadAllocatedBytes(thread);
          for (int i = 0; i < reads; i++) a.read();
          long middle = threads.getThreadAllocatedBytes(thread);
          for (int i = 0; i < reads; i++) b.read(one, 0, 1);
          long after = threads.getThreadAllocatedBytes(thread);
          singles[0] = middle - before;
          singles[1] = after - middle;
        }
      }
      assertTrue("read(): " + singles[0] + " bytes allocated, read(b, 0, 1): " + singles[1],
          singles[0] - singles[1] < 4L * reads);
    }
  }

  @Test
  public void aWholeDeflatedEntryIsReadIntoItsArrayInBoundedNativeMemory() throws Exception {
    // 64 MiB of zeros, deflated to a few KiB: the read decompresses into the
    // byte[] it returns (in a heap touched in advance: no new pages), so the
    // process's peak rises by a bounded buffer, not by a native copy of the
    // entry (which, grown as it was decompressed, rose by 64 MiB or more).
    final int size = 64 << 20;
    Archive.save(scratch.archive(), "v1", Map.of("zeros", Tensor.of(new float[size / 4])),
        org.modelzip.SaveOptions.defaults().compress(true));
    String blob;
    try (Archive archive = Archive.open(scratch.archive())) {
      Param p = archive.param("zeros", null);
      assertTrue(p.compressed());
      blob = p.blob();
      assertTrue(archive.entrySize(blob) > size);
    }
    TestSupport.Run r =
        TestSupport.runOk(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xms320m", "-Xmx320m", "-XX:+AlwaysPreTouch",
            "-Djava.library.path=" + System.getProperty("java.library.path"), "-cp",
            System.getProperty("java.class.path"), EntryMemoryProbe.class.getName(),
            scratch.archive(), blob);
    org.junit.Assume.assumeFalse(
        "peak RSS cannot be reset here", r.out().trim().equals("unsupported"));
    long rise = Long.parseLong(r.out().trim());
    assertTrue("peak memory rose by " + rise + " bytes reading " + size, rise < (16 << 20));
  }

  @Test
  public void anEntryStreamChecksTheEntryAtItsEnd() throws Exception {
    // cut.bin: the first half of the deflated data of 6 MiB; crc.bin: whole,
    // with a wrong CRC-32; lie.bin: declares 4 MiB and holds 1 MiB.
    byte[] data = noise(6 << 20);
    byte[] packed = deflateRaw(data);
    CRC32 crc = new CRC32();
    crc.update(data);
    byte[] small = java.util.Arrays.copyOf(data, 1 << 20);
    Path file = Paths.get(scratch.file("deflated.zip"));
    rawZip(file,
        List.of(storedEntry("modelzip.toml", "format_version = 1\n"), storedEntry("tags.txt", ""),
            new RawEntry("cut.bin", 8, crc.getValue(),
                java.util.Arrays.copyOf(packed, packed.length / 2), data.length),
            new RawEntry("crc.bin", 8, crc.getValue() ^ 1, packed, data.length),
            new RawEntry("lie.bin", 8, 0, deflateRaw(small), 4L * small.length)),
        null, 0);
    try (Archive archive = Archive.open(file.toString())) {
      for (String name : List.of("cut.bin", "crc.bin", "lie.bin")) {
        try (java.io.InputStream in = archive.entryStream(name)) {
          byte[] first = in.readNBytes(1 << 19);  // before the damage: read
          assertArrayEquals(name, java.util.Arrays.copyOf(data, 1 << 19), first);
          // The InputStream contract: an IOException, the library's error its cause.
          ModelzipIOException e = assertThrows(ModelzipIOException.class, in::readAllBytes);
          assertEquals(e.getMessage(), ModelzipException.Code.CORRUPT, e.code());
          assertEquals(name, e.entry());
          assertEquals(file.toString(), e.archive());
          assertEquals(e.getMessage(), e.error().getMessage());
          assertEquals(e.error(), e.getCause());
          ModelzipIOException again = assertThrows(ModelzipIOException.class, in::read);
          assertEquals(e.getMessage(), again.getMessage());
        }
      }
      // The CRC-32 is checked by the read that returns the last bytes.
      try (java.io.InputStream in = archive.entryStream("crc.bin")) {
        assertEquals(data.length - 1, in.readNBytes(data.length - 1).length);
        ModelzipIOException e = assertThrows(ModelzipIOException.class, in::read);
        assertTrue(e.getMessage(), e.getMessage().contains("CRC-32"));
      }
      // Every InputStream method that reads says so with an IOException,
      // which code written for any InputStream catches.
      List<String> caught = new ArrayList<>();
      List<Map.Entry<String, StreamUse>> uses = List.of(Map.entry("read()",
                                                            in -> {
                                                              while (in.read() >= 0) {
                                                              }
                                                            }),
          Map.entry("read(byte[])",
              in -> {
                while (in.read(new byte[4096]) >= 0) {
                }
              }),
          Map.entry("readAllBytes", java.io.InputStream::readAllBytes),
          Map.entry("readNBytes", in -> in.readNBytes(data.length)),
          Map.entry(
              "readNBytes(byte[])", in -> in.readNBytes(new byte[data.length], 0, data.length)),
          Map.entry("skip", in -> in.skip(data.length)),
          Map.entry("skipNBytes", in -> in.skipNBytes(data.length)),
          Map.entry("transferTo", in -> in.transferTo(java.io.OutputStream.nullOutputStream())));
      for (Map.Entry<String, StreamUse> use : uses) {
        try (java.io.InputStream in = archive.entryStream("cut.bin")) {
          use.getValue().read(in);
        } catch (java.io.IOException e) {
          caught.add(use.getKey());
        }
      }
      assertEquals(
          uses.stream().map(Map.Entry::getKey).collect(java.util.stream.Collectors.toList()),
          caught);
    }
  }

  /** A use of an InputStream that may throw what InputStream methods throw. */
  private interface StreamUse {
    void read(java.io.InputStream in) throws java.io.IOException;
  }

  private static Map<String, Number> numbers(Object... keyThenValue) {
    Map<String, Number> out = new LinkedHashMap<>();
    for (int i = 0; i < keyThenValue.length; i += 2) {
      out.put((String) keyThenValue[i], (Number) keyThenValue[i + 1]);
    }
    return out;
  }

  @Test
  public void trainingConfigWrittenByPythonReadsWithEveryField() throws Exception {
    TestSupport.python("training", scratch.archive(), "t1");
    Archive.save(scratch.archive(), "plain", Map.of("w", Tensor.of(new float[] {1, 2})));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(Optional.empty(), archive.trainingConfig(null));
      TrainingConfig c = archive.trainingConfig("T1").orElseThrow();
      // interop.py's TRAINING.
      assertEquals("AdamW", c.updater().type());
      assertEquals(Map.of("learning_rate", 0.01, "beta1", 0.8, "beta2", 0.99, "epsilon", 1e-7,
          "weight_decay", 0.125), c.updater().parameters());
      assertEquals(List.of("learning_rate", "beta1", "beta2", "epsilon", "weight_decay"),
          new ArrayList<>(c.updater().parameters().keySet()));  // schema order
      TrainingConfig.Schedule lr = c.learningRateSchedule().orElseThrow();
      assertEquals("RampSchedule", lr.name());
      assertEquals(Optional.empty(), lr.type());
      assertEquals(numbers("num_iterations", 100L), lr.parameters());
      TrainingConfig.Schedule base = lr.base().orElseThrow();
      assertEquals("StepSchedule", base.name());
      assertEquals(Optional.of("epoch"), base.type());
      assertEquals(numbers("initial_value", 0.5, "decay_rate", 0.25, "step", 3.0),
          base.parameters());
      assertEquals(Optional.empty(), base.base());
      List<TrainingConfig.Regularization> r = c.regularization();
      assertEquals(3, r.size());
      assertEquals("l2", r.get(0).type());
      assertTrue(r.get(0).applyLearningRate());
      assertEquals("FixedSchedule", r.get(0).coefficient().name());
      assertEquals(numbers("value", 0.0625), r.get(0).coefficient().parameters());
      assertEquals("weight_decay", r.get(1).type());
      assertFalse(r.get(1).applyLearningRate());
      assertEquals("MapSchedule", r.get(1).coefficient().name());
      assertEquals(Optional.of("iteration"), r.get(1).coefficient().type());
      assertEquals(List.of(new TrainingConfig.Step(0, 0.5), new TrainingConfig.Step(10, 0.25)),
          r.get(1).coefficient().steps());
      assertEquals("l1", r.get(2).type());
      // A count beyond 2^53 arrives exactly (a Long, not a double).
      assertEquals(numbers("initial_value", 2.0, "power", 1.5, "max_iterations",
          9007199254740993L), r.get(2).coefficient().parameters());
      assertFalse(c.minimize());
      assertEquals(List.of("in: x"), c.featureMapping());
      assertEquals(List.of("y"), c.labelMapping());
      assertEquals(List.of(), c.featureMaskMapping());
      assertEquals(List.of("m\u00e9"), c.labelMaskMapping());
      assertEquals(List.of("loss"), c.lossVariables());
      assertEquals(1234, c.iterationCount());
      assertEquals(5, c.epochCount());
      assertEquals(Map.of("seed", "42", "loader", "shard-3\u00e9"), c.properties());
      assertEquals(c, archive.trainingConfig("t1").orElseThrow());
      assertThrows(NoSuchElementException.class, () -> archive.trainingConfig("t2"));
    }
  }

  @Test
  public void anEmptyTagMeansTheNewestInReadsAsInCppAndPython() throws Exception {
    Archive.save(scratch.archive(), "a", Map.of("w", Tensor.of(new float[] {1, 2})));
    Archive.save(scratch.archive(), "b", Map.of("w", Tensor.of(new float[] {3, 4})),
        Map.of("w", Map.of("M", Tensor.of(new float[] {5, 6}))),
        org.modelzip.SaveOptions.defaults());
    try (Archive archive = Archive.open(scratch.archive())) {
      assertArrayEquals(new float[] {3, 4}, archive.tensor("w", "").toFloatArray(), 0f);
      assertArrayEquals(new float[] {3, 4}, archive.load("").get("w").toFloatArray(), 0f);
      assertEquals(archive.params(null), archive.params(""));
      assertEquals(archive.param("w", null), archive.param("w", ""));
      assertEquals(archive.updaterStates(null), archive.updaterStates(""));
      assertArrayEquals(new float[] {5, 6},
          archive.updaterState("w", "M", "").toFloatArray(), 0f);
      assertEquals(Optional.empty(), archive.trainingConfig(""));
    }
    // Python reads "" as the newest tag too.
    Object python = Json.parse(TestSupport.python("param", scratch.archive(), "", "w").out());
    assertEquals(List.of("3.0", "4.0"), ((Map<?, ?>) python).get("values"));
    // No tag is named "": a save refuses it, and removeTag finds none (it
    // never removes the newest).
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "", Map.of("w", Tensor.of(new float[] {1}))));
    assertEquals(ModelzipException.Code.INVALID_ARGUMENT, e.code());
    assertThrows(NoSuchElementException.class, () -> Archive.removeTag(scratch.archive(), ""));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("a", "b"), archive.tags());
    }
  }

  @Test
  public void aDamagedTrainingConfigIsAnErrorNamingItsEntry() throws Exception {
    TestSupport.python("training", scratch.archive(), "t1");
    Path damaged = Paths.get(scratch.file("damaged.zip"));
    try (ZipFile in = new ZipFile(scratch.archive());
         ZipOutputStream out = new ZipOutputStream(Files.newOutputStream(damaged))) {
      for (ZipEntry e : Collections.list(in.entries())) {
        byte[] data = in.getInputStream(e).readAllBytes();
        if (e.getName().equals("t1/trainingConfig.fb")) {
          data = java.util.Arrays.copyOf(data, data.length / 2);  // cut in half
        }
        out.putNextEntry(new ZipEntry(e.getName()));
        out.write(data);
        out.closeEntry();
      }
    }
    try (Archive archive = Archive.open(damaged.toString())) {
      ModelzipException e =
          assertThrows(ModelzipException.class, () -> archive.trainingConfig("t1"));
      assertEquals(e.getMessage(), ModelzipException.Code.CORRUPT, e.code());
      assertEquals(damaged.toString(), e.archive());
      assertEquals("t1/trainingConfig.fb", e.entry());
      assertArrayEquals(new float[] {1, 2}, archive.tensor("w", "t1").toFloatArray(), 0f);
    }
  }
}
