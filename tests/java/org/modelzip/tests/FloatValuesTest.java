package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.Tensor;

/**
 * toFloatArray() and toDoubleArray() give the numbers of every
 * floating-point type, widened exactly, while toShortArray() and
 * toByteArray() keep giving the stored bits; the wrong accessor throws. The
 * expected numbers come from the formats' definitions (FORMAT.md section 6),
 * written out here with Math.scalb, for every bit pattern of each narrow
 * type.
 */
public class FloatValuesTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  /**
   * The value of a binary floating-point pattern with {@code ebits} exponent
   * and {@code mbits} mantissa bits (bias 2^(ebits-1) - 1), by definition:
   * exponent 0 subnormal, all ones infinity (mantissa 0) or NaN, unless
   * {@code e4m3fn}, where only S.1111.111 is NaN and there is no infinity.
   */
  static double definition(int bits, int ebits, int mbits, boolean e4m3fn) {
    int bias = (1 << (ebits - 1)) - 1;
    int exponent = (bits >>> mbits) & ((1 << ebits) - 1);
    int mantissa = bits & ((1 << mbits) - 1);
    double sign = ((bits >>> (ebits + mbits)) & 1) != 0 ? -1.0 : 1.0;
    int allOnes = (1 << ebits) - 1;
    if (e4m3fn && exponent == allOnes && mantissa == (1 << mbits) - 1) return Double.NaN;
    if (!e4m3fn && exponent == allOnes) {
      return mantissa == 0 ? sign * Double.POSITIVE_INFINITY : Double.NaN;
    }
    if (exponent == 0) return sign * Math.scalb((double) mantissa, 1 - bias - mbits);
    return sign * Math.scalb(1.0 + Math.scalb((double) mantissa, -mbits), exponent - bias);
  }

  /** Every pattern of a 16-bit type: one tensor (also past the glue's chunks). */
  private static void checkEvery16BitPattern(String dtype, int ebits, int mbits) {
    short[] bits = new short[1 << 16];
    double[] expected = new double[bits.length];
    for (int i = 0; i < bits.length; i++) {
      bits[i] = (short) i;
      expected[i] = definition(i, ebits, mbits, false);
    }
    try (Tensor t = Tensor.of(dtype, bits, new long[] {256, 256})) {
      Values.checkNumbers(dtype, expected, t);
      assertArrayEquals(dtype + " bits", bits, t.toShortArray());
    }
  }

  @Test
  public void everyFloat16PatternDecodesExactly() {
    checkEvery16BitPattern("float16", 5, 10);
  }

  @Test
  public void everyBfloat16PatternDecodesExactly() {
    checkEvery16BitPattern("bfloat16", 8, 7);
  }

  @Test
  public void everyFloat8PatternDecodesExactly() {
    byte[] bits = new byte[256];
    double[] e4 = new double[256];
    double[] e5 = new double[256];
    for (int i = 0; i < 256; i++) {
      bits[i] = (byte) i;
      e4[i] = definition(i, 4, 3, true);
      e5[i] = definition(i, 5, 2, false);
    }
    try (Tensor t = Tensor.ofFloat8E4M3fn(bits, 16, 16)) {
      Values.checkNumbers("float8_e4m3fn", e4, t);
      assertArrayEquals(bits, t.toByteArray());
    }
    try (Tensor t = Tensor.ofFloat8E5M2(bits)) {
      Values.checkNumbers("float8_e5m2", e5, t);
      assertArrayEquals(bits, t.toByteArray());
    }
  }

  /** float8_e8m0fnu by definition: the byte e is 2^(e - 127), 0xFF NaN. */
  static double e8m0Definition(int bits) {
    return bits == 0xFF ? Double.NaN : Math.scalb(1.0, bits - 127);
  }

  /**
   * One FP4 E2M1 value (the low 4 bits of {@code nibble}) by definition:
   * sign bit 3, 2 exponent bits with bias 1 (0: subnormal, m * 2^-1), 1
   * mantissa bit; no infinity, no NaN.
   */
  static double e2m1Definition(int nibble) {
    int exponent = (nibble >>> 1) & 3;
    int mantissa = nibble & 1;
    double sign = (nibble & 8) != 0 ? -1.0 : 1.0;
    if (exponent == 0) return sign * Math.scalb((double) mantissa, -1);
    return sign * Math.scalb(1.0 + Math.scalb((double) mantissa, -1), exponent - 1);
  }

  /** The values of float4_e2m1fn_x2 bytes by definition: two each, the low nibble's first. */
  static double[] fp4Pairs(byte[] bits) {
    double[] values = new double[2 * bits.length];
    for (int i = 0; i < bits.length; i++) {
      values[2 * i] = e2m1Definition(bits[i] & 0xF);
      values[2 * i + 1] = e2m1Definition((bits[i] >>> 4) & 0xF);
    }
    return values;
  }

  @Test
  public void everyMxPatternDecodesExactly() {
    byte[] bits = new byte[256];
    double[] e8m0 = new double[256];
    for (int i = 0; i < 256; i++) {
      bits[i] = (byte) i;
      e8m0[i] = e8m0Definition(i);
    }
    try (Tensor t = Tensor.of("float8_e8m0fnu", bits, new long[] {16, 16})) {
      Values.checkNumbers("float8_e8m0fnu", e8m0, t);
      assertArrayEquals(bits, t.toByteArray());
    }
    // Every pair, five times over: 2560 values, past the glue's chunks.
    byte[] pairs = new byte[5 * 256];
    for (int i = 0; i < pairs.length; i++) pairs[i] = (byte) i;
    try (Tensor t = Tensor.of("float4_e2m1fn_x2", pairs, new long[] {5, 256})) {
      assertEquals(5 * 256, t.numel());
      Values.checkNumbers("float4_e2m1fn_x2", fp4Pairs(pairs), t);
      assertArrayEquals(pairs, t.toByteArray());
    }
  }

  @Test
  public void partsOfTheValuesAreTheSlicesOfTheWhole() {
    byte[] pairs = new byte[5 * 256];
    for (int i = 0; i < pairs.length; i++) pairs[i] = (byte) (i * 7);
    short[] halves = new short[3000];
    for (int i = 0; i < halves.length; i++) halves[i] = (short) (i * 21);
    List<Tensor> tensors = List.of(Tensor.of("float4_e2m1fn_x2", pairs, null),
        Tensor.ofFloat16(halves), Tensor.ofComplex64(new float[] {1, -2, 3.5f, Float.NaN}),
        Tensor.of(new double[] {0.1, 0.2, 0.3}), Tensor.of(new float[] {1, 2}));
    for (Tensor t : tensors) {
      double[] whole = t.toDoubleArray();
      // Odd starts (the high nibble of a pair, an imaginary part), past the glue's chunks.
      for (int first : new int[] {0, 1, 3, 1001}) {
        for (int count : new int[] {0, 1, 2, 1500}) {
          if (first + count > whole.length) continue;
          String what = t + " from " + first + ", " + count;
          assertArrayEquals(what, Values.doubleBits(Arrays.copyOfRange(whole, first, first + count)),
              Values.doubleBits(t.toDoubleArray(first, count)));
          if (!t.dtype().equals("float64")) {
            assertArrayEquals(what, Values.floatBits(
                Arrays.copyOfRange(t.toFloatArray(), first, first + count)),
                Values.floatBits(t.toFloatArray(first, count)));
          }
        }
      }
      assertEquals(0, t.toDoubleArray(whole.length, 0).length);
      assertThrows(IndexOutOfBoundsException.class, () -> t.toDoubleArray(whole.length, 1));
      assertThrows(IndexOutOfBoundsException.class, () -> t.toDoubleArray(-1, 1));
      assertThrows(IndexOutOfBoundsException.class, () -> t.toDoubleArray(0, -1));
      assertThrows(IndexOutOfBoundsException.class, () -> t.toDoubleArray(Long.MAX_VALUE, 1));
    }
    assertEquals(2 * pairs.length, tensors.get(0).toFloatArray().length);
    assertWrongAccessor("toDoubleArray()", () -> tensors.get(3).toFloatArray(0, 1));
    assertWrongAccessor("toIntArray()", () -> Tensor.of(new int[] {1}).toDoubleArray(0, 1));
  }

  @Test
  public void landmarksOfTheDefinitionsAreWhatTheFormatsSay() {
    // FORMAT.md section 6's MX values.
    assertEquals(1.0, e8m0Definition(0x7F), 0.0);
    assertEquals(2.0, e8m0Definition(0x80), 0.0);
    assertEquals(Math.scalb(1.0, -127), e8m0Definition(0x00), 0.0);
    assertEquals(Math.scalb(1.0, 127), e8m0Definition(0xFE), 0.0);
    assertArrayEquals(new double[] {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6},
        java.util.stream.IntStream.range(0, 16).mapToDouble(FloatValuesTest::e2m1Definition)
            .toArray(), 0.0);
    assertEquals(Double.doubleToRawLongBits(-0.0), Double.doubleToRawLongBits(e2m1Definition(8)));

    // The test's own decoder against values known independently of it.
    assertEquals(Math.scalb(1.0, -24), definition(0x0001, 5, 10, false), 0.0);
    assertEquals(65504.0, definition(0x7BFF, 5, 10, false), 0.0);
    assertEquals(Math.scalb(2.0 - Math.scalb(1.0, -7), 127), definition(0x7F7F, 8, 7, false), 0.0);
    assertEquals(Math.scalb(1.0, -133), definition(0x0001, 8, 7, false), 0.0);
    assertEquals(448.0, definition(0x7E, 4, 3, true), 0.0);
    assertEquals(Math.scalb(1.0, -9), definition(0x01, 4, 3, true), 0.0);
    assertEquals(57344.0, definition(0x7B, 5, 2, false), 0.0);
    assertEquals(Double.NEGATIVE_INFINITY, definition(0xFC, 5, 2, false), 0.0);
    assertTrue(Double.isNaN(definition(0xFF, 4, 3, true)));
    assertEquals(-256.0, definition(0xF8, 4, 3, true), 0.0);  // S.1111.000 is a number
    assertEquals(-240.0, definition(0xF7, 4, 3, true), 0.0);  // -1.875 * 2^7
    // bfloat16's smallest subnormal is a float subnormal (2^-149 * 2^16).
    assertEquals(Float.MIN_VALUE * 65536, (float) definition(0x0001, 8, 7, false), 0f);
  }

  @Test
  public void mappedTensorsDecodeAsOwnedOnes() throws Exception {
    Map<String, Tensor> mine = new LinkedHashMap<>();
    mine.put("h", Tensor.ofFloat16(new short[] {0x3C00, (short) 0xC000, 0x0001, 0x7C00}, 2, 2));
    mine.put("b", Tensor.ofBfloat16(new short[] {0x3F80, (short) 0xFF80, 0x0001}));
    mine.put("e4", Tensor.ofFloat8E4M3fn(new byte[] {0x38, (byte) 0xFE, 0x01, 0x7F}));
    mine.put("e5", Tensor.ofFloat8E5M2(new byte[] {0x3C, 0x7C, (byte) 0x83}));
    mine.put("empty", Tensor.of("float16", new short[0], new long[] {0, 3}));
    mine.put("scalar", Tensor.of("bfloat16", new short[] {(short) 0xC040}, new long[0]));
    mine.put("e8m0", Tensor.of("float8_e8m0fnu", new byte[] {0x7F, (byte) 0x80, 0, (byte) 0xFF},
        new long[] {2, 2}));
    mine.put("fp4", Tensor.of("float4_e2m1fn_x2", new byte[] {0x21, (byte) 0xF8, 0x7E}, null));
    Archive.save(scratch.archive(), "v", mine);
    try (Archive archive = Archive.open(scratch.archive())) {
      for (Map.Entry<String, Tensor> e : mine.entrySet()) {
        Tensor stored = archive.tensor(e.getKey(), "v");
        assertTrue(e.getKey(), stored.isMapped() || stored.numel() == 0);
        assertArrayEquals(e.getKey(), Values.floatBits(e.getValue().toFloatArray()),
            Values.floatBits(stored.toFloatArray()));
        assertArrayEquals(e.getKey(), Values.doubleBits(e.getValue().toDoubleArray()),
            Values.doubleBits(stored.toDoubleArray()));
      }
      assertArrayEquals(new float[] {1, -2, Math.scalb(1f, -24), Float.POSITIVE_INFINITY},
          archive.tensor("h", "v").toFloatArray(), 0f);
      assertArrayEquals(new double[] {1, -448, Math.scalb(1.0, -9), Double.NaN},
          archive.tensor("e4", "v").toDoubleArray(), 0.0);
      assertEquals(0, archive.tensor("empty", "v").toFloatArray().length);
      assertArrayEquals(new float[] {-3}, archive.tensor("scalar", "v").toFloatArray(), 0f);
      assertArrayEquals(Values.floatBits(new float[] {1, 2, Math.scalb(1f, -127), Float.NaN}),
          Values.floatBits(archive.tensor("e8m0", "v").toFloatArray()));
      // Two values per byte, the low nibble first: 0x21 is 0.5, 1; 0xF8 is -0, -6.
      assertArrayEquals(Values.doubleBits(new double[] {0.5, 1, -0.0, -6, -4, 6}),
          Values.doubleBits(archive.tensor("fp4", "v").toDoubleArray()));
      assertArrayEquals(new long[] {3}, archive.tensor("fp4", "v").shape());
    }
  }

  @Test
  public void complexTensorsWidenPartByPart() {
    try (Tensor c = Tensor.ofComplex64(new float[] {1.5f, -0f, Float.MIN_VALUE, Float.NaN})) {
      assertArrayEquals(Values.doubleBits(new double[] {1.5, -0.0, Float.MIN_VALUE, Double.NaN}),
          Values.doubleBits(c.toDoubleArray()));
      assertArrayEquals(Values.floatBits(new float[] {1.5f, -0f, Float.MIN_VALUE, Float.NaN}),
          Values.floatBits(c.toFloatArray()));
    }
  }

  /** Asserts that {@code call} throws IllegalArgumentException naming {@code right}. */
  private static void assertWrongAccessor(String right, Runnable call) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call::run);
    assertTrue(e.getMessage(), e.getMessage().contains("(use " + right + ")"));
  }

  @Test
  public void theWrongAccessorThrowsNamingTheRightOne() {
    try (Tensor i32 = Tensor.of(new int[] {1});
        Tensor i8 = Tensor.of(new byte[] {1});
        Tensor u16 = Tensor.of("uint16", new short[] {1}, null);
        Tensor flag = Tensor.of(new boolean[] {true});
        Tensor text = Tensor.of(new String[] {"x"});
        Tensor f64 = Tensor.of(new double[] {0.1});
        Tensor c128 = Tensor.ofComplex128(new double[] {1, 2});
        Tensor h = Tensor.ofFloat16(new short[] {0x3C00});
        Tensor e5 = Tensor.ofFloat8E5M2(new byte[] {0x3C})) {
      assertWrongAccessor("toIntArray()", i32::toFloatArray);
      assertWrongAccessor("toIntArray()", i32::toDoubleArray);
      assertWrongAccessor("toByteArray()", i8::toDoubleArray);
      assertWrongAccessor("toShortArray()", u16::toFloatArray);
      assertWrongAccessor("toBooleanArray()", flag::toFloatArray);
      assertWrongAccessor("toStringArray()", text::toDoubleArray);
      assertWrongAccessor("toIntArray()", i32::toStringArray);
      assertWrongAccessor("toFloatArray()", h::toStringArray);
      // float64 and complex128 have values no float holds: no silent rounding.
      assertWrongAccessor("toDoubleArray()", f64::toFloatArray);
      assertWrongAccessor("toDoubleArray()", c128::toFloatArray);
      // The bit accessors are unchanged: one width each.
      assertWrongAccessor("toShortArray()", h::toIntArray);
      assertWrongAccessor("toByteArray()", e5::toShortArray);
      assertArrayEquals(new short[] {0x3C00}, h.toShortArray());
      assertArrayEquals(new byte[] {0x3C}, e5.toByteArray());
      assertArrayEquals(new double[] {0.1}, f64.toDoubleArray(), 0.0);
    }
    Tensor closed = Tensor.ofBfloat16(new short[] {0x3F80});
    closed.close();
    assertThrows(IllegalStateException.class, closed::toFloatArray);
  }
}
