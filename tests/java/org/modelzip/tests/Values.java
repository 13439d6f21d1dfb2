package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.modelzip.Tensor;

/**
 * One tensor of every data type modelzip stores, named after its type, with
 * values from fixed formulas of the element index i (0..11, shape 3 x 4;
 * strings: 2 x 2), and for the 8-bit floats twelve bit patterns whose values
 * are worked out by hand from their definitions (FORMAT.md section 6).
 * tests/java/interop.py computes the same in Python (numpy), so each side
 * checks what the other wrote. The floating-point types are checked twice:
 * their stored bits (the array of their width) and their numbers
 * (toFloatArray, toDoubleArray).
 */
final class Values {
  private Values() {}

  static final List<String> DTYPES = List.of("bool", "int8", "uint8", "int16", "uint16", "int32",
      "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64", "float8_e4m3fn",
      "float8_e5m2", "complex64", "complex128", "float8_e8m0fnu", "float4_e2m1fn_x2", "string");
  static final long[] SHAPE = {3, 4};
  static final long[] STRING_SHAPE = {2, 2};
  static final String[] STRINGS = {"", "a", "\u03b2eta", "\u65e5\u672c\u8a9e \ud83d\ude42"};
  private static final int N = 12;

  /**
   * float8_e4m3fn (sign, 4 exponent bits with bias 7, 3 mantissa bits, no
   * infinity): +0, -0, the smallest subnormal 1 * 2^-9, the largest 7 * 2^-9,
   * the smallest normal 2^-6, 1.0 (exponent 7), 1.125, -3 (exponent 8,
   * mantissa 4/8: -1.5 * 2), the largest 448 (1.75 * 2^8) and -448, NaN
   * (S.1111.111) twice.
   */
  static final int[] E4M3FN_BITS = {0x00, 0x80, 0x01, 0x07, 0x08, 0x38, 0x39, 0xC4, 0x7E, 0xFE,
      0x7F, 0xFF};
  static final double[] E4M3FN_VALUES = {0.0, -0.0, Math.scalb(1.0, -9), Math.scalb(7.0, -9),
      Math.scalb(1.0, -6), 1.0, 1.125, -3.0, 448.0, -448.0, Double.NaN, Double.NaN};
  /**
   * float8_e5m2 (sign, 5 exponent bits with bias 15, 2 mantissa bits, IEEE
   * rules): +0, -0, the smallest subnormal 2^-16, 3 * 2^-16, the smallest
   * normal 2^-14, 1.0 (exponent 15), 1.25, -3 (exponent 16, mantissa 2/4),
   * the largest 57344 (1.75 * 2^15), +infinity, -infinity, NaN.
   */
  static final int[] E5M2_BITS = {0x00, 0x80, 0x01, 0x03, 0x04, 0x3C, 0x3D, 0xC2, 0x7B, 0x7C,
      0xFC, 0x7E};
  static final double[] E5M2_VALUES = {0.0, -0.0, Math.scalb(1.0, -16), Math.scalb(3.0, -16),
      Math.scalb(1.0, -14), 1.0, 1.25, -3.0, 57344.0, Double.POSITIVE_INFINITY,
      Double.NEGATIVE_INFINITY, Double.NaN};

  /**
   * float8_e8m0fnu (the byte e is 2^(e - 127); no sign, no zero): the
   * smallest 2^-127 and 2^-126, 0.5, 1, 2, 4, 2^17, 2^-15, 2^126, the
   * largest 2^127, NaN (0xFF), 2^-63.
   */
  static final int[] E8M0_BITS = {0x00, 0x01, 0x7E, 0x7F, 0x80, 0x81, 0x90, 0x70, 0xFD, 0xFE,
      0xFF, 0x40};
  static final double[] E8M0_VALUES = {Math.scalb(1.0, -127), Math.scalb(1.0, -126), 0.5, 1.0,
      2.0, 4.0, Math.scalb(1.0, 17), Math.scalb(1.0, -15), Math.scalb(1.0, 126),
      Math.scalb(1.0, 127), Double.NaN, Math.scalb(1.0, -63)};
  /**
   * float4_e2m1fn_x2: twelve bytes of two FP4 E2M1 values each, the low
   * nibble first (sign bit 3, 2 exponent bits with bias 1, 1 mantissa bit):
   * the eight magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negations
   * (0x8 is -0), then mixed pairs.
   */
  static final int[] FP4_BITS = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0x07, 0x8F,
      0x3A, 0xE1};
  static final double[] FP4_VALUES = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3,
      -4, -6, 6, 0, -6, -0.0, -1, 1.5, 0.5, -4};

  /** Half-precision bits of a float that float16 holds exactly (normal or zero). */
  static short float16Bits(float value) {
    int bits = Float.floatToIntBits(value);
    int sign = (bits >>> 16) & 0x8000;
    if ((bits & 0x7fffffff) == 0) {
      return (short) sign;
    }
    int exponent = ((bits >>> 23) & 0xff) - 127 + 15;
    int mantissa = (bits >>> 13) & 0x3ff;
    return (short) (sign | (exponent << 10) | mantissa);
  }

  /** The expected values of {@code dtype}, as the Java array it is read into. */
  static Object expected(String dtype) {
    switch (dtype) {
      case "bool": {
        boolean[] v = new boolean[N];
        for (int i = 0; i < N; i++) v[i] = i % 3 == 0;
        return v;
      }
      case "int8": case "uint8": {
        byte[] v = new byte[N];
        for (int i = 0; i < N; i++) v[i] = (byte) (dtype.equals("int8") ? i * 11 - 60 : 255 - i * 3);
        return v;
      }
      case "int16": case "uint16": case "float16": case "bfloat16": {
        short[] v = new short[N];
        for (int i = 0; i < N; i++) {
          float f = i * 0.5f - 2f;
          v[i] = dtype.equals("int16") ? (short) (i * 1000 - 6000)
              : dtype.equals("uint16") ? (short) (65535 - i * 7)
              : dtype.equals("float16") ? float16Bits(f)
              : (short) (Float.floatToIntBits(f) >>> 16);
        }
        return v;
      }
      case "int32": case "uint32": {
        int[] v = new int[N];
        for (int i = 0; i < N; i++) v[i] = dtype.equals("int32") ? i * 100000 - 600000 : (int) (0xffffffffL - i * 13L);
        return v;
      }
      case "int64": case "uint64": {
        long[] v = new long[N];
        for (int i = 0; i < N; i++) v[i] = dtype.equals("int64") ? i * 1_000_000_000_000L - 6_000_000_000_000L : -1L - i * 17L;
        return v;
      }
      case "float32": {
        float[] v = new float[N];
        for (int i = 0; i < N; i++) v[i] = i * 0.375f - 2f;
        return v;
      }
      case "float64": {
        double[] v = new double[N];
        for (int i = 0; i < N; i++) v[i] = i / 3.0 - 1.0;
        return v;
      }
      case "float8_e4m3fn": case "float8_e5m2": case "float8_e8m0fnu": case "float4_e2m1fn_x2": {
        int[] bits = dtype.equals("float8_e4m3fn") ? E4M3FN_BITS
            : dtype.equals("float8_e5m2") ? E5M2_BITS
            : dtype.equals("float8_e8m0fnu") ? E8M0_BITS : FP4_BITS;
        byte[] v = new byte[N];
        for (int i = 0; i < N; i++) v[i] = (byte) bits[i];
        return v;
      }
      case "complex64": {  // element i: (i * 0.25 - 1) + (3 - i * 0.5)j
        float[] v = new float[2 * N];
        for (int i = 0; i < N; i++) {
          v[2 * i] = i * 0.25f - 1f;
          v[2 * i + 1] = 3f - i * 0.5f;
        }
        return v;
      }
      case "complex128": {  // element i: i / 3 + (-i / 7)j (+0 at i = 0)
        double[] v = new double[2 * N];
        for (int i = 0; i < N; i++) {
          v[2 * i] = i / 3.0;
          v[2 * i + 1] = -i / 7.0;
        }
        return v;
      }
      case "string":
        return STRINGS.clone();
      default:
        throw new IllegalArgumentException(dtype);
    }
  }

  /** Every tensor, by name (= its type), in DTYPES order. */
  static Map<String, Tensor> all() {
    Map<String, Tensor> out = new LinkedHashMap<>();
    for (String dtype : DTYPES) {
      out.put(dtype, Tensor.of(dtype, expected(dtype), dtype.equals("string") ? STRING_SHAPE : SHAPE));
    }
    return out;
  }

  /**
   * The numbers a floating-point tensor of {@code dtype} holds (complex:
   * interleaved parts), or null for the other types.
   */
  static double[] numbers(String dtype) {
    switch (dtype) {
      case "float16": case "bfloat16": {
        double[] v = new double[N];
        for (int i = 0; i < N; i++) v[i] = i * 0.5 - 2;
        return v;
      }
      case "float8_e4m3fn": return E4M3FN_VALUES.clone();
      case "float8_e5m2": return E5M2_VALUES.clone();
      case "float8_e8m0fnu": return E8M0_VALUES.clone();
      case "float4_e2m1fn_x2": return FP4_VALUES.clone();  // two per element
      case "float32": case "complex64": {
        float[] f = (float[]) expected(dtype);
        double[] v = new double[f.length];
        for (int i = 0; i < f.length; i++) v[i] = f[i];
        return v;
      }
      case "float64": case "complex128": return (double[]) expected(dtype);
      default: return null;
    }
  }

  /** The bits of each value (one NaN for all NaNs; -0.0 is not 0.0). */
  static long[] doubleBits(double[] values) {
    long[] out = new long[values.length];
    for (int i = 0; i < values.length; i++) out[i] = Double.doubleToLongBits(values[i]);
    return out;
  }

  /** As {@link #doubleBits} for floats. */
  static int[] floatBits(float[] values) {
    int[] out = new int[values.length];
    for (int i = 0; i < values.length; i++) out[i] = Float.floatToIntBits(values[i]);
    return out;
  }

  /**
   * Asserts that the numbers of {@code t} are {@code expected}, bit for bit
   * (NaN as NaN, signed zeros), through toDoubleArray(), and through
   * toFloatArray() unless the type has values beyond float's (float64,
   * complex128), where it must throw.
   */
  static void checkNumbers(String what, double[] expected, Tensor t) {
    assertArrayEquals(what + " toDoubleArray", doubleBits(expected), doubleBits(t.toDoubleArray()));
    if (t.dtype().equals("float64") || t.dtype().equals("complex128")) {
      assertThrows(what, IllegalArgumentException.class, t::toFloatArray);
      return;
    }
    float[] narrowed = new float[expected.length];
    for (int i = 0; i < expected.length; i++) narrowed[i] = (float) expected[i];
    assertArrayEquals(what + " toFloatArray", floatBits(narrowed), floatBits(t.toFloatArray()));
  }

  /** Asserts that {@code t} is the tensor of {@code dtype} (type, shape, every value). */
  static void check(String dtype, Tensor t) {
    assertEquals(dtype, t.dtype());
    assertArrayEquals(dtype, dtype.equals("string") ? STRING_SHAPE : SHAPE, t.shape());
    double[] numbers = numbers(dtype);
    if (numbers != null) {
      checkNumbers(dtype, numbers, t);
    }
    Object expected = expected(dtype);
    switch (Values.kind(dtype)) {
      case "boolean": assertArrayEquals(dtype, (boolean[]) expected, t.toBooleanArray()); break;
      case "byte": assertArrayEquals(dtype, (byte[]) expected, t.toByteArray()); break;
      case "short": assertArrayEquals(dtype, (short[]) expected, t.toShortArray()); break;
      case "int": assertArrayEquals(dtype, (int[]) expected, t.toIntArray()); break;
      case "long": assertArrayEquals(dtype, (long[]) expected, t.toLongArray()); break;
      case "float": assertArrayEquals(dtype, (float[]) expected, t.toFloatArray(), 0f); break;
      case "double": assertArrayEquals(dtype, (double[]) expected, t.toDoubleArray(), 0.0); break;
      default: assertArrayEquals(dtype, (String[]) expected, t.toStringArray()); break;
    }
  }

  /** Every tensor of {@code loaded} is the one of its name, and all are there. */
  static void checkAll(Map<String, Tensor> loaded) {
    assertEquals(DTYPES, List.copyOf(loaded.keySet()));
    for (Map.Entry<String, Tensor> e : loaded.entrySet()) {
      check(e.getKey(), e.getValue());
    }
  }

  /** The Java element type of a dtype (written independently of Tensor's table). */
  static String kind(String dtype) {
    if (dtype.equals("bool")) return "boolean";
    if (dtype.endsWith("int8") || dtype.startsWith("float8_") || dtype.startsWith("float4_")) {
      return "byte";
    }
    if (dtype.endsWith("16")) return "short";
    if (dtype.endsWith("int32")) return "int";
    if (dtype.endsWith("int64")) return "long";
    if (dtype.equals("float32") || dtype.equals("complex64")) return "float";
    if (dtype.equals("float64") || dtype.equals("complex128")) return "double";
    return "String";
  }
}
