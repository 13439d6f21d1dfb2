package org.modelzip;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;

/**
 * A typed, shaped n-dimensional array: read from an {@link Archive}, or made
 * from Java arrays or the bytes of a {@link ByteBuffer} with {@code of(...)}
 * to be saved.
 *
 * <p>Data types are named as modelzip names them: "bool", "int8", "uint8",
 * "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
 * "bfloat16", "float8_e4m3fn", "float8_e5m2", "float32", "float64",
 * "complex64", "complex128", the OCP Microscaling types "float8_e8m0fnu"
 * (power-of-two block scales) and "float4_e2m1fn_x2" (one byte per pair of
 * FP4 values, the first in the low nibble; the shape counts bytes), and
 * "string" (UTF-8 strings). Values are
 * row-major and little-endian, as stored. Each type is made from, and its
 * stored bits read into, one kind of Java array of its width: boolean[]
 * (bool), byte[] (int8, uint8, and the bits of the 8-bit floats and of the
 * FP4 pairs), short[]
 * (int16, uint16, and the bits of float16 and bfloat16), int[] (int32,
 * uint32), long[] (int64, uint64), float[] (float32; complex64 interleaved),
 * double[] (float64; complex128 interleaved) and String[] (string); unsigned
 * values keep their bits. A complex tensor's array holds two values per
 * element, the real part then the imaginary part, so it is twice as long as
 * the tensor has elements.
 *
 * <p>The numbers of the floating-point types are read, widened exactly, with
 * {@link #toFloatArray()} (float16, bfloat16, float8_e4m3fn, float8_e5m2,
 * float8_e8m0fnu, float4_e2m1fn_x2, float32, complex64) and
 * {@link #toDoubleArray()} (those and float64, complex128): NaN stays NaN,
 * infinities, signed zeros and subnormals are kept. A float4_e2m1fn_x2
 * tensor gives two values per element (byte), the low nibble's first.
 * Floats are never rounded to the narrow types: those are made from their
 * bits.
 *
 * <p>Layouts: "dense"; "sparse_coo" and "quantized" tensors are readable
 * through {@link #buffer()} (their stored values) and, for quantized ones,
 * {@link #dequantize()}.
 *
 * <p>Lifetimes: a tensor read from an archive is a zero-copy view of the
 * mapped file when its entry is stored (see {@link #isMapped()}); it keeps the
 * mapping alive until {@link #close()} or until it is garbage collected. A
 * buffer from {@link #buffer()} keeps the mapping alive by itself for as long
 * as the buffer (or any view made from it) is reachable, also after the
 * tensor and the archive are closed: buffers never dangle. After
 * {@link #close()} the tensor's own methods throw
 * {@link IllegalStateException}.
 *
 * <p>Thread safety: immutable; all methods may be called from several
 * threads at once ({@link #close()} waits for calls in progress). Each buffer
 * returned by {@link #buffer()} is a new read-only view with its own
 * position, for one thread.
 */
public final class Tensor implements AutoCloseable {
  private final NativeHandle handle;
  private final String dtype;
  private final long[] shape;
  private final String layout;
  private final long byteSize;
  /** The direct buffer over all values, made on first use (owns its own hold). */
  private ByteBuffer values;

  /** Built by the native glue, which hands over {@code pointer} (texts UTF-8). */
  Tensor(long pointer, byte[] dtype, long[] shape, byte[] layout, long byteSize) {
    this.dtype = Native.string(dtype);
    this.shape = shape;
    this.layout = Native.string(layout);
    this.byteSize = byteSize;
    this.handle = new NativeHandle(pointer, Native::tensorFree,
        "tensor " + this.dtype + Arrays.toString(shape));
  }

  // ---------------------------------------------------------------- making

  /**
   * A tensor of {@code dtype} holding a copy of {@code data}, a Java array
   * of the kind the type is read into (see the class comment), in row-major
   * order; {@code shape} {@code null} means one dimension of
   * {@code data}'s length, an empty shape a scalar.
   *
   * <p>The shorthands ({@code of(float[] data, long... shape)}...) cannot
   * tell no shape from an empty one: both make one dimension. A scalar is
   * made here: {@code Tensor.of("float32", new float[] {0.5f}, new long[0])}.
   *
   * @throws IllegalArgumentException if the type is unknown, the array
   *     kind does not fit it, or the shape does not fit the data (its cause:
   *     the library's {@link ModelzipException}, INVALID_ARGUMENT)
   */
  public static Tensor of(String dtype, Object data, long[] shape) {
    // Complex types: two array values (real, imaginary) per element.
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(data, "data");
    if (data instanceof String[]) {
      if (!dtype.equals("string")) {
        throw new IllegalArgumentException("a String[] makes a \"string\" tensor, not " + dtype);
      }
      String[] strings = (String[]) data;
      byte[][] utf8 = Native.utf8(strings);
      return made(()
                      -> Native.tensorFromStrings(
                          utf8, shape != null ? shape.clone() : new long[] {strings.length}));
    }
    String kind = arrayKind(dtype);
    if (kind == null) {
      throw new IllegalArgumentException("unknown data type \"" + dtype + "\" (the types: "
          + String.join(", ", DTYPES) + ")");
    }
    if (!data.getClass().isArray()
        || !data.getClass().getComponentType().getName().equals(kind)) {
      throw new IllegalArgumentException("a \"" + dtype + "\" tensor is made from "
          + kind + "[], not from "
          + data.getClass().getSimpleName());
    }
    int length = java.lang.reflect.Array.getLength(data);
    if (isComplex(dtype) && length % 2 != 0) {
      throw new IllegalArgumentException("a \"" + dtype + "\" tensor is made from (real, imaginary)"
          + " pairs, not from an odd number (" + length + ") of values");
    }
    long[] dims =
        shape != null ? shape.clone() : new long[] {isComplex(dtype) ? length / 2 : length};
    return made(() -> Native.tensorFromArray(Native.utf8(dtype), data, elementBytes(kind), dims));
  }

  /**
   * A tensor of {@code dtype} holding a copy of the bytes of {@code data}
   * from its position to its limit, taken as the values are stored
   * (little-endian, row-major, whatever the buffer's {@code order()}); the
   * buffer's position is left as it is. A direct buffer, such as the
   * off-heap memory of an ND4J {@code INDArray} ({@code
   * array.data().asNio()}), is copied once, natively, with no Java array in
   * between. {@code shape} {@code null} means one dimension of as many
   * elements as the bytes hold, an empty shape a scalar.
   *
   * @throws IllegalArgumentException if the type is unknown or "string"
   *     (made from {@code String[]}), without a shape, the bytes are not a
   *     whole number of elements, or the shape does not fit the bytes (its
   *     cause: the library's {@link ModelzipException}, INVALID_ARGUMENT)
   */
  public static Tensor of(String dtype, ByteBuffer data, long[] shape) {
    Objects.requireNonNull(data, "data");
    return of(dtype, new ByteBuffer[] {data}, shape);
  }

  /**
   * A tensor of {@code dtype} holding a copy of the bytes of {@code parts},
   * one after the other, each from its position to its limit, as {@link
   * #of(String, ByteBuffer, long[])} takes one buffer (the positions are
   * left as they are): the way to make a tensor of 2 GiB or more, which no
   * single ByteBuffer holds, e.g. from the parts {@link #buffers(int)} gives
   * or from several direct buffers. Direct parts are copied natively; the
   * values are copied once, into memory of the whole tensor's size.
   *
   * @throws IllegalArgumentException as {@link #of(String, ByteBuffer, long[])}
   *     (the bytes of all parts together)
   * @throws NullPointerException if {@code parts} or one of them is null
   */
  public static Tensor of(String dtype, ByteBuffer[] parts, long[] shape) {
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(parts, "parts");
    String kind = arrayKind(dtype);
    if (kind == null || kind.equals("String")) {
      throw new IllegalArgumentException(kind == null
          ? "unknown data type \"" + dtype + "\" (the types: " + String.join(", ", DTYPES) + ")"
          : "a \"string\" tensor is made from String[], not from a ByteBuffer");
    }
    // Each part as a direct buffer or a byte[], with the range of it to copy.
    Object[] sources = new Object[parts.length];
    long[] offsets = new long[parts.length];
    int[] lengths = new int[parts.length];
    long length = 0;
    for (int i = 0; i < parts.length; i++) {
      ByteBuffer part = Objects.requireNonNull(parts[i], "part " + i + " is null");
      lengths[i] = part.remaining();
      length += lengths[i];
      if (part.isDirect()) {
        sources[i] = part;
        offsets[i] = part.position();
      } else if (part.hasArray()) { // a writable heap buffer: its array, not a copy
        sources[i] = part.array();
        offsets[i] = part.arrayOffset() + part.position();
      } else {
        byte[] bytes = new byte[lengths[i]];
        part.duplicate().get(bytes); // a read-only heap buffer
        sources[i] = bytes;
      }
    }
    int elementSize = elementBytes(kind) * (isComplex(dtype) ? 2 : 1);
    if (shape == null && length % elementSize != 0) {
      throw new IllegalArgumentException(length + " bytes are not a whole number of \"" + dtype
          + "\" elements (" + elementSize + " bytes each)");
    }
    long[] dims = shape != null ? shape.clone() : new long[] {length / elementSize};
    return made(
        () -> Native.tensorFromBuffers(Native.utf8(dtype), sources, offsets, lengths, dims));
  }

  /**
   * The tensor {@code make} makes from a caller's values; the library's
   * INVALID_ARGUMENT (a shape that does not fit them, a negative dimension)
   * becomes the IllegalArgumentException of a caller's mistake, as {@link
   * TrainingConfig.Builder#build} throws, with that error as its cause.
   */
  private static Tensor made(java.util.function.Supplier<Tensor> make) {
    try {
      return make.get();
    } catch (ModelzipException e) {
      if (e.code() == ModelzipException.Code.INVALID_ARGUMENT) {
        throw new IllegalArgumentException(e.getMessage(), e);
      }
      throw e;
    }
  }

  /** A float32 tensor; no shape (or an empty one): one dimension of the data's length. */
  public static Tensor of(float[] data, long... shape) {
    return of("float32", data, orLength(shape, data.length));
  }

  /** A float64 tensor; no shape (or an empty one): one dimension of the data's length. */
  public static Tensor of(double[] data, long... shape) {
    return of("float64", data, orLength(shape, data.length));
  }

  /** An int64 tensor; no shape (or an empty one): one dimension of the data's length. */
  public static Tensor of(long[] data, long... shape) {
    return of("int64", data, orLength(shape, data.length));
  }

  /** An int32 tensor; no shape (or an empty one): one dimension of the data's length. */
  public static Tensor of(int[] data, long... shape) {
    return of("int32", data, orLength(shape, data.length));
  }

  /** An int16 tensor; no shape (or an empty one): one dimension of the data's length. */
  public static Tensor of(short[] data, long... shape) {
    return of("int16", data, orLength(shape, data.length));
  }

  /** An int8 tensor; no shape (or an empty one): one dimension of the data's length. */
  public static Tensor of(byte[] data, long... shape) {
    return of("int8", data, orLength(shape, data.length));
  }

  /** A bool tensor; no shape (or an empty one): one dimension of the data's length. */
  public static Tensor of(boolean[] data, long... shape) {
    return of("bool", data, orLength(shape, data.length));
  }

  /** A string tensor (UTF-8); no shape (or an empty one): one dimension of the data's length. */
  public static Tensor of(String[] data, long... shape) {
    return of("string", data, orLength(shape, data.length));
  }

  /** A bfloat16 tensor from the 16-bit patterns (the upper half of float32 bits). */
  public static Tensor ofBfloat16(short[] bits, long... shape) {
    return of("bfloat16", bits, orLength(shape, bits.length));
  }

  /** A float16 (IEEE half) tensor from the 16-bit patterns. */
  public static Tensor ofFloat16(short[] bits, long... shape) {
    return of("float16", bits, orLength(shape, bits.length));
  }

  /**
   * A float8_e4m3fn tensor (torch.float8_e4m3fn, safetensors F8_E4M3) from the
   * 8-bit patterns: sign, 4 exponent bits (bias 7), 3 mantissa bits; no
   * infinity, 0x7F and 0xFF are NaN.
   */
  public static Tensor ofFloat8E4M3fn(byte[] bits, long... shape) {
    return of("float8_e4m3fn", bits, orLength(shape, bits.length));
  }

  /**
   * A float8_e5m2 tensor (torch.float8_e5m2, safetensors F8_E5M2) from the
   * 8-bit patterns: the high byte of an IEEE half.
   */
  public static Tensor ofFloat8E5M2(byte[] bits, long... shape) {
    return of("float8_e5m2", bits, orLength(shape, bits.length));
  }

  /**
   * A complex64 tensor (numpy/torch complex64, safetensors C64) from
   * {@code interleaved} float32 values: element i is
   * {@code interleaved[2 * i] + interleaved[2 * i + 1] * i}. No shape: one
   * dimension of half the array's length.
   *
   * @throws IllegalArgumentException if the array's length is odd
   */
  public static Tensor ofComplex64(float[] interleaved, long... shape) {
    return of("complex64", interleaved, shape == null || shape.length == 0 ? null : shape);
  }

  /** A complex128 tensor from interleaved float64 values, as {@link #ofComplex64}. */
  public static Tensor ofComplex128(double[] interleaved, long... shape) {
    return of("complex128", interleaved, shape == null || shape.length == 0 ? null : shape);
  }

  private static boolean isComplex(String dtype) {
    return dtype.equals("complex64") || dtype.equals("complex128");
  }

  private static long[] orLength(long[] shape, int length) {
    return shape == null || shape.length == 0 ? new long[] {length} : shape;
  }

  // ---------------------------------------------------------------- reading

  /** The element type (see the class comment); the original type when quantized. */
  public String dtype() {
    return dtype;
  }

  /** The shape (a copy); empty for a scalar. */
  public long[] shape() {
    return shape.clone();
  }

  /** "dense", "sparse_coo" or "quantized". */
  public String layout() {
    return layout;
  }

  /** The number of elements (product of the shape). */
  public long numel() {
    long n = 1;
    for (long d : shape) {
      n = Math.multiplyExact(n, d);
    }
    return n;
  }

  /**
   * The size of the value bytes {@link #buffer()} covers (for a string
   * tensor: the concatenated UTF-8 strings).
   */
  public long byteSize() {
    return byteSize;
  }

  /** True when the values are a zero-copy view of a mapped archive file. */
  public boolean isMapped() {
    return handle.call(Native::tensorIsMapped);
  }

  /**
   * The value bytes as a read-only, direct, little-endian buffer: zero-copy
   * over the mapped file when {@link #isMapped()}. It keeps the data alive
   * by itself (see the class comment). A new view on each call.
   *
   * @throws UnsupportedOperationException when the values exceed 2 GiB - 1
   *     (a ByteBuffer's limit): use {@link #buffers()} or {@link #buffer(long, int)}
   */
  public ByteBuffer buffer() {
    if (byteSize > Integer.MAX_VALUE) {
      throw new UnsupportedOperationException("tensor of " + byteSize
          + " bytes does not fit one ByteBuffer (2 GiB - 1): use buffers() or buffer(offset, length)");
    }
    ByteBuffer all;
    synchronized (this) {
      if (values == null) {
        values = directBuffer(0, (int) byteSize);
      }
      all = values;
    }
    return all.asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
  }

  /**
   * {@code length} value bytes from {@code offset}, as {@link #buffer()}
   * gives them (for tensors beyond 2 GiB).
   *
   * @throws IndexOutOfBoundsException if the range is not inside the values
   */
  public ByteBuffer buffer(long offset, int length) {
    Objects.checkFromIndexSize(offset, length, byteSize);
    return directBuffer(offset, length).asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
  }

  /** The part size of {@link #buffers()}: 1 GiB, a multiple of every element size. */
  public static final int DEFAULT_PART_BYTES = 1 << 30;

  /**
   * All value bytes as consecutive read-only, direct, little-endian buffers
   * of {@link #DEFAULT_PART_BYTES} each (the last one shorter), as {@link
   * #buffers(int)} gives them: a tensor of any size, 2 GiB and more too.
   */
  public ByteBuffer[] buffers() { return buffers(DEFAULT_PART_BYTES); }

  /**
   * All value bytes as consecutive buffers of {@code partBytes} each, the
   * last one shorter (one empty buffer for no bytes): part i holds bytes
   * {@code i * partBytes} on, as {@link #buffer(long, int)} gives them
   * (read-only, direct, little-endian, zero-copy over the mapped file when
   * {@link #isMapped()}; each keeps the data alive by itself). With a
   * {@code partBytes} that is a multiple of the element size, no element is
   * split between two parts. Their concatenation is what {@link
   * #of(String, ByteBuffer[], long[])} takes back.
   *
   * @throws IllegalArgumentException if {@code partBytes} is not positive
   */
  public ByteBuffer[] buffers(int partBytes) {
    if (partBytes <= 0) {
      throw new IllegalArgumentException("partBytes must be positive, not " + partBytes);
    }
    long count = Math.max(1, (byteSize + partBytes - 1) / partBytes);
    if (count > Integer.MAX_VALUE - 8) {
      throw new IllegalArgumentException(
          count + " parts of " + partBytes + " bytes do not fit one Java array: use larger parts");
    }
    ByteBuffer[] out = new ByteBuffer[(int) count];
    for (int i = 0; i < out.length; i++) {
      long offset = (long) i * partBytes;
      out[i] = buffer(offset, (int) Math.min(partBytes, byteSize - offset));
    }
    return out;
  }

  /** A root buffer whose reachability keeps its own reference to the bytes alive. */
  private ByteBuffer directBuffer(long offset, int length) {
    long bytes = handle.call(Native::tensorRetainValues);
    ByteBuffer root;
    try {
      root = Native.bytesBuffer(bytes, offset, length);
    } catch (RuntimeException | Error e) {
      Native.bytesFree(bytes);
      throw e;
    }
    // Views made from a direct buffer (asReadOnlyBuffer, slice, duplicate)
    // keep their root reachable, so the bytes live while any view does.
    NativeHandle.CLEANER.register(root, () -> Native.bytesFree(bytes));
    return root;
  }

  /**
   * The values of a float32, float16, bfloat16, float8_e4m3fn, float8_e5m2
   * or float8_e8m0fnu tensor as floats, of a complex64 tensor interleaved
   * (real, imaginary; twice {@link #numel()} values), of a float4_e2m1fn_x2
   * tensor two per byte, the low nibble's first (twice {@link #numel()}
   * values). Exact: every value of these types is a float (NaN stays NaN;
   * infinities, signed zeros and subnormals are kept; float8_e8m0fnu 0x00
   * is 2^-127, 0xFF NaN).
   *
   * @throws IllegalArgumentException for float64, complex128 (use
   *     {@link #toDoubleArray()}) and the non-floating types (naming their
   *     accessor)
   * @throws UnsupportedOperationException for a sparse or quantized tensor,
   *     or more values than a Java array holds (2^31 - 9: read them in parts
   *     with {@link #toFloatArray(long, int)})
   */
  public float[] toFloatArray() {
    return (float[]) decodeValues("float");
  }

  /**
   * The values of any floating-point tensor as doubles: float64, and every
   * type {@link #toFloatArray()} reads, widened exactly; complex64 and
   * complex128 interleaved (real, imaginary; twice {@link #numel()} values),
   * float4_e2m1fn_x2 two per byte as {@link #toFloatArray()} gives them.
   *
   * @throws IllegalArgumentException for the non-floating types (naming
   *     their accessor)
   * @throws UnsupportedOperationException for a sparse or quantized tensor,
   *     or more values than a Java array holds (2^31 - 9: read them in parts
   *     with {@link #toDoubleArray(long, int)})
   */
  public double[] toDoubleArray() {
    return (double[]) decodeValues("double");
  }

  /**
   * {@code count} of the values {@link #toFloatArray()} gives, from value
   * {@code first}: the numbers of a tensor too large for one Java array, a
   * part at a time (complex parts and FP4 values count one each).
   *
   * @throws IndexOutOfBoundsException if the range is not inside the values
   * @throws IllegalArgumentException as {@link #toFloatArray()}
   * @throws UnsupportedOperationException for a sparse or quantized tensor
   */
  public float[] toFloatArray(long first, int count) {
    return (float[]) decodeValues("float", first, count);
  }

  /**
   * {@code count} of the values {@link #toDoubleArray()} gives, from value
   * {@code first} (see {@link #toFloatArray(long, int)}).
   *
   * @throws IndexOutOfBoundsException if the range is not inside the values
   * @throws IllegalArgumentException as {@link #toDoubleArray()}
   * @throws UnsupportedOperationException for a sparse or quantized tensor
   */
  public double[] toDoubleArray(long first, int count) {
    return (double[]) decodeValues("double", first, count);
  }

  /** The values of an int64 or uint64 tensor (bits kept). */
  public long[] toLongArray() {
    return (long[]) copyValues("long");
  }

  /** The values of an int32 or uint32 tensor (bits kept). */
  public int[] toIntArray() {
    return (int[]) copyValues("int");
  }

  /** The values of an int16 or uint16 tensor, or the bits of float16 and bfloat16. */
  public short[] toShortArray() {
    return (short[]) copyValues("short");
  }

  /**
   * The values of an int8 or uint8 tensor (bits kept), or the bits of the
   * 8-bit floats and of the FP4 pairs (float4_e2m1fn_x2: one byte each).
   */
  public byte[] toByteArray() {
    return (byte[]) copyValues("byte");
  }

  /** The values of a bool tensor (a stored byte other than 0 is true, as in C++ and numpy). */
  public boolean[] toBooleanArray() {
    return (boolean[]) copyValues("boolean");
  }

  /** The strings of a string tensor, row-major. */
  public String[] toStringArray() {
    checkDense();
    if (!dtype.equals("string")) {
      throw wrongAccessor("String", floatKind(dtype) != null ? floatKind(dtype) : arrayKind(dtype));
    }
    return Native.strings(handle.call(Native::tensorStrings));
  }

  /**
   * The values a quantized tensor stands for, as a new dense tensor of its
   * original type ({@link #dtype()}); a dense tensor gives a new handle on the
   * same data.
   */
  public Tensor dequantize() {
    return handle.call(Native::tensorDequantize);
  }

  /** The stored values, as the array of their width ({@link #arrayKind}). */
  private Object copyValues(String kind) {
    checkDense();
    if (!kind.equals(arrayKind(dtype))) {
      throw wrongAccessor(kind, arrayKind(dtype));
    }
    Object array = newArray(kind, isComplex(dtype) ? Math.multiplyExact(numel(), 2) : numel());
    try (NativeHandle.Use use = handle.use()) {
      Native.tensorCopyValues(use.pointer(), array, elementBytes(kind));
    }
    return array;
  }

  /**
   * The values of a floating-point type as float[] or double[], widened
   * exactly by the library's decoders (a plain copy when the widths match).
   */
  private Object decodeValues(String kind) {
    checkDense();
    String floating = floatKind(dtype);
    if (floating == null || (kind.equals("float") && floating.equals("double"))) {
      throw wrongAccessor(kind, floating != null ? floating : arrayKind(dtype));
    }
    if (kind.equals(arrayKind(dtype))) {
      return copyValues(kind);
    }
    Object array = newArray(kind, valueCount());
    try (NativeHandle.Use use = handle.use()) {
      Native.tensorDecodeValues(use.pointer(), array, elementBytes(kind), 0);
    }
    return array;
  }

  /** {@code count} values from value {@code first}, as {@link #decodeValues} gives them all. */
  private Object decodeValues(String kind, long first, int count) {
    checkDense();
    String floating = floatKind(dtype);
    if (floating == null || (kind.equals("float") && floating.equals("double"))) {
      throw wrongAccessor(kind, floating != null ? floating : arrayKind(dtype));
    }
    Objects.checkFromIndexSize(first, count, valueCount());
    Object array = java.lang.reflect.Array.newInstance(primitiveClass(kind), count);
    try (NativeHandle.Use use = handle.use()) {
      Native.tensorDecodeValues(use.pointer(), array, elementBytes(kind), first);
    }
    return array;
  }

  /**
   * How many numbers a floating-point tensor holds: complex parts and the
   * FP4 values of a pair count one each.
   */
  private long valueCount() {
    boolean twice = isComplex(dtype) || dtype.equals("float4_e2m1fn_x2");
    return twice ? Math.multiplyExact(numel(), 2) : numel();
  }

  /** A new array of {@code n} values of {@code kind}, if a Java array holds that many. */
  private Object newArray(String kind, long n) {
    if (n > Integer.MAX_VALUE - 8) {
      boolean numbers = floatKind(dtype) != null && (kind.equals("float") || kind.equals("double"));
      throw new UnsupportedOperationException(n + " values do not fit one Java array: use "
          + (numbers ? accessor(kind).replace("()", "(first, count)") : "buffer(offset, length)"));
    }
    return java.lang.reflect.Array.newInstance(primitiveClass(kind), (int) n);
  }

  private IllegalArgumentException wrongAccessor(String kind, String right) {
    String article = dtype.startsWith("int") ? "an " : "a ";
    return new IllegalArgumentException(accessor(kind) + " of " + article + dtype + " tensor (use "
        + accessor(right) + ")");
  }

  private static String accessor(String kind) {
    return "to" + Character.toUpperCase(kind.charAt(0)) + kind.substring(1) + "Array()";
  }

  private void checkDense() {
    if (!layout.equals("dense")) {
      throw new UnsupportedOperationException("the tensor is " + layout
          + ": read its stored values with buffer()"
          + (layout.equals("quantized") ? " or dequantize() it" : ""));
    }
  }

  /** The data types, as modelzip names them. */
  private static final java.util.List<String> DTYPES = java.util.List.of("bool", "int8", "uint8",
      "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
      "float8_e4m3fn", "float8_e5m2", "float32", "float64", "complex64", "complex128",
      "float8_e8m0fnu", "float4_e2m1fn_x2", "string");

  /** The Java element type a dtype is read into, or null (unknown type). */
  static String arrayKind(String dtype) {
    switch (dtype) {
      case "bool": return "boolean";
      case "int8": case "uint8": case "float8_e4m3fn": case "float8_e5m2":
      case "float8_e8m0fnu": case "float4_e2m1fn_x2": return "byte";
      case "int16": case "uint16": case "float16": case "bfloat16": return "short";
      case "int32": case "uint32": return "int";
      case "int64": case "uint64": return "long";
      case "float32": case "complex64": return "float";
      case "float64": case "complex128": return "double";
      case "string": return "String";
      default: return null;
    }
  }

  /**
   * The narrowest Java floating type every value of a dtype widens to
   * exactly ("float" or "double"), or null (not a floating-point type).
   */
  static String floatKind(String dtype) {
    switch (dtype) {
      case "float16": case "bfloat16": case "float8_e4m3fn": case "float8_e5m2":
      case "float8_e8m0fnu": case "float4_e2m1fn_x2": case "float32": case "complex64":
        return "float";
      case "float64": case "complex128":
        return "double";
      default:
        return null;
    }
  }

  private static int elementBytes(String kind) {
    switch (kind) {
      case "boolean": case "byte": return 1;
      case "short": return 2;
      case "int": case "float": return 4;
      default: return 8;
    }
  }

  private static Class<?> primitiveClass(String kind) {
    switch (kind) {
      case "boolean": return boolean.class;
      case "byte": return byte.class;
      case "short": return short.class;
      case "int": return int.class;
      case "long": return long.class;
      case "float": return float.class;
      default: return double.class;
    }
  }

  NativeHandle handle() {
    return handle;
  }

  /**
   * This tensor, named in the errors of its use after {@link #close()} as
   * {@code what} of {@code archive} (tag {@code tag}; null: the newest).
   */
  Tensor readFrom(String archive, String what, String tag) {
    handle.describe(Utf8.printable(what + " " + dtype + Arrays.toString(shape) + " of '" + archive
        + "'" + (tag != null ? " tag '" + tag + "'" : "")));
    return this;
  }

  /**
   * Releases this tensor's hold on its data now; buffers already returned by
   * {@link #buffer()} stay valid (they hold their own). Idempotent.
   */
  @Override
  public void close() {
    synchronized (this) {
      values = null;
    }
    handle.close();
  }

  @Override
  public String toString() {
    return "Tensor(" + dtype + Arrays.toString(shape)
        + (layout.equals("dense") ? "" : ", " + layout) + ")";
  }
}
