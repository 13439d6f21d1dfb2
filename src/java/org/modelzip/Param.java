package org.modelzip;

import java.util.Arrays;
import java.util.Objects;

/**
 * What an archive says about one parameter of a tag, read without touching
 * tensor data (params.txt plus the blob header). An immutable value.
 */
public final class Param {
  private final String name;
  private final String state;
  private final String dtype;
  private final long[] shape;
  private final long bytes;
  private final boolean shared;
  private final String ownerTag;
  private final String layout;
  private final boolean compressed;
  private final boolean embedding;
  private final String blob;

  /** Built by the native glue (texts UTF-8). */
  Param(byte[] name, byte[] state, byte[] dtype, long[] shape, long bytes, boolean shared, byte[] ownerTag,
      byte[] layout, boolean compressed, boolean embedding, byte[] blob) {
    this.name = Native.string(name);
    this.state = Native.string(state);
    this.dtype = Native.string(dtype);
    this.shape = shape;
    this.bytes = bytes;
    this.shared = shared;
    this.ownerTag = Native.string(ownerTag);
    this.layout = Native.string(layout);
    this.compressed = compressed;
    this.embedding = embedding;
    this.blob = Native.string(blob);
  }

  /**
   * The parameter name; for an optimizer state array
   * ({@link Archive#updaterStates}) the variable it belongs to.
   */
  public String name() {
    return name;
  }

  /**
   * The optimizer state's name ("M", "V"... in updater.txt) of an entry of
   * {@link Archive#updaterStates}; empty for a parameter.
   */
  public String state() {
    return state;
  }

  /**
   * The element type, as {@link Tensor#dtype()} names it ("float32",
   * "bfloat16", "float8_e4m3fn", "complex64", "string"...); for a quantized
   * tensor the original type.
   */
  public String dtype() {
    return dtype;
  }

  /**
   * The shape (a copy); rows x dims for an embedding parameter (empty when its
   * file's chunk headers cannot be read).
   */
  public long[] shape() {
    return shape.clone();
  }

  /**
   * Uncompressed bytes of the tensor data: the values and, for string,
   * sparse and quantized tensors, their offsets, indices, scales and zero
   * points (so more than {@link Tensor#byteSize()}, which counts the values
   * {@link Tensor#buffer()} covers).
   */
  public long bytes() {
    return bytes;
  }

  /** True when the data belongs to another tag ({@link #ownerTag()}). */
  public boolean shared() {
    return shared;
  }

  /** The tag whose folder holds the data. */
  public String ownerTag() {
    return ownerTag;
  }

  /** "dense", "sparse_coo" or "quantized". */
  public String layout() {
    return layout;
  }

  /** True when the data is deflated (read as a copy, not zero-copy). */
  public boolean compressed() {
    return compressed;
  }

  /** True for a finalfusion embedding parameter (open it with {@link Embeddings#open(Archive, String, String)}). */
  public boolean embedding() {
    return embedding;
  }

  /**
   * The zip entry that holds the data ("step-1/params/0.fb"; C++ {@code
   * ParamInfo::blob}, Python's {@code blob}), in {@link #ownerTag()}'s
   * folder: the blob as the format stores it (FORMAT.md), a header before
   * the values, for {@link Archive#entry(String)}, {@link
   * Archive#entryStream(String)} and {@code java.util.zip}.
   */
  public String blob() {
    return blob;
  }

  /** Equal in every part. */
  @Override
  public boolean equals(Object other) {
    if (!(other instanceof Param)) {
      return false;
    }
    Param o = (Param) other;
    return name.equals(o.name) && state.equals(o.state) && dtype.equals(o.dtype) && Arrays.equals(shape, o.shape)
        && bytes == o.bytes && shared == o.shared && ownerTag.equals(o.ownerTag)
        && layout.equals(o.layout) && compressed == o.compressed && embedding == o.embedding
        && blob.equals(o.blob);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, state, dtype, Arrays.hashCode(shape), bytes, shared, ownerTag, layout,
        compressed, embedding, blob);
  }

  @Override
  public String toString() {
    return name + (state.isEmpty() ? "" : " " + state) + " " + dtype + Arrays.toString(shape) + " " + bytes + " bytes"
        + (shared ? " (shared from " + ownerTag + ")" : "");
  }
}
