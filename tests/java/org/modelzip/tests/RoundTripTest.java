package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.ModelzipException;
import org.modelzip.Param;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;

/**
 * Java -> Python -> the modelzip command -> Java, with one tensor of every
 * data type; each side checks the values against its own copy of the
 * formulas (Values.java, tests/java/interop.py). Tests that need Python are
 * skipped without the bindings.
 */
public class RoundTripTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  @Test
  public void tensorsAreMadeFromTheBytesOfByteBuffers() throws Exception {
    float[] values = {1, -2.5f, Float.NaN, 0x1p-149f, Float.NEGATIVE_INFINITY, -0f};
    ByteBuffer direct = ByteBuffer.allocateDirect(4 + 4 * values.length + 4)
        .order(ByteOrder.LITTLE_ENDIAN);
    direct.putInt(0x7f7f7f7f);  // before the position and after the limit: not taken
    for (float v : values) direct.putFloat(v);
    direct.putInt(0x7f7f7f7f).position(4).limit(4 + 4 * values.length);
    ByteBuffer heap = ByteBuffer.allocate(direct.capacity());
    heap.put(direct.duplicate().clear()).position(4).limit(4 + 4 * values.length);
    // The bytes as stored: the buffer's order is not looked at.
    ByteBuffer bigEndianView = heap.asReadOnlyBuffer().order(ByteOrder.BIG_ENDIAN);
    for (ByteBuffer b : List.of(direct, heap, bigEndianView)) {
      Tensor t = Tensor.of("float32", b, new long[] {2, 3});
      assertEquals(4, b.position());
      assertEquals(4 + 4 * values.length, b.limit());
      assertArrayEquals(new long[] {2, 3}, t.shape());
      float[] read = t.toFloatArray();
      for (int i = 0; i < values.length; i++) {
        assertEquals(Float.floatToRawIntBits(values[i]), Float.floatToRawIntBits(read[i]));
      }
      assertArrayEquals(new long[] {6}, Tensor.of("float32", b, null).shape());
      assertArrayEquals(new long[] {12}, Tensor.of("bfloat16", b, null).shape());
      assertArrayEquals(new long[] {3}, Tensor.of("complex64", b, null).shape());
    }
    // Saved and read back as the same tensor made from the float[].
    Archive.save(scratch.archive(), "b", Map.of("w", Tensor.of("float32", direct, new long[] {2, 3}),
        "scalar", Tensor.of("int32", direct.duplicate().limit(8), new long[0])));
    Archive.save(scratch.archive(), "a", Map.of("w", Tensor.of(values, 2, 3)));
    try (Archive archive = Archive.open(scratch.archive())) {
      Param w = archive.param("w", "a");
      assertTrue(w.shared());  // dedup found b's bytes: the same
      assertEquals("b", w.ownerTag());
      Tensor scalar = archive.tensor("scalar", "b");
      assertArrayEquals(new long[0], scalar.shape());
      assertArrayEquals(new int[] {Float.floatToRawIntBits(values[0])}, scalar.toIntArray());
    }
    assertThrows(IllegalArgumentException.class, () -> Tensor.of("float33", direct, null));
    assertThrows(IllegalArgumentException.class, () -> Tensor.of("string", direct, null));
    IllegalArgumentException partial = assertThrows(IllegalArgumentException.class,
        () -> Tensor.of("float32", direct.duplicate().limit(11), null));
    assertEquals("7 bytes are not a whole number of \"float32\" elements (4 bytes each)",
        partial.getMessage());
    // A shape that does not fit: the caller's mistake, the library's error its cause.
    IllegalArgumentException mismatch = assertThrows(
        IllegalArgumentException.class, () -> Tensor.of("float32", direct, new long[] {2, 4}));
    assertEquals(
        ModelzipException.Code.INVALID_ARGUMENT, ((ModelzipException) mismatch.getCause()).code());
    assertTrue(mismatch.getMessage(), mismatch.getMessage().contains("needs 32 bytes, got 24"));
  }

  private static byte[] bytes(ByteBuffer buffer) {
    byte[] out = new byte[buffer.remaining()];
    buffer.get(out);
    return out;
  }

  @Test
  public void javaToPythonToCliAndBack() throws Exception {
    Map<String, Tensor> mine = Values.all();
    Archive.save(scratch.archive(), "java", mine);
    TestSupport.python("check", scratch.archive(), "java");
    TestSupport.cli("verify", scratch.archive());
    // The command prints the stored little-endian bytes: the same as Java's buffers.
    for (String dtype : List.of("float32", "uint64", "bfloat16", "bool")) {
      assertArrayEquals(dtype, bytes(mine.get(dtype).buffer()),
          TestSupport.cli("cat", scratch.archive(), dtype, "--tag", "java").stdout);
    }

    TestSupport.python("write", scratch.archive(), "py");
    assertEquals("java\npy\n", TestSupport.cli("tags", scratch.archive()).out());
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("java", "py"), archive.tags());
      Values.checkAll(archive.load("py"));
      for (Param p : archive.params("py")) {
        assertEquals(p.name(), p.dtype());
      }
    }

    Archive.removeTag(scratch.archive(), "java");
    assertEquals("py\n", TestSupport.cli("tags", scratch.archive()).out());
    TestSupport.cli("verify", scratch.archive());
    TestSupport.python("check", scratch.archive(), "py");
  }

  @Test
  public void boolBytesOtherThanOneAreTrueBooleans() throws Exception {
    // numpy writes whatever bytes a bool array holds; any non-zero byte is true.
    TestSupport.python("bools", scratch.archive(), "b");
    try (Archive archive = Archive.open(scratch.archive())) {
      Tensor b = archive.tensor("b", null);
      assertEquals(2, b.buffer().get(2));  // the stored byte
      boolean[] values = b.toBooleanArray();
      // Arrays.equals compares the JVM's bytes: a raw 2 or 255 is not true there.
      assertTrue(Arrays.toString(values),
          Arrays.equals(new boolean[] {false, true, true, true}, values));
      assertFalse(values[2] ^ true);
      assertFalse(values[3] ^ true);
    }
  }

  @Test
  public void deflatedTensorsFromPythonAreReadAsCopies() throws Exception {
    TestSupport.python("write", scratch.archive(), "packed", "--compress");
    try (Archive archive = Archive.open(scratch.archive())) {
      for (Param p : archive.params(null)) {
        assertTrue(p.name(), p.compressed());
      }
      Map<String, Tensor> loaded = archive.load(null);
      Values.checkAll(loaded);
      assertFalse(loaded.get("float32").isMapped());
      ByteBuffer b = loaded.get("float32").buffer();
      assertTrue(b.isDirect());
      assertEquals(-2f, b.getFloat(0), 0f);
    }
  }

  @Test
  public void quantizedTagsFromTheCliAreReadAndDequantized() throws Exception {
    float[] weights = new float[64 * 64];
    for (int i = 0; i < weights.length; i++) {
      weights[i] = (float) Math.sin(i * 0.01) * 3f;
    }
    Archive.save(scratch.archive(), "v", Map.of("fc.weight", Tensor.of(weights, 64, 64)));
    TestSupport.cli("quantize", scratch.archive(), "--from", "v", "--tag", "q",
        "--scheme", "int8-per-tensor", "--params", "fc.weight");
    try (Archive archive = Archive.open(scratch.archive())) {
      Param p = archive.params("q").get(0);
      assertEquals("quantized", p.layout());
      assertEquals("float32", p.dtype());
      Tensor q = archive.tensor("fc.weight", "q");
      assertEquals("quantized", q.layout());
      assertEquals(64 * 64, q.buffer().remaining());  // one stored int8 per value
      assertThrows(UnsupportedOperationException.class, q::toFloatArray);
      Tensor dense = q.dequantize();
      assertEquals("dense", dense.layout());
      assertArrayEquals(new long[] {64, 64}, dense.shape());
      float[] back = dense.toFloatArray();
      float step = 6f / 255;  // the values span [-3, 3] in 255 steps
      for (int i = 0; i < back.length; i++) {
        assertEquals("value " + i, weights[i], back[i], step / 2 + 1e-5f);
      }
    }
  }

  @Test
  public void float8TensorsKeepTheirBitsThroughTheCliAndSafetensors() throws Exception {
    // e4m3fn 1.0, -448, 2^-9, NaN; e5m2 1.0, +inf, -3 * 2^-16 (FORMAT.md section 6).
    byte[] e4 = {0x38, (byte) 0xFE, 0x01, 0x7F};
    byte[] e5 = {0x3C, 0x7C, (byte) 0x83};
    Archive.save(scratch.archive(), "fp8",
        Map.of("e4", Tensor.ofFloat8E4M3fn(e4, 2, 2), "e5", Tensor.ofFloat8E5M2(e5)));
    assertArrayEquals(e4, TestSupport.cli("cat", scratch.archive(), "e4").stdout);
    String listing = TestSupport.cli("ls", scratch.archive(), "--json").out();
    assertTrue(listing, listing.contains("\"dtype\": \"float8_e4m3fn\""));
    assertTrue(listing, listing.contains("\"dtype\": \"float8_e5m2\""));
    try (Archive archive = Archive.open(scratch.archive())) {
      for (Param p : archive.params("fp8")) {
        assertEquals(p.name().equals("e4") ? "float8_e4m3fn" : "float8_e5m2", p.dtype());
      }
      Tensor t = archive.tensor("e4", "fp8");
      assertEquals("float8_e4m3fn", t.dtype());
      assertArrayEquals(new long[] {2, 2}, t.shape());
      assertArrayEquals(e4, t.toByteArray());
      assertThrows(IllegalArgumentException.class, t::toShortArray);
      assertArrayEquals(e5, archive.tensor("e5", "fp8").toByteArray());
    }
    // Exported to safetensors under the library's names, with the same bytes.
    String out = scratch.file("fp8.safetensors");
    TestSupport.cli("export", scratch.archive(), out);
    byte[] file = Files.readAllBytes(Paths.get(out));
    int headerSize = (int) ByteBuffer.wrap(file).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
    String header = new String(file, 8, headerSize, StandardCharsets.UTF_8);
    assertTrue(header, header.startsWith(
        "{\"e4\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,2],\"data_offsets\":[0,4]},"
        + "\"e5\":{\"dtype\":\"F8_E5M2\",\"shape\":[3],\"data_offsets\":[4,7]}}"));
    assertArrayEquals(new byte[] {0x38, (byte) 0xFE, 0x01, 0x7F, 0x3C, 0x7C, (byte) 0x83},
        Arrays.copyOfRange(file, 8 + headerSize, file.length));
    // A float8 tensor is made from bytes only.
    assertThrows(IllegalArgumentException.class,
        () -> Tensor.of("float8_e5m2", new short[] {1}, null));
  }

  @Test
  public void optimizerStateWrittenByPythonIsReadByVariableAndState() throws Exception {
    TestSupport.python("updater", scratch.archive(), "epoch-1");
    Archive.save(scratch.archive(), "plain", Map.of("w", Tensor.of(new float[] {3})));
    try (Archive archive = Archive.open(scratch.archive())) {
      List<Param> states = archive.updaterStates("EPOCH-1");
      assertEquals(2, states.size());
      assertEquals("w", states.get(0).name());
      assertEquals("M", states.get(0).state());
      assertEquals("V", states.get(1).state());
      assertEquals("float32", states.get(1).dtype());
      assertArrayEquals(new long[] {2}, states.get(1).shape());
      assertTrue(states.get(0).toString(), states.get(0).toString().startsWith("w M float32[2]"));
      assertEquals("", archive.params("epoch-1").get(0).state());  // a parameter has none
      assertArrayEquals(new float[] {0.25f, -1}, archive.updaterState("w", "M", "epoch-1")
          .toFloatArray(), 0f);
      Tensor v = archive.updaterState("w", "V", "epoch-1");
      assertTrue(v.isMapped());
      assertArrayEquals(new float[] {0.5f, 4}, v.toFloatArray(), 0f);
      Tensor copied = archive.updaterState("w", "V", "epoch-1", true);  // CRC-checked copy
      assertFalse(copied.isMapped());
      assertArrayEquals(new float[] {0.5f, 4}, copied.toFloatArray(), 0f);
      copied.close();
      assertEquals("updater state 'V' of 'w' float32[2] of '" + scratch.archive()
          + "' tag 'epoch-1' is closed",
          assertThrows(IllegalStateException.class, copied::toFloatArray).getMessage());
      assertEquals(List.of(), archive.updaterStates(null));  // "plain" has no updater.txt
      NoSuchElementException missing = assertThrows(NoSuchElementException.class,
          () -> archive.updaterState("w", "M", null));
      assertTrue(missing.getMessage(), missing.getMessage().contains("'plain'"));
      assertThrows(NoSuchElementException.class, () -> archive.updaterState("w", "X", "epoch-1"));
      assertThrows(NoSuchElementException.class, () -> archive.updaterStates("nope"));
    }
  }

  @Test
  public void optimizerStateWrittenByJavaIsReadByPythonAndJava() throws Exception {
    Map<String, Map<String, Tensor>> adam = new LinkedHashMap<>();
    adam.put("w", new LinkedHashMap<>());
    adam.get("w").put("M", Tensor.of(new float[] {0.25f, -1}));
    adam.get("w").put("V", Tensor.of(new float[] {0.5f, 4}));
    Map<String, Tensor> params = Map.of("w", Tensor.of(new float[] {1, 2}));
    Archive.save(scratch.archive(), "epoch-1", params, adam, SaveOptions.defaults());
    TestSupport.python("updater-check", scratch.archive(), "epoch-1");
    // The next epoch's unchanged state is deduplicated against this one's.
    Archive.save(scratch.archive(), "epoch-2", params, adam, SaveOptions.defaults().keepLast(5));
    try (Archive archive = Archive.open(scratch.archive())) {
      List<Param> states = archive.updaterStates(null);
      assertEquals(List.of("M", "V"), List.of(states.get(0).state(), states.get(1).state()));
      assertTrue(states.get(0).toString(), states.get(0).shared());
      assertEquals("epoch-1", states.get(0).ownerTag());
      assertArrayEquals(new float[] {0.5f, 4}, archive.updaterState("w", "V", null).toFloatArray(),
          0f);
      assertEquals(List.of(), archive.verify());
    }
    // Java-side and library errors name the save and the state.
    adam.get("w").get("M").close();
    IllegalStateException closed = assertThrows(IllegalStateException.class,
        () -> Archive.save(scratch.archive(), "epoch-3", params, adam, SaveOptions.defaults()));
    assertTrue(closed.getMessage(), closed.getMessage().startsWith(
        scratch.archive() + ": tag 'epoch-3': updater state 'M' of 'w': "));
    ModelzipException empty = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "epoch-3", params,
            Map.of("", Map.of("M", Tensor.of(new float[] {1}))), SaveOptions.defaults()));
    assertEquals(ModelzipException.Code.INVALID_ARGUMENT, empty.code());
    assertEquals("epoch-3", empty.tag());
  }

  @Test
  public void complexTensorsInterleaveRealAndImaginaryParts() throws Exception {
    // complex64 [[1 + 2i, -0.5], [-1i, 4 + 0.25i]]; complex128 [3 - 4i].
    float[] c64 = {1, 2, -0.5f, 0, 0, -1, 4, 0.25f};
    double[] c128 = {3, -4};
    Archive.save(scratch.archive(), "cplx",
        Map.of("spectral", Tensor.ofComplex64(c64, 2, 2), "wide", Tensor.ofComplex128(c128)));
    // The command prints the stored bytes: little-endian parts, real first.
    ByteBuffer expected = ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN);
    for (float f : c64) {
      expected.putFloat(f);
    }
    assertArrayEquals(expected.array(), TestSupport.cli("cat", scratch.archive(), "spectral").stdout);
    String listing = TestSupport.cli("ls", scratch.archive(), "--json").out();
    assertTrue(listing, listing.contains("\"dtype\": \"complex64\""));
    assertTrue(listing, listing.contains("\"dtype\": \"complex128\""));
    try (Archive archive = Archive.open(scratch.archive())) {
      for (Param p : archive.params("cplx")) {
        assertEquals(p.name().equals("spectral") ? "complex64" : "complex128", p.dtype());
      }
      Tensor t = archive.tensor("spectral", "cplx");
      assertEquals("complex64", t.dtype());
      assertArrayEquals(new long[] {2, 2}, t.shape());
      assertEquals(4, t.numel());
      assertEquals(32, t.byteSize());
      assertArrayEquals(c64, t.toFloatArray(), 0f);
      assertEquals(-0.5f, t.buffer().getFloat(8), 0f);  // element 1, real part
      double[] widened = new double[c64.length];
      for (int i = 0; i < c64.length; i++) {
        widened[i] = c64[i];
      }
      assertArrayEquals(widened, t.toDoubleArray(), 0.0);  // every float is a double
      Tensor w = archive.tensor("wide", "cplx");
      assertArrayEquals(new long[] {1}, w.shape());
      assertArrayEquals(c128, w.toDoubleArray(), 0.0);
    }
    // Made from the generic factory too; an odd number of parts is no tensor.
    try (Tensor g = Tensor.of("complex128", new double[] {1, 2, 3, 4}, null)) {
      assertArrayEquals(new long[] {2}, g.shape());
    }
    assertThrows(IllegalArgumentException.class, () -> Tensor.ofComplex64(new float[] {1, 2, 3}));
    assertThrows(IllegalArgumentException.class,
        () -> Tensor.of("complex64", new double[] {1, 2}, null));
  }
}
