package org.modelzip.tests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ReadOnlyBufferException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.Tensor;

/**
 * Buffers are views of the mapped file that keep the mapping alive by
 * themselves, and every mapping goes away once nothing reaches it: counted
 * as the lines of /proc/self/maps naming the archive.
 */
public class ZeroCopyTest {
  private static final int N = 1 << 18;  // float32 elements: 1 MiB
  @Rule public final ScratchFolder scratch = new ScratchFolder();
  private Path file;

  @Before
  public void setUp() throws Exception {
    file = Paths.get(scratch.file("big.zip"));
    float[] values = new float[N];
    for (int i = 0; i < N; i++) {
      values[i] = i;
    }
    Archive.save(file.toString(), "v", Map.of("w", Tensor.of(values)));
  }

  /** A buffer of tensor w, read and then left with only the buffer reaching the file. */
  private ByteBuffer orphanBuffer() {
    try (Archive archive = Archive.open(file.toString()); Tensor w = archive.tensor("w", null)) {
      assertTrue(w.isMapped());
      return w.buffer();
    }
  }

  @Test
  public void buffersOutliveTheArchiveAndTheTensor() throws Exception {
    assertEquals(0, TestSupport.mappings(file));
    ByteBuffer buffer = orphanBuffer();
    ByteBuffer tail = buffer.slice(4 * (N - 8), 32).order(ByteOrder.LITTLE_ENDIAN);
    buffer = null;
    for (int i = 0; i < 5; i++) {
      System.gc();
      Thread.sleep(10);
    }
    // Still mapped and still right: only the slice reaches the mapping.
    assertTrue(TestSupport.mappings(file) > 0);
    for (int i = 0; i < 8; i++) {
      assertEquals(N - 8 + i, tail.getFloat(4 * i), 0f);
    }
    tail = null;
    assertTrue("the mapping is released once no buffer reaches it",
        TestSupport.collectUntil(() -> mappingsOf(file) == 0));
  }

  @Test
  public void buffersAreReadOnlyDirectLittleEndianViews() {
    try (Archive archive = Archive.open(file.toString())) {
      Tensor w = archive.tensor("w", null);
      ByteBuffer a = w.buffer();
      ByteBuffer b = w.buffer();
      assertTrue(a.isDirect());
      assertTrue(a.isReadOnly());
      assertEquals(ByteOrder.LITTLE_ENDIAN, a.order());
      assertEquals(4L * N, a.capacity());
      assertEquals(4L * N, w.byteSize());
      assertThrows(ReadOnlyBufferException.class, () -> a.putFloat(0, 1f));
      a.position(400);
      assertEquals(0, b.position());  // each call gives its own position
      assertEquals(100f, a.getFloat(), 0f);
      ByteBuffer range = w.buffer(4L * 1000, 8);
      assertEquals(1000f, range.getFloat(0), 0f);
      assertEquals(1001f, range.getFloat(4), 0f);
      assertThrows(IndexOutOfBoundsException.class, () -> w.buffer(4L * N - 4, 8));
      assertThrows(IndexOutOfBoundsException.class, () -> w.buffer(-1, 4));
    }
  }

  @Test
  public void openingAndDroppingArchivesLeaksNoMapping() throws Exception {
    long before = TestSupport.mappings(file);
    assertEquals(0, before);
    float sum = 0;
    for (int i = 0; i < 300; i++) {
      Archive archive = Archive.open(file.toString());
      Tensor w = archive.tensor("w", null);
      ByteBuffer buffer = w.buffer();
      sum += buffer.getFloat(4 * (i % N));
      if (i % 2 == 0) {  // half closed explicitly, half left to the collector
        w.close();
        archive.close();
      }
      if (i == 150) {
        assertNotEquals(0, TestSupport.mappings(file));
      }
    }
    assertEquals(299 * 300 / 2, sum, 0f);
    assertTrue("every mapping of the 300 opens is released",
        TestSupport.collectUntil(() -> mappingsOf(file) == before));
  }

  @Test
  public void closingTheTensorReleasesAMappingNoBufferReaches() throws Exception {
    Archive archive = Archive.open(file.toString());
    Tensor w = archive.tensor("w", null);
    float[] values = w.toFloatArray();  // a copy: no buffer made
    assertEquals(N - 1, values[N - 1], 0f);
    archive.close();
    assertTrue(TestSupport.mappings(file) > 0);
    w.close();
    assertEquals("released at close(), without the collector", 0, TestSupport.mappings(file));
  }

  private static long mappingsOf(Path file) {
    try {
      return TestSupport.mappings(file);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  @Test
  public void aTensorIsReadAsPartsOfAnySizeAndMadeBackFromThem() throws Exception {
    // Parts of 4093 bytes (splitting elements), 4096 bytes and the default
    // size: each a zero-copy view of its range, together the whole tensor;
    // a tensor made from them (and from heap, read-only and direct buffers
    // mixed) holds the same bytes.
    try (Archive archive = Archive.open(file.toString()); Tensor w = archive.tensor("w", null)) {
      ByteBuffer whole = w.buffer();
      for (int partBytes : new int[] {4093, 4096, Tensor.DEFAULT_PART_BYTES}) {
        ByteBuffer[] parts = w.buffers(partBytes);
        assertEquals("parts of " + partBytes, (4L * N + partBytes - 1) / partBytes, parts.length);
        long at = 0;
        for (ByteBuffer part : parts) {
          assertTrue(part.isDirect() && part.isReadOnly());
          assertEquals(ByteOrder.LITTLE_ENDIAN, part.order());
          assertEquals(Math.min(partBytes, 4L * N - at), part.remaining());
          assertEquals(whole.slice((int) at, part.remaining()), part);
          at += part.remaining();
        }
        assertEquals(4L * N, at);
        try (Tensor again = Tensor.of("float32", parts, w.shape())) {
          assertEquals(whole, again.buffer());
        }
      }
      assertEquals(1, w.buffers().length);
      assertThrows(IllegalArgumentException.class, () -> w.buffers(0));
      assertThrows(IllegalArgumentException.class, () -> w.buffers(-4));
    }
    // Parts of every kind, positions kept, the empty part too.
    ByteBuffer heap = ByteBuffer.wrap(new byte[] {9, 1, 2, 3});
    heap.position(1);
    ByteBuffer readOnly = ByteBuffer.wrap(new byte[] {4, 5, 6, 7, 8}).asReadOnlyBuffer();
    ByteBuffer direct = ByteBuffer.allocateDirect(6).put(new byte[] {0, 9, 10, 11, 12, 0});
    direct.position(1).limit(5);
    ByteBuffer[] mixed = {heap, ByteBuffer.allocate(0), readOnly, direct};
    try (Tensor t = Tensor.of("uint8", mixed, null)) {
      assertEquals(java.util.Arrays.toString(new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}),
          java.util.Arrays.toString(t.toByteArray()));
      assertEquals(1, heap.position());
      assertEquals(1, direct.position());
    }
    try (Tensor t = Tensor.of("int16", mixed, new long[] {2, 3})) {
      assertEquals(1 | 2 << 8, t.toShortArray()[0]);
    }
    IllegalArgumentException odd = assertThrows(IllegalArgumentException.class,
        () -> Tensor.of("int32", new ByteBuffer[] {heap, direct}, null));
    assertEquals(
        "7 bytes are not a whole number of \"int32\" elements (4 bytes each)", odd.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> Tensor.of("int32", new ByteBuffer[] {heap, direct}, new long[] {3}));
    assertThrows(
        NullPointerException.class, () -> Tensor.of("int8", new ByteBuffer[] {heap, null}, null));
  }
}
