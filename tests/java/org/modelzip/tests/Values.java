package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.modelzip.Tensor;

/**
 * One tensor of every data type modelzip stores, named after its type, with
 * values from fixed formulas of the element index i (0..11, shape 3 x 4;
 * strings: 2 x 2). tests/java/interop.py computes the same formulas in
 * Python (numpy), so each side checks what the other wrote.
 */
final class Values {
  private Values() {}

  static final List<String> DTYPES = List.of("bool", "int8", "uint8", "int16", "uint16", "int32",
      "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64", "string");
  static final long[] SHAPE = {3, 4};
  static final long[] STRING_SHAPE = {2, 2};
  static final String[] STRINGS = {"", "a", "\u03b2eta", "\u65e5\u672c\u8a9e \ud83d\ude42"};
  private static final int N = 12;

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

  /** Asserts that {@code t} is the tensor of {@code dtype} (type, shape, every value). */
  static void check(String dtype, Tensor t) {
    assertEquals(dtype, t.dtype());
    assertArrayEquals(dtype, dtype.equals("string") ? STRING_SHAPE : SHAPE, t.shape());
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
    if (dtype.endsWith("int8")) return "byte";
    if (dtype.endsWith("16")) return "short";
    if (dtype.endsWith("int32")) return "int";
    if (dtype.endsWith("int64")) return "long";
    if (dtype.equals("float32")) return "float";
    if (dtype.equals("float64")) return "double";
    return "String";
  }
}
