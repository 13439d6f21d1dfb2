package org.modelzip;

import java.util.Objects;
import java.util.Optional;

/**
 * The archive's metadata (the entry {@code modelzip.toml}), as
 * {@link Archive#metadata()} reads it: the fields of C++'s
 * {@code modelzip::Metadata} and Python's {@code modelzip.Metadata}, under
 * the same names. An optional field the archive does not set is empty (Python:
 * None). Written by {@link Archive#updateMetadata}, a save with
 * {@link SaveOptions#metadata}, Python's {@code modelzip.update_metadata} or
 * the command's {@code modelzip meta}.
 *
 * <p>Immutable.
 */
public final class Metadata {
  /** The fields a user sets ({@link MetadataUpdate}), in this order everywhere. */
  public enum Field {
    MODEL_NAME("model_name"),
    MODEL_VERSION("model_version"),
    QUANTIZATION("quantization"),
    DESCRIPTION("description");

    private final String key;

    Field(String key) {
      this.key = key;
    }

    /** Its name in Python's {@code modelzip.Metadata}, e.g. "model_name". */
    public String key() {
      return key;
    }
  }

  private final int formatVersion;
  private final String modelName;  // null: not set
  private final String modelVersion;
  private final String quantization;
  private final String description;
  private final String writer;

  /** Built by {@link Archive#metadata()} from the native fields. */
  Metadata(int formatVersion, String modelName, String modelVersion, String quantization,
      String description, String writer) {
    this.formatVersion = formatVersion;
    this.modelName = modelName;
    this.modelVersion = modelVersion;
    this.quantization = quantization;
    this.description = description;
    this.writer = Objects.requireNonNull(writer, "writer");
  }

  /** The version of the archive format (FORMAT.md), 1 today. */
  public int formatVersion() {
    return formatVersion;
  }

  /** The name of the model. */
  public Optional<String> modelName() {
    return Optional.ofNullable(modelName);
  }

  /** The version of the model. */
  public Optional<String> modelVersion() {
    return Optional.ofNullable(modelVersion);
  }

  /** How the model is quantized, e.g. "none" or "int8-per-channel". */
  public Optional<String> quantization() {
    return Optional.ofNullable(quantization);
  }

  /** Free text. */
  public Optional<String> description() {
    return Optional.ofNullable(description);
  }

  /** The value of {@code field}: {@code get(Field.MODEL_NAME)} is {@link #modelName()}. */
  public Optional<String> get(Field field) {
    return switch (field) {
      case MODEL_NAME -> modelName();
      case MODEL_VERSION -> modelVersion();
      case QUANTIZATION -> quantization();
      case DESCRIPTION -> description();
    };
  }

  /** The software that wrote the archive last, e.g. "modelzip 0.4.0". */
  public String writer() {
    return writer;
  }

  /** Equal in every field. */
  @Override
  public boolean equals(Object other) {
    return other instanceof Metadata o && formatVersion == o.formatVersion
        && Objects.equals(modelName, o.modelName) && Objects.equals(modelVersion, o.modelVersion)
        && Objects.equals(quantization, o.quantization)
        && Objects.equals(description, o.description) && writer.equals(o.writer);
  }

  @Override
  public int hashCode() {
    return Objects.hash(formatVersion, modelName, modelVersion, quantization, description, writer);
  }

  @Override
  public String toString() {
    return "Metadata(modelName=" + modelName + ", modelVersion=" + modelVersion
        + ", quantization=" + quantization + ", description=" + description + ", formatVersion="
        + formatVersion + ", writer=" + writer + ")";
  }
}
