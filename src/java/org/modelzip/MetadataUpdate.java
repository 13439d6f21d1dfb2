package org.modelzip;

import java.util.Arrays;
import java.util.Collections;
import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * A change of the archive's metadata: fields to set, fields to clear, the
 * others kept. {@link Archive#updateMetadata} commits one alone (as the
 * command's {@code modelzip meta}), {@link SaveOptions#metadata} with a save
 * (Python's {@code save(..., metadata=)}).
 *
 * <pre>{@code
 * MetadataUpdate update = MetadataUpdate.none().modelName("resnet18").modelVersion("2")
 *     .clear(Metadata.Field.QUANTIZATION);
 * }</pre>
 *
 * <p>The change is applied at commit, under the archive's write lock, to the
 * metadata the archive has then (C++'s {@code Writer::update_metadata}), so
 * fields that another writer changes at the same time and this update does
 * not name are kept. The format version cannot be set, and the writer field
 * is always set to this modelzip by the commit.
 *
 * <p>Immutable: each method returns a new object. Values are checked when
 * they are given, before anything is written.
 */
public final class MetadataUpdate {
  private static final Metadata.Field[] FIELDS = Metadata.Field.values();
  private static final MetadataUpdate NONE = new MetadataUpdate(0, new String[FIELDS.length]);

  private final int changed;  // bit f.ordinal(): field f is set (value non-null) or cleared
  private final String[] values;

  private MetadataUpdate(int changed, String[] values) {
    this.changed = changed;
    this.values = values;
  }

  /** The update that changes nothing: the start of every other one. */
  public static MetadataUpdate none() {
    return NONE;
  }

  /**
   * Every field as {@code whole} has it, those it lacks cleared: copies the
   * metadata of another archive (as Python's update with a
   * {@code modelzip.Metadata}). Its format version and writer are not
   * copied (see the class comment).
   */
  public static MetadataUpdate from(Metadata whole) {
    Objects.requireNonNull(whole, "whole");
    MetadataUpdate out = NONE;
    for (Metadata.Field f : FIELDS) {
      Optional<String> value = whole.get(f);
      out = value.isPresent() ? out.set(f, value.get()) : out.clear(f);
    }
    return out;
  }

  /**
   * Sets {@code field} to {@code value} (any text, the empty string
   * included).
   *
   * @throws NullPointerException if {@code value} is null (use
   *     {@link #clear} to remove a field)
   * @throws IllegalArgumentException if {@code value} holds an unpaired
   *     surrogate (not Unicode text; it names the index)
   */
  public MetadataUpdate set(Metadata.Field field, String value) {
    Objects.requireNonNull(field, "field");
    Objects.requireNonNull(value, () -> field.key() + " is null (clear(" + field + ") removes it)");
    Utf8.encode(value);  // checked here, not at the commit
    return with(field, value);
  }

  /** Removes {@code fields} from the metadata (Optional.empty() when read). */
  public MetadataUpdate clear(Metadata.Field... fields) {
    MetadataUpdate out = this;
    for (Metadata.Field f : fields) {
      out = out.with(Objects.requireNonNull(f, "field"), null);
    }
    return out;
  }

  /** {@code set(Metadata.Field.MODEL_NAME, value)}. */
  public MetadataUpdate modelName(String value) {
    return set(Metadata.Field.MODEL_NAME, value);
  }

  /** {@code set(Metadata.Field.MODEL_VERSION, value)}. */
  public MetadataUpdate modelVersion(String value) {
    return set(Metadata.Field.MODEL_VERSION, value);
  }

  /** {@code set(Metadata.Field.QUANTIZATION, value)}, e.g. "none" or "int8-per-channel". */
  public MetadataUpdate quantization(String value) {
    return set(Metadata.Field.QUANTIZATION, value);
  }

  /** {@code set(Metadata.Field.DESCRIPTION, value)}. */
  public MetadataUpdate description(String value) {
    return set(Metadata.Field.DESCRIPTION, value);
  }

  /**
   * The fields this update changes, in the order of {@link Metadata.Field}:
   * the new value, or empty for a field it clears. Fields it keeps are
   * absent.
   */
  public Map<Metadata.Field, Optional<String>> changes() {
    Map<Metadata.Field, Optional<String>> out = new EnumMap<>(Metadata.Field.class);
    for (Metadata.Field f : FIELDS) {
      if (changes(f)) {
        out.put(f, Optional.ofNullable(values[f.ordinal()]));
      }
    }
    return Collections.unmodifiableMap(out);
  }

  /** Whether this update changes nothing. */
  public boolean isEmpty() {
    return changed == 0;
  }

  private boolean changes(Metadata.Field f) {
    return (changed & (1 << f.ordinal())) != 0;
  }

  private MetadataUpdate with(Metadata.Field field, String value) {
    String[] copy = values.clone();
    copy[field.ordinal()] = value;
    return new MetadataUpdate(changed | (1 << field.ordinal()), copy);
  }

  /** For the natives: a bit per changed field (bit i: Metadata.Field i). */
  int changedMask() {
    return changed;
  }

  /** For the natives: the UTF-8 value of each field, by ordinal (null: cleared or kept). */
  byte[][] utf8Values() {
    byte[][] out = new byte[FIELDS.length][];
    for (int i = 0; i < FIELDS.length; i++) {
      out[i] = Utf8.encode(values[i]);
    }
    return out;
  }

  /** Equal when both change the same fields to the same values. */
  @Override
  public boolean equals(Object other) {
    return other instanceof MetadataUpdate o && changed == o.changed
        && Arrays.equals(values, o.values);
  }

  @Override
  public int hashCode() {
    return 31 * changed + Arrays.hashCode(values);
  }

  @Override
  public String toString() {
    StringBuilder out = new StringBuilder("MetadataUpdate(");
    String separator = "";
    for (Map.Entry<Metadata.Field, Optional<String>> e : changes().entrySet()) {
      out.append(separator).append(e.getKey().key()).append('=')
          .append(e.getValue().map(v -> "\"" + v + "\"").orElse("(cleared)"));
      separator = ", ";
    }
    return out.append(')').toString();
  }
}
