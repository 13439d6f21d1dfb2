package org.modelzip;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * How {@link Archive#save(String, String, java.util.Map, SaveOptions)}
 * commits: the options of C++'s {@code WriterOptions} and
 * {@code Writer::keep_last}, and of Python's {@code modelzip.save}, under
 * the same names, a change of the archive's metadata in the same commit
 * (Python's {@code metadata=}), and what the new tag holds besides its
 * tensors: parameters and optimizer state shared from other tags
 * ({@code NewTag::share}, {@code share_updater_state}) and its training
 * configuration (Python's {@code training=}).
 *
 * <pre>{@code
 * SaveOptions rolling = SaveOptions.defaults().keepLast(3).compress(true)
 *     .metadata(MetadataUpdate.none().modelName("resnet18"));
 * }</pre>
 *
 * <p>Immutable: each method returns a new object, so one instance may be
 * shared by several threads and saves.
 */
public final class SaveOptions {
  private static final SaveOptions DEFAULTS = new SaveOptions(
      0, true, false, true, false, MetadataUpdate.none(), Map.of(), null, List.of(), Map.of());

  private final int keepLast;  // 0: keep every tag
  private final boolean durable;
  private final boolean compress;
  private final boolean dedup;
  private final boolean replace;
  private final MetadataUpdate metadata;
  private final Map<String, Share> shares;  // unmodifiable, in the order given
  private final TrainingConfig training;  // null: none
  private final List<UpdaterStateShare> stateShares;  // unmodifiable, in the order given
  private final Map<String, Embeddings> embeddings; // unmodifiable, in the order given

  /**
   * Where a shared parameter's data is: parameter {@code fromParam} of the
   * existing tag {@code fromTag} (see {@link SaveOptions#share}).
   */
  public record Share(String fromTag, String fromParam) {
    public Share {
      Objects.requireNonNull(fromTag, "fromTag");
      Objects.requireNonNull(fromParam, "fromParam");
    }
  }

  /**
   * An optimizer state of the new tag that is the same state of an existing
   * tag (see {@link SaveOptions#shareUpdaterState}): state {@code state} of
   * variable {@code variable}, as tag {@code fromTag} has it.
   */
  public record UpdaterStateShare(String variable, String state, String fromTag) {
    public UpdaterStateShare {
      Objects.requireNonNull(variable, "variable");
      Objects.requireNonNull(state, "state");
      Objects.requireNonNull(fromTag, "fromTag");
    }
  }

  private SaveOptions(int keepLast, boolean durable, boolean compress, boolean dedup,
      boolean replace, MetadataUpdate metadata, Map<String, Share> shares, TrainingConfig training,
      List<UpdaterStateShare> stateShares, Map<String, Embeddings> embeddings) {
    this.keepLast = keepLast;
    this.durable = durable;
    this.compress = compress;
    this.dedup = dedup;
    this.replace = replace;
    this.metadata = metadata;
    this.shares = shares;
    this.training = training;
    this.stateShares = stateShares;
    this.embeddings = embeddings;
  }

  /**
   * The options of {@link Archive#save(String, String, java.util.Map)}:
   * every tag kept, durable, uncompressed, with dedup, no replacing, the
   * metadata kept as it is.
   */
  public static SaveOptions defaults() {
    return DEFAULTS;
  }

  /**
   * After the new tag, only the newest {@code n} tags (the new one among
   * them) are kept; the older ones are removed in the same commit, also those
   * another writer added meanwhile (C++ {@code Writer::keep_last}, Python's
   * {@code keep_last=}). Their bytes stay in the file as free entries until
   * the archive is rewritten (e.g. by {@code modelzip gc}).
   *
   * @throws IllegalArgumentException if {@code n} is 0 or negative (C++
   *     refuses 0 with INVALID_ARGUMENT; a negative count has no meaning)
   */
  public SaveOptions keepLast(int n) {
    if (n <= 0) {
      throw new IllegalArgumentException("keepLast must be at least 1, not " + n
          + " (a save keeps its own tag)");
    }
    return new SaveOptions(
        n, durable, compress, dedup, replace, metadata, shares, training, stateShares, embeddings);
  }

  /**
   * With {@code false}, the commit does not wait for the file and its folder
   * to reach the disk (no fsync): faster, still atomic for readers and other
   * writers, but after a power loss the file may hold the old archive.
   * Default {@code true}.
   */
  public SaveOptions durable(boolean durable) {
    return new SaveOptions(keepLast, durable, compress, dedup, replace, metadata, shares, training,
        stateShares, embeddings);
  }

  /**
   * With {@code true}, every tensor is stored deflated (smaller; read as a
   * decompressed copy, not zero-copy: {@link Param#compressed()}). Default
   * {@code false}: stored, aligned, zero-copy.
   */
  public SaveOptions compress(boolean compress) {
    return new SaveOptions(keepLast, durable, compress, dedup, replace, metadata, shares, training,
        stateShares, embeddings);
  }

  /**
   * With {@code true} (the default), tensors equal to data already in the
   * archive are stored as references to it ({@link Param#shared()}).
   */
  public SaveOptions dedup(boolean dedup) {
    return new SaveOptions(keepLast, durable, compress, dedup, replace, metadata, shares, training,
        stateShares, embeddings);
  }

  /**
   * With {@code true}, a tag of the same name (matched without regard to
   * case) is replaced in the same commit, as {@link Archive#replace} does;
   * with {@code false} (the default) the save refuses it (ALREADY_EXISTS).
   */
  public SaveOptions replace(boolean replace) {
    return new SaveOptions(keepLast, durable, compress, dedup, replace, metadata, shares, training,
        stateShares, embeddings);
  }

  /**
   * Changes the archive's metadata in the same commit as the new tag (see
   * {@link MetadataUpdate}: the fields it names, the others kept; Python's
   * {@code save(..., metadata=)}). Default {@link MetadataUpdate#none()}.
   */
  public SaveOptions metadata(MetadataUpdate metadata) {
    return new SaveOptions(keepLast, durable, compress, dedup, replace,
        Objects.requireNonNull(metadata, "metadata"), shares, training, stateShares, embeddings);
  }

  /**
   * The new tag's parameter {@code name} is parameter {@code fromParam} of
   * the existing tag {@code fromTag} (matched without regard to case),
   * written as a reference to its data without the data being read,
   * compared or given as a tensor (C++ {@code NewTag::share}, Python's
   * {@code share={name: (tag, param)}}): the way to keep an unchanged
   * parameter of a large checkpoint, where dedup would find the same
   * reference only by comparing every byte. {@code name} follows the
   * tensors of the save, in the order the shares were given, and must not
   * be one of them. The share is resolved when the save commits: a tag or
   * parameter that does not exist then fails the save (NOT_FOUND), and a
   * tag cannot share from the tag it replaces. Sharing the same name again
   * replaces the earlier share. The shares belong to these options, so an
   * options object reused for another save shares them there too.
   */
  public SaveOptions share(String name, String fromTag, String fromParam) {
    Objects.requireNonNull(name, "name");
    Map<String, Share> more = new LinkedHashMap<>(shares);
    more.put(name, new Share(fromTag, fromParam));
    return new SaveOptions(keepLast, durable, compress, dedup, replace, metadata,
        Collections.unmodifiableMap(more), training, stateShares, embeddings);
  }

  /**
   * The new tag's optimizer state {@code state} of variable {@code variable}
   * is that state of the existing tag {@code fromTag} (matched without
   * regard to case), written as a reference to its data without the data
   * being read or given as a tensor (C++ {@code NewTag::share_updater_state}):
   * optimizer state of a frozen variable, which does not change. The
   * shared states follow the states of the save, in the order given, and
   * must not be among them (INVALID_ARGUMENT); sharing the same variable and
   * state again replaces the earlier share. Resolved when the save commits,
   * as {@link #share} is: a tag, variable or state that does not exist then
   * fails the save (NOT_FOUND), the archive left as it was.
   */
  public SaveOptions shareUpdaterState(String variable, String state, String fromTag) {
    UpdaterStateShare share = new UpdaterStateShare(variable, state, fromTag);
    List<UpdaterStateShare> more = new ArrayList<>(stateShares);
    more.removeIf(s -> s.variable().equals(variable) && s.state().equals(state));
    more.add(share);
    return new SaveOptions(keepLast, durable, compress, dedup, replace, metadata, shares, training,
        List.copyOf(more), embeddings);
  }

  /**
   * Saves {@code config} as the new tag's training configuration (its
   * trainingConfig.fb: C++'s {@code encode_training_config}, Python's
   * {@code training=}), read back by {@link Archive#trainingConfig};
   * {@code null} (the default): none.
   */
  public SaveOptions trainingConfig(TrainingConfig config) {
    return new SaveOptions(keepLast, durable, compress, dedup, replace, metadata, shares, config,
        stateShares, embeddings);
  }

  /**
   * The new tag gets the embedding parameter {@code name} holding {@code
   * embeddings} as a finalfusion file (C++ {@code NewTag::add_embedding},
   * Python's {@code save} of an {@code Embeddings} value), read back by
   * {@link Embeddings#open(Archive, String, String)}, the command's {@code
   * embed} and {@code similar} and Python: embeddings made with {@link
   * Embeddings#fromMatrix}, or those of an existing .fifu file ({@link
   * Embeddings#open(String)}, which checked it). Always stored uncompressed
   * and aligned, whatever {@link #compress}. Embedding parameters follow the
   * tensors of the save, in the order given; a name that is also a tensor's
   * or a share's fails the save (INVALID_ARGUMENT, the archive left as it
   * was), as in C++. Naming the same parameter again replaces the earlier
   * embeddings. The embeddings are written when the save runs and must be
   * open then (a closed one throws {@link IllegalStateException} naming the
   * parameter). Embeddings read from a .fifu file or an archive's parameter
   * are stored as that file's bytes, unchanged (as {@code modelzip import}
   * stores a .fifu file), straight from its mapping; those made with {@link
   * Embeddings#fromMatrix} are encoded into memory of the file's size
   * meanwhile.
   */
  public SaveOptions embedding(String name, Embeddings embeddings) {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(embeddings, "embeddings");
    Map<String, Embeddings> more = new LinkedHashMap<>(this.embeddings);
    more.put(name, embeddings);
    return new SaveOptions(keepLast, durable, compress, dedup, replace, metadata, shares, training,
        stateShares, Collections.unmodifiableMap(more));
  }

  /**
   * The embedding parameters by name ({@link #embedding}), in the order given; empty by default.
   */
  public Map<String, Embeddings> embeddings() { return embeddings; }

  /** The training configuration saved with the tag ({@link #trainingConfig(TrainingConfig)}). */
  public Optional<TrainingConfig> trainingConfig() {
    return Optional.ofNullable(training);
  }

  /** The shared optimizer states ({@link #shareUpdaterState}), in the order given. */
  public List<UpdaterStateShare> updaterStateShares() {
    return stateShares;
  }

  /** The shared parameters by name ({@link #share}), in the order given; empty by default. */
  public Map<String, Share> shares() {
    return shares;
  }

  /** The number of tags kept, or empty when every tag is kept. */
  public OptionalInt keepLast() {
    return keepLast == 0 ? OptionalInt.empty() : OptionalInt.of(keepLast);
  }

  public boolean durable() {
    return durable;
  }

  public boolean compress() {
    return compress;
  }

  public boolean dedup() {
    return dedup;
  }

  public boolean replace() {
    return replace;
  }

  public MetadataUpdate metadata() {
    return metadata;
  }

  /** Equal in every option. */
  @Override
  public boolean equals(Object other) {
    return other instanceof SaveOptions o && keepLast == o.keepLast && durable == o.durable
        && compress == o.compress && dedup == o.dedup && replace == o.replace
        && metadata.equals(o.metadata) && shares.equals(o.shares)
        && Objects.equals(training, o.training) && stateShares.equals(o.stateShares)
        && embeddings.equals(o.embeddings);
  }

  @Override
  public int hashCode() {
    return java.util.Objects.hash(keepLast, durable, compress, dedup, replace, metadata, shares,
        training, stateShares, embeddings);
  }

  @Override
  public String toString() {
    return "SaveOptions(keepLast=" + (keepLast == 0 ? "all" : String.valueOf(keepLast))
        + ", durable=" + durable + ", compress=" + compress + ", dedup=" + dedup + ", replace="
        + replace + ", metadata=" + metadata + (shares.isEmpty() ? "" : ", shares=" + shares)
        + (stateShares.isEmpty() ? "" : ", updaterStateShares=" + stateShares)
        + (embeddings.isEmpty() ? "" : ", embeddings=" + embeddings)
        + (training == null ? "" : ", trainingConfig=" + training) + ")";
  }
}
