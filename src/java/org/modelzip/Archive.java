package org.modelzip;

import java.io.InputStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Read access to a modelzip archive: a zip of tagged checkpoints (see the
 * project's schemas/FORMAT.md), written by this binding, Python, C++ or the
 * modelzip command.
 *
 * <pre>{@code
 * try (Archive archive = Archive.open("model.zip")) {
 *   Tensor w = archive.tensor("fc.weight", null);   // newest tag
 *   float[] values = w.toFloatArray();
 * }
 * }</pre>
 *
 * <p>Opening maps the file read-only and validates its tables; tensor data is
 * read only when asked for. Tensors of stored (uncompressed) entries are
 * zero-copy views into the mapping. Zero-copy views are not CRC-checked
 * (that would read every byte at open); reads with {@code copy} and
 * {@link #verify()} check every CRC-32.
 *
 * <p>Lifetimes: each {@link Tensor} (and each buffer from
 * {@link Tensor#buffer()}) keeps the mapping alive by itself, so tensors stay
 * valid after the Archive is closed. {@link #close()} releases the archive's
 * own hold at once; an archive that is never closed is released when it is
 * garbage collected.
 *
 * <p>Thread safety: an Archive is immutable; every method may be called from
 * several threads at once. {@link #close()} waits for calls in progress; later
 * calls throw {@link IllegalStateException}.
 *
 * <p>Errors: {@link ModelzipException} with the archive, entry, tag and
 * line/offset; missing tags and names give {@link NoSuchElementException}
 * (see {@link ModelzipException}). A damaged or hostile file never crashes
 * the JVM: it is reported by an exception.
 *
 * <p>Tags are matched without regard to ASCII case; a {@code null} tag means
 * the newest, and so does {@code ""} in a read, as in C++ (where an empty tag
 * is the default, "the newest") and Python ({@code tag=""}): no tag can be
 * named "" (a save refuses it, INVALID_ARGUMENT).
 */
public final class Archive implements AutoCloseable {
  // What the error of an existing tag says replaces it: the call that fits
  // the one that failed.
  private static final String REPLACE_HINT = "Archive.replace replaces it";
  private static final String OPTIONS_REPLACE_HINT = "SaveOptions.replace(true) replaces it";

  private final NativeHandle handle;
  private final String name;

  private Archive(long pointer, String name) {
    this.name = name;
    this.handle = new NativeHandle(pointer, Native::archiveFree, "archive '" + name + "'");
  }

  /**
   * Opens a local file, or an {@code http://}, {@code https://} or
   * {@code s3://bucket/key} URL (read by ranges; configured by the
   * environment as for the modelzip command: MODELZIP_CACHE_DIR, AWS_*...).
   *
   * @throws ModelzipException IO when the file cannot be read (errno in
   *     {@link ModelzipException#systemError()}), CORRUPT or LIMIT_EXCEEDED
   *     for a damaged or hostile file, UNSUPPORTED for a URL when the library
   *     was built without remote support
   */
  public static Archive open(String pathOrUrl) {
    Objects.requireNonNull(pathOrUrl, "pathOrUrl");
    return new Archive(Native.archiveOpen(Native.utf8(pathOrUrl)), pathOrUrl);
  }

  /** The path or URL given to {@link #open}. */
  public String name() {
    return name;
  }

  /**
   * Whether the archive is no longer what this Archive describes: a local
   * file that another writer has committed to since the open, that a
   * rewrite replaced, that was removed, or whose committed state differs
   * otherwise; a URL whose object was replaced or removed on the server.
   * Then {@link #reopen()} gives the archive as it is now; this Archive
   * keeps describing it as it was ({@link #tags()}, {@link #load(String)}...).
   * A local file costs a few system calls (its append journal and the file's
   * identity, FORMAT.md section 8.3) and, when those moved, a read of its
   * tail (tags.txt, central directory), so an append still in flight, one
   * rolled back or a touch is not a change; a URL costs one HEAD request
   * (size and ETag, or Last-Modified).
   *
   * @throws ModelzipException IO when the file or its append journal cannot
   *     be looked at, or the server cannot be asked
   */
  public boolean changedSinceOpen() {
    return handle.call(Native::archiveChangedSinceOpen);
  }

  /**
   * A new Archive of the same path or URL: the archive as it is now (as
   * {@link #open} of {@link #name()}). This Archive stays open as it is:
   * close it when done.
   *
   * @throws ModelzipException as {@link #open} (IO for a file removed since)
   */
  public Archive reopen() {
    return new Archive(handle.call(Native::archiveReopen), name);
  }

  /** The tags, oldest first. */
  public List<String> tags() {
    return List.of(Native.strings(handle.call(Native::archiveTags)));
  }

  /**
   * The parameters of {@code tag} ({@code null}: the newest), in stored
   * order, without reading tensor data.
   *
   * @throws NoSuchElementException if the tag does not exist (or the archive
   *     has no tag)
   */
  public List<Param> params(String tag) {
    return ModelzipException.lookup(() -> List.of(
        handle.call(p -> Native.archiveParams(p, Native.utf8(tag)))));
  }

  /**
   * What {@code tag} ({@code null}: the newest) says about parameter
   * {@code name}, without reading tensor data: one element of
   * {@link #params(String)} (Python's {@code Archive.param}).
   *
   * @throws NoSuchElementException if the tag or the parameter does not exist
   */
  public Param param(String name, String tag) {
    Objects.requireNonNull(name, "name");
    return ModelzipException.lookup(() ->
        handle.call(p -> Native.archiveParam(p, Native.utf8(name), Native.utf8(tag))));
  }

  /**
   * The training configuration of {@code tag} ({@code null}: the newest):
   * its trainingConfig.fb (optimizer and hyperparameters, learning-rate
   * schedule, regularization, data-set mappings, loss variables and progress
   * counters; C++ {@code load_training_config}, Python's
   * {@code training_config()}), or empty when the tag has none.
   *
   * @throws NoSuchElementException if the tag does not exist
   * @throws ModelzipException CORRUPT or UNSUPPORTED for a damaged or unknown
   *     configuration (an unknown updater is refused, not guessed)
   */
  public Optional<TrainingConfig> trainingConfig(String tag) {
    Object[] parts = ModelzipException.lookup(() ->
        handle.call(p -> Native.archiveTrainingConfig(p, Native.utf8(tag))));
    return parts == null ? Optional.empty() : Optional.of(TrainingConfig.fromNative(parts));
  }

  /**
   * Every zip entry name, in central directory order ("modelzip.toml",
   * "tags.txt", "step-1/params.txt"...; Python's {@code entry_names()}).
   */
  public List<String> entryNames() {
    return List.of(Native.strings(handle.call(Native::archiveEntryNames)));
  }

  /** Whether the archive has an entry of exactly this name (Python's {@code has_entry}). */
  public boolean hasEntry(String entryName) {
    Objects.requireNonNull(entryName, "entryName");
    return handle.call(p -> Native.archiveHasEntry(p, Native.utf8(entryName)));
  }

  /**
   * The whole contents of entry {@code entryName}, read into a new array
   * with its CRC-32 checked (Python's {@code entry()}): e.g. a tag's
   * "graph.fb" or "trainingConfig.fb", or a file another tool put in the
   * zip. A deflated entry is decompressed straight into the array, through
   * a native buffer of at most 1 MiB: the read needs the array and no
   * native copy of the entry.
   *
   * @throws NoSuchElementException if there is no such entry
   * @throws ModelzipException CORRUPT when the entry is damaged (a wrong
   *     CRC-32 too), LIMIT_EXCEEDED when it is larger than one Java array
   *     (2^31 - 9 bytes; refused by its {@link #entrySize}, before anything
   *     is read: read it with {@link #entry(String, long, int)})
   */
  public byte[] entry(String entryName) {
    Objects.requireNonNull(entryName, "entryName");
    return ModelzipException.lookup(() ->
        handle.call(p -> Native.archiveEntry(p, Native.utf8(entryName))));
  }

  /**
   * The size in bytes of entry {@code entryName} (what {@link #entry(String)}
   * gives), as the zip's central directory declares it, without reading the
   * entry (C++ {@code Archive::entry_size}). Open checked it against the file
   * and, for a deflated entry, against the largest ratio deflate reaches; a
   * read whose data does not match it throws CORRUPT.
   *
   * @throws NoSuchElementException if there is no such entry
   */
  public long entrySize(String entryName) {
    Objects.requireNonNull(entryName, "entryName");
    return ModelzipException.lookup(() ->
        handle.call(p -> Native.archiveEntrySize(p, Native.utf8(entryName))));
  }

  /**
   * {@code length} bytes of entry {@code entryName} from byte {@code offset}
   * on, in a new array: the way to read an entry larger than one Java array,
   * in parts (C++ {@code Archive::entry_part}). A stored entry's part is
   * copied from the mapped file alone; a deflated entry is decompressed from
   * its start to the part's end, keeping only the part in native memory
   * (each call decompresses again from the start: read a deflated entry
   * front to back with {@link #entryStream}). A part is not CRC-checked (it cannot be:
   * read the whole entry with {@link #entry(String)}, or {@link
   * #problems()}, to check it), except a part that ends a deflated entry.
   *
   * @throws NoSuchElementException if there is no such entry
   * @throws IndexOutOfBoundsException if {@code offset} or {@code length} is
   *     negative or the range ends beyond {@link #entrySize}
   * @throws ModelzipException CORRUPT when a deflated entry is damaged
   *     before the part's end
   */
  public byte[] entry(String entryName, long offset, int length) {
    long size = entrySize(entryName);
    Objects.checkFromIndexSize(offset, length, size);
    return ModelzipException.lookup(() -> handle.call(
        p -> Native.archiveEntryPart(p, Native.utf8(entryName), offset, length)));
  }

  /**
   * Entry {@code entryName} as an {@link InputStream}, read front to back
   * (C++ {@code EntryStream::open}; Java's {@code
   * ZipFile.getInputStream}): each read continues where the last one ended,
   * so a deflated entry is decompressed once, in bounded memory, whatever
   * its size (where {@link #entry(String, long, int)} decompresses it from
   * its start on every call). The read that returns the entry's last bytes
   * checks its size and CRC-32. The stream keeps the archive's mapping
   * alive until it is closed or collected, also after this archive is
   * closed; it is for one thread at a time. A remote archive's deflated
   * entry is fetched whole here, a stored one part by part as it is read.
   *
   * @throws NoSuchElementException if there is no such entry
   * @throws ModelzipException for an entry that cannot be opened (a remote
   *     archive's deflated entry that cannot be fetched); the stream's reads
   *     throw {@link ModelzipIOException} (an IOException, the library's
   *     error its cause): CORRUPT naming the entry when it is damaged (IO
   *     when another writer changed the file since this archive was
   *     opened), again on every later read
   */
  public InputStream entryStream(String entryName) {
    Objects.requireNonNull(entryName, "entryName");
    long pointer = ModelzipException.lookup(
        () -> handle.call(p -> Native.archiveEntryStream(p, Native.utf8(entryName))));
    return new EntryInputStream(pointer, "entry '" + entryName + "' of '" + name + "'");
  }

  /**
   * One tensor parameter of {@code tag} ({@code null}: the newest): a
   * zero-copy view of a stored entry, or a decompressed copy of a deflated
   * one. Close it (or let it be collected) to release its hold on the file.
   *
   * @throws NoSuchElementException if the tag or the parameter does not exist
   * @throws ModelzipException CORRUPT when its data is damaged, INVALID_ARGUMENT
   *     for an embedding parameter (open it with {@link Embeddings#open(Archive, String, String)})
   */
  public Tensor tensor(String name, String tag) {
    return tensor(name, tag, false);
  }

  /**
   * One tensor parameter as {@link #tensor(String, String)} reads it, or,
   * with {@code copy}, read into memory of its own with its CRC-32 checked
   * (Python's {@code copy=True}, C++ {@code ReadMode::copy}): zero-copy
   * views are not checked, so a damaged byte in a stored entry gives wrong
   * values where a copy throws CORRUPT naming the entry.
   *
   * @throws NoSuchElementException if the tag or the parameter does not exist
   * @throws ModelzipException CORRUPT when its data is damaged (with
   *     {@code copy}, also a wrong CRC-32), INVALID_ARGUMENT for an embedding
   *     parameter
   */
  public Tensor tensor(String name, String tag, boolean copy) {
    Objects.requireNonNull(name, "name");
    return ModelzipException.lookup(() ->
        handle.call(p -> Native.archiveTensor(p, Native.utf8(name), Native.utf8(tag), copy)))
        .readFrom(this.name, "tensor '" + name + "'", tag);
  }

  /**
   * The optimizer state arrays of {@code tag} ({@code null}: the newest), as
   * its updater.txt lists them (DL4J's updater state: Adam's "M" and "V" of
   * each variable...): {@link Param#name()} is the variable,
   * {@link Param#state()} the state's name. Empty when the tag has none.
   *
   * @throws NoSuchElementException if the tag does not exist
   */
  public List<Param> updaterStates(String tag) {
    return ModelzipException.lookup(() -> List.of(
        handle.call(p -> Native.archiveUpdaterStates(p, Native.utf8(tag)))));
  }

  /**
   * The optimizer state array {@code state} of {@code variable} in
   * {@code tag} ({@code null}: the newest), read as {@link #tensor} reads a
   * parameter (zero-copy when stored).
   *
   * @throws NoSuchElementException if the tag, or that state of that
   *     variable, does not exist
   */
  public Tensor updaterState(String variable, String state, String tag) {
    return updaterState(variable, state, tag, false);
  }

  /**
   * One optimizer state array as {@link #updaterState(String, String, String)}
   * reads it, or with {@code copy} into memory of its own, CRC-checked (see
   * {@link #tensor(String, String, boolean)}).
   *
   * @throws NoSuchElementException if the tag, or that state of that
   *     variable, does not exist
   */
  public Tensor updaterState(String variable, String state, String tag, boolean copy) {
    Objects.requireNonNull(variable, "variable");
    Objects.requireNonNull(state, "state");
    return ModelzipException.lookup(() -> handle.call(p -> Native.archiveUpdaterState(p,
        Native.utf8(variable), Native.utf8(state), Native.utf8(tag), copy)))
        .readFrom(name, "updater state '" + state + "' of '" + variable + "'", tag);
  }

  /**
   * Every tensor parameter of {@code tag} ({@code null}: the newest), by
   * name, in stored order (embedding parameters are left out).
   *
   * @throws NoSuchElementException if the tag does not exist
   */
  public Map<String, Tensor> load(String tag) {
    return load(tag, false);
  }

  /**
   * Every tensor parameter as {@link #load(String)} reads them, or with
   * {@code copy} each into memory of its own, its CRC-32 checked (see
   * {@link #tensor(String, String, boolean)}).
   *
   * @throws NoSuchElementException if the tag does not exist
   * @throws ModelzipException CORRUPT for damaged data (with {@code copy},
   *     also a wrong CRC-32)
   */
  public Map<String, Tensor> load(String tag, boolean copy) {
    Object[] namesAndTensors = ModelzipException.lookup(() ->
        handle.call(p -> Native.archiveLoad(p, Native.utf8(tag), copy)));
    String[] names = Native.strings((byte[][]) namesAndTensors[0]);
    Tensor[] tensors = (Tensor[]) namesAndTensors[1];
    Map<String, Tensor> out = new LinkedHashMap<>();
    for (int i = 0; i < names.length; i++) {
      out.put(names[i], tensors[i].readFrom(name, "tensor '" + names[i] + "'", tag));
    }
    return Collections.unmodifiableMap(out);
  }

  /**
   * The archive's metadata (modelzip.toml): model name, version,
   * quantization, description, the format version and the last writer.
   */
  public Metadata metadata() {
    return metadataOf(handle.call(Native::archiveMetadata));
  }

  /** A Metadata from the fields Native.archiveMetadata gives. */
  private static Metadata metadataOf(byte[][] fields) {
    return new Metadata(Integer.parseInt(Native.string(fields[0])), Native.string(fields[1]),
        Native.string(fields[2]), Native.string(fields[3]), Native.string(fields[4]),
        Native.string(fields[5]));
  }

  /**
   * Checks everything (zip structure, every CRC, every blob and reference,
   * and the consistency rules of graph checkpoints: schemas/GRAPH.md section 4)
   * and returns the problems found, each with its entry and message (C++
   * {@code Archive::verify}, Python's {@code verify()} pairs); empty when
   * the archive is valid. At most 20 per entry, then one "... and N more
   * problems in this entry", which {@link Problem#count()} counts as N and
   * {@link Problem#found} sums.
   */
  public List<Problem> problems() {
    Object[] parts = handle.call(Native::archiveVerify);
    String[] entries = Native.strings((byte[][]) parts[0]);
    String[] messages = Native.strings((byte[][]) parts[1]);
    long[] counts = (long[]) parts[2];
    List<Problem> out = new ArrayList<>(entries.length);
    for (int i = 0; i < entries.length; i++) {
      out.add(new Problem(entries[i], messages[i], counts[i]));
    }
    return Collections.unmodifiableList(out);
  }

  /**
   * The problems {@link #problems()} finds, each as "entry: message" (the
   * message alone for the archive as a whole); empty when the archive is
   * valid. A convenience for printing: an entry name may itself contain
   * ": ", so use {@link #problems()} to tell entry from message.
   */
  public List<String> verify() {
    List<String> out = new ArrayList<>();
    for (Problem p : problems()) {
      out.add(p.toString());
    }
    return Collections.unmodifiableList(out);
  }

  /** verify's line for the problems of an entry that it found but did not list. */
  private static final Pattern MORE_PROBLEMS =
      Pattern.compile("(?:^|: )\\.\\.\\. and ([0-9]+) more (problems?) in this entry$");

  /**
   * How many problems {@link #verify} found, given what it returned: one for
   * each problem listed, and N for each "ENTRY: ... and N more problems in
   * this entry" (verify lists at most 20 per entry). The same count as C++
   * {@code modelzip::problems_found} and Python {@code modelzip.problems_found}.
   */
  public static long problemsFound(List<String> problems) {
    long found = 0;
    for (String problem : problems) {
      Matcher m = MORE_PROBLEMS.matcher(problem);
      long n = 1;
      if (m.find()) {
        try {
          long more = Long.parseLong(m.group(1));
          if (m.group(2).equals(more == 1 ? "problem" : "problems")) n = more;
        } catch (NumberFormatException e) {
          // Not a count verify writes (it does not fit 64 bits): a problem of its own.
        }
      }
      found += n;
    }
    return found;
  }

  /**
   * Adds tag {@code tag} holding {@code tensors} (in the map's iteration
   * order) to the archive at {@code path}, created if missing. The commit is
   * atomic and durable: the file holds the old archive or the new one, never
   * a mix, and a failed save leaves the old one as it was. Tensors equal to
   * data already in the archive are stored as references (dedup). Tensors
   * are not copied; they must stay open during the call. The same as
   * {@code save(path, tag, tensors, SaveOptions.defaults())}.
   *
   * @throws ModelzipException ALREADY_EXISTS if the tag exists (in any letter
   *     case; {@link #replace} replaces it), INVALID_ARGUMENT for a bad tag or parameter name, IO when the
   *     file cannot be written
   * @throws IllegalStateException if one of the tensors is closed (the
   *     message names the archive, the tag and the parameter)
   */
  public static void save(String path, String tag, Map<String, Tensor> tensors) {
    save(path, tag, tensors, Map.of(), SaveOptions.defaults(), REPLACE_HINT);
  }

  /**
   * Saves {@code tag} as {@link #save} does, replacing the tag of that name
   * (matched without regard to case) in the same commit when there is one:
   * readers, and the file after a crash, see the old tag or the new one,
   * never neither (as {@link #removeTag} then {@link #save} could). The new
   * tag becomes the newest, with the new spelling; its tensors are compared
   * for dedup with the other tags, not with the one it replaces. Without a
   * tag of that name it is a plain save. The same as
   * {@code save(path, tag, tensors, SaveOptions.defaults().replace(true))}.
   *
   * @throws ModelzipException INVALID_ARGUMENT for a bad tag or parameter
   *     name, IO when the file cannot be written
   * @throws IllegalStateException if one of the tensors is closed (the
   *     message names the archive, the tag and the parameter)
   */
  public static void replace(String path, String tag, Map<String, Tensor> tensors) {
    save(path, tag, tensors, Map.of(), SaveOptions.defaults().replace(true), REPLACE_HINT);
  }

  /**
   * Saves {@code tag} as {@link #save(String, String, Map)} does, in one
   * commit shaped by {@code options}: replacing a tag of that name, keeping
   * only the newest tags, without fsync, deflated, without dedup, changing
   * the metadata (see {@link SaveOptions}). A rolling checkpoint of a
   * training loop:
   * {@code save(path, "step-" + step, tensors, SaveOptions.defaults().keepLast(3))}.
   *
   * @throws ModelzipException ALREADY_EXISTS if the tag exists and
   *     {@code options} do not replace it (its message says that
   *     {@code SaveOptions.replace(true)} does), INVALID_ARGUMENT for a bad
   *     tag or parameter name, IO when the file cannot be written
   * @throws IllegalStateException if one of the tensors is closed (the
   *     message names the archive, the tag and the parameter)
   */
  public static void save(String path, String tag, Map<String, Tensor> tensors,
      SaveOptions options) {
    save(path, tag, tensors, Map.of(), options, OPTIONS_REPLACE_HINT);
  }

  /**
   * Saves {@code tag} as {@link #save(String, String, Map, SaveOptions)}
   * does, with optimizer state arrays besides the parameters (the tag's
   * updater.txt, read back by {@link #updaterStates} and
   * {@link #updaterState}): {@code updater} maps each variable to its
   * states by name, e.g. {@code Map.of("fc.weight", Map.of("M", m, "V", v))}
   * for Adam (Python's {@code save(..., updater={("fc.weight", "M"): m,
   * ...})}), in the maps' iteration order. Dedup, compression and the
   * checks of names are those of the parameters.
   *
   * @throws ModelzipException as {@link #save(String, String, Map, SaveOptions)},
   *     INVALID_ARGUMENT also for a bad variable or state name
   * @throws IllegalStateException if one of the tensors is closed (the
   *     message names the archive, the tag and the variable and state)
   */
  public static void save(String path, String tag, Map<String, Tensor> tensors,
      Map<String, ? extends Map<String, Tensor>> updater, SaveOptions options) {
    save(path, tag, tensors, updater, options, OPTIONS_REPLACE_HINT);
  }

  /** A use of {@code tensor}, or Java's exception naming it ({@code what}) in the save. */
  private static NativeHandle.Use useForSave(String where, String what, Tensor tensor) {
    Objects.requireNonNull(tensor, () -> where + what + ": the tensor is null");
    try {
      return tensor.handle().use();
    } catch (IllegalStateException closed) {
      throw new IllegalStateException(where + what + ": " + closed.getMessage(), closed);
    }
  }

  private static void save(String path, String tag, Map<String, Tensor> tensors,
      Map<String, ? extends Map<String, Tensor>> updater, SaveOptions options,
      String replaceHint) {
    Objects.requireNonNull(path, "path");
    Objects.requireNonNull(tag, "tag");
    Objects.requireNonNull(tensors, "tensors");
    Objects.requireNonNull(updater, "updater");
    Objects.requireNonNull(options, "options");
    // Java-side errors name the archive, the tag and the parameter, as the
    // library's do (printable as theirs).
    String where = Utf8.printable(path + ": tag '" + tag + "': ");
    List<NativeHandle.Use> uses = new ArrayList<>(tensors.size());
    try {
      byte[][] names = new byte[tensors.size()][];
      long[] pointers = new long[tensors.size()];
      int i = 0;
      for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
        String name = Objects.requireNonNull(e.getKey(), () -> where + "a parameter name is null");
        names[i] = Native.utf8(name);
        NativeHandle.Use use =
            useForSave(where, "parameter '" + Utf8.printable(name) + "'", e.getValue());
        uses.add(use);
        pointers[i++] = use.pointer();
      }
      List<byte[]> variables = new ArrayList<>();
      List<byte[]> states = new ArrayList<>();
      List<Long> statePointers = new ArrayList<>();
      for (Map.Entry<String, ? extends Map<String, Tensor>> v : updater.entrySet()) {
        String variable = Objects.requireNonNull(v.getKey(),
            () -> where + "an updater variable is null");
        Map<String, Tensor> byState = Objects.requireNonNull(v.getValue(),
            () -> where + "updater variable '" + Utf8.printable(variable)
                + "': the states are null");
        for (Map.Entry<String, Tensor> e : byState.entrySet()) {
          String state = Objects.requireNonNull(e.getKey(),
              () -> where + "updater variable '" + Utf8.printable(variable)
                  + "': a state name is null");
          NativeHandle.Use use = useForSave(where, "updater state '" + Utf8.printable(state)
              + "' of '" + Utf8.printable(variable) + "'", e.getValue());
          uses.add(use);
          variables.add(Native.utf8(variable));
          states.add(Native.utf8(state));
          statePointers.add(use.pointer());
        }
      }
      Map<String, SaveOptions.Share> shares = options.shares();
      byte[][] shareNames = new byte[shares.size()][];
      byte[][] shareTags = new byte[shares.size()][];
      byte[][] shareParams = new byte[shares.size()][];
      int s = 0;
      for (Map.Entry<String, SaveOptions.Share> e : shares.entrySet()) {
        shareNames[s] = Native.utf8(e.getKey());
        shareTags[s] = Native.utf8(e.getValue().fromTag());
        shareParams[s++] = Native.utf8(e.getValue().fromParam());
      }
      List<SaveOptions.UpdaterStateShare> stateShares = options.updaterStateShares();
      byte[][] stateShareVariables = new byte[stateShares.size()][];
      byte[][] stateShareStates = new byte[stateShares.size()][];
      byte[][] stateShareTags = new byte[stateShares.size()][];
      for (int j = 0; j < stateShares.size(); j++) {
        stateShareVariables[j] = Native.utf8(stateShares.get(j).variable());
        stateShareStates[j] = Native.utf8(stateShares.get(j).state());
        stateShareTags[j] = Native.utf8(stateShares.get(j).fromTag());
      }
      Map<String, Embeddings> embeddings = options.embeddings();
      byte[][] embeddingNames = new byte[embeddings.size()][];
      long[] embeddingPointers = new long[embeddings.size()];
      int k = 0;
      for (Map.Entry<String, Embeddings> e : embeddings.entrySet()) {
        embeddingNames[k] = Native.utf8(e.getKey());
        NativeHandle.Use use;
        try {
          use = e.getValue().handle().use();
        } catch (IllegalStateException closed) {
          throw new IllegalStateException(where + "embedding parameter '"
                  + Utf8.printable(e.getKey()) + "': " + closed.getMessage(),
              closed);
        }
        uses.add(use);
        embeddingPointers[k++] = use.pointer();
      }
      Object[] training = options.trainingConfig().map(TrainingConfig::toNative).orElse(null);
      MetadataUpdate metadata = options.metadata();
      Native.archiveSave(Native.utf8(path), Native.utf8(tag), names, pointers,
          variables.toArray(new byte[0][]), states.toArray(new byte[0][]),
          statePointers.stream().mapToLong(Long::longValue).toArray(), shareNames, shareTags,
          shareParams, stateShareVariables, stateShareStates, stateShareTags, embeddingNames,
          embeddingPointers, training, options.replace(), options.keepLast().orElse(0),
          options.durable(), options.compress(), options.dedup(), metadata.changedMask(),
          metadata.utf8Values(), Native.utf8(replaceHint));
    } finally {
      for (NativeHandle.Use use : uses) {
        use.close();
      }
    }
  }

  /**
   * Removes {@code tag} (matched without regard to case) from the archive at
   * {@code path}; data that other tags share is kept. Atomic and durable as
   * {@link #save}.
   *
   * @throws NoSuchElementException if the tag does not exist
   */
  public static void removeTag(String path, String tag) {
    Objects.requireNonNull(path, "path");
    Objects.requireNonNull(tag, "tag");
    ModelzipException.lookup(() -> {
      Native.archiveRemoveTag(Native.utf8(path), Native.utf8(tag));
      return null;
    });
  }

  /**
   * Changes the metadata of the archive at {@code path} as {@code update}
   * says, in one commit that leaves every tag and tensor as it is (the
   * command's {@code modelzip meta}, Python's
   * {@code modelzip.update_metadata}): the fields it names are set or
   * cleared under the archive's write lock, the others keep the values the
   * archive has then, also when another writer changed them meanwhile.
   * Atomic and durable as {@link #save}: the file holds the old metadata or
   * the new, and a failed update leaves it as it was. An update that changes
   * nothing still commits (the writer field becomes this modelzip). A
   * missing archive is created, with no tags and this metadata, as C++'s
   * {@code Writer} and Python's {@code update_metadata} create it.
   *
   * @return the metadata as read after the commit
   * @throws ModelzipException IO when the file (or for a new archive its
   *     folder) cannot be read or written, CORRUPT for a damaged archive
   */
  public static Metadata updateMetadata(String path, MetadataUpdate update) {
    Objects.requireNonNull(path, "path");
    Objects.requireNonNull(update, "update");
    return metadataOf(Native.archiveUpdateMetadata(Native.utf8(path), update.changedMask(),
        update.utf8Values()));
  }

  /** The native archive, for {@link Embeddings#open(Archive, String, String)}. */
  NativeHandle handle() {
    return handle;
  }

  /** Releases the archive's hold on the file now; idempotent. */
  @Override
  public void close() {
    handle.close();
  }

  @Override
  public String toString() {
    return "Archive(" + name + ")";
  }
}
