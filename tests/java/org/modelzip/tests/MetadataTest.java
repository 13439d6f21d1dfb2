package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.Metadata;
import org.modelzip.MetadataUpdate;
import org.modelzip.ModelzipException;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;

/**
 * Writing the metadata from Java (MetadataUpdate, SaveOptions.metadata,
 * Archive.updateMetadata), read back field by field by Python and the
 * modelzip command, theirs read by Java, and what a refused or failed change
 * leaves.
 */
public class MetadataTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  // Text a careless encoder gets wrong: accents, CJK, an emoji (a surrogate
  // pair in Java), both quotes, a backslash, control characters, NUL, DEL
  // and a line separator.
  private static final String ODD = "r\u00e9snet \u65e5\u672c \uD83D\uDE42 'q' \"qq\" \\ a\tb\nc"
      + "\r\u0000\u0001\u007f\u2028";

  private static Map<String, Tensor> weights(int step) {
    Map<String, Tensor> out = new LinkedHashMap<>();
    out.put("w", Tensor.of(new float[] {step, -step, step / 4f}, 3));
    out.put("step", Tensor.of(new long[] {step}));
    return out;
  }

  private Metadata read(String path) {
    try (Archive archive = Archive.open(path)) {
      return archive.metadata();
    }
  }

  private static void assertFields(Metadata m, String name, String version, String quantization,
      String description) {
    assertEquals(Optional.ofNullable(name), m.modelName());
    assertEquals(Optional.ofNullable(version), m.modelVersion());
    assertEquals(Optional.ofNullable(quantization), m.quantization());
    assertEquals(Optional.ofNullable(description), m.description());
    assertEquals(1, m.formatVersion());
    assertTrue(m.writer(), m.writer().startsWith("modelzip "));
  }

  /** Python's ascii() of an optional str (None when empty). */
  static String pythonAscii(Optional<String> value) {
    if (value.isEmpty()) {
      return "None";
    }
    String s = value.get();
    char quote = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
    StringBuilder out = new StringBuilder().append(quote);
    s.codePoints().forEach(c -> {
      if (c == quote || c == '\\') {
        out.append('\\').appendCodePoint(c);
      } else if (c == '\t') {
        out.append("\\t");
      } else if (c == '\n') {
        out.append("\\n");
      } else if (c == '\r') {
        out.append("\\r");
      } else if (c >= 0x20 && c < 0x7f) {
        out.appendCodePoint(c);
      } else if (c <= 0xff) {
        out.append(String.format("\\x%02x", c));
      } else if (c <= 0xffff) {
        out.append(String.format("\\u%04x", c));
      } else {
        out.append(String.format("\\U%08x", c));
      }
    });
    return out.append(quote).toString();
  }

  /** The fields interop.py meta prints: field -> Python's ascii() of its value. */
  private static Map<String, String> pythonFields(String output) {
    Map<String, String> out = new HashMap<>();
    for (String line : output.split("\n")) {
      int eq = line.indexOf('=');
      if (eq > 0) {
        out.put(line.substring(0, eq), line.substring(eq + 1));
      }
    }
    return out;
  }

  /** Every field of {@code m} as Python prints it (interop.py meta). */
  private static void assertPythonReads(Metadata m, Map<String, String> python) {
    assertEquals(String.valueOf(m.formatVersion()), python.get("format_version"));
    for (Metadata.Field f : Metadata.Field.values()) {
      assertEquals(f.key(), pythonAscii(m.get(f)), python.get(f.key()));
    }
    assertEquals(pythonAscii(Optional.of(m.writer())), python.get("writer"));
  }

  /** Each zip entry but modelzip.toml: its method, CRC, sizes and bytes. */
  private static Map<String, List<Object>> entriesButMetadata(String path) throws Exception {
    Map<String, List<Object>> out = new LinkedHashMap<>();
    try (ZipFile zip = new ZipFile(path)) {
      for (Enumeration<? extends ZipEntry> e = zip.entries(); e.hasMoreElements();) {
        ZipEntry entry = e.nextElement();
        if (entry.getName().equals("modelzip.toml")) {
          continue;
        }
        out.put(entry.getName(), List.of(entry.getMethod(), entry.getCrc(), entry.getSize(),
            entry.getCompressedSize(),
            ByteBuffer.wrap(zip.getInputStream(entry).readAllBytes())));
      }
    }
    return out;
  }

  private List<String> filesInScratch() throws Exception {
    try (Stream<Path> files = Files.list(scratch.getRoot().toPath())) {
      return files.map(p -> p.getFileName().toString()).sorted().collect(Collectors.toList());
    }
  }

  @Test
  public void aSaveSetsTheFieldsItsUpdateNamesAndKeepsTheOthers() {
    String path = scratch.archive();
    Archive.save(path, "a", weights(1), SaveOptions.defaults()
        .metadata(MetadataUpdate.none().modelName("resnet18").description("first run")));
    Metadata first = read(path);
    assertFields(first, "resnet18", null, null, "first run");
    Archive.save(path, "b", weights(2));  // no update: the metadata stays
    assertEquals(first, read(path));
    Archive.save(path, "c", weights(3), SaveOptions.defaults().keepLast(2).metadata(
        MetadataUpdate.none().modelVersion("3").clear(Metadata.Field.DESCRIPTION)));
    assertFields(read(path), "resnet18", "3", null, null);
    try (Archive archive = Archive.open(path)) {
      assertEquals(List.of("b", "c"), archive.tags());
      assertEquals(List.of(), archive.verify());
    }
  }

  @Test
  public void updateMetadataLeavesEveryTagAndTensorAsItWas() throws Exception {
    String path = scratch.archive();
    Archive.save(path, "a", weights(1));
    Archive.save(path, "b", weights(2), SaveOptions.defaults().compress(true));
    Archive.save(path, "c", weights(1));  // references to a's data (dedup)
    Map<String, List<Object>> before = entriesButMetadata(path);
    List<List<?>> paramsBefore = new ArrayList<>();
    try (Archive archive = Archive.open(path)) {
      for (String tag : archive.tags()) {
        paramsBefore.add(archive.params(tag));
      }
    }
    Metadata returned = Archive.updateMetadata(path,
        MetadataUpdate.none().modelName(ODD).quantization("none"));
    assertFields(returned, ODD, null, "none", null);
    assertEquals(read(path), returned);
    // Every entry but modelzip.toml is byte for byte as it was, stored or
    // deflated as it was: no tensor was encoded again.
    assertEquals(before, entriesButMetadata(path));
    try (Archive archive = Archive.open(path)) {
      assertEquals(List.of("a", "b", "c"), archive.tags());
      List<List<?>> paramsAfter = new ArrayList<>();
      for (String tag : archive.tags()) {
        paramsAfter.add(archive.params(tag));
      }
      assertEquals(paramsBefore, paramsAfter);
      assertEquals(List.of(), archive.verify());
    }
    // A second update changes what it names and keeps the rest.
    Archive.updateMetadata(path, MetadataUpdate.none().description("d").clear(
        Metadata.Field.QUANTIZATION));
    assertFields(read(path), ODD, null, null, "d");
    assertEquals(before, entriesButMetadata(path));
    assertEquals(List.of("model.zip"), filesInScratch());
  }

  @Test
  public void metadataWrittenInJavaIsWhatTheCommandReads() throws Exception {
    String path = scratch.archive();
    Archive.save(path, "a", weights(1), SaveOptions.defaults().metadata(MetadataUpdate.none()
        .modelName(ODD).modelVersion("2").quantization("int8-per-channel")));
    Metadata m = read(path);
    @SuppressWarnings("unchecked")
    Map<String, Object> meta = (Map<String, Object>) Json.parse(
        TestSupport.cli("meta", path, "--json").out());
    @SuppressWarnings("unchecked")
    Map<String, Object> info = (Map<String, Object>) ((Map<String, Object>) Json.parse(
        TestSupport.cli("info", path, "--json").out())).get("metadata");
    // meta --json and info --json name the fields alike (model_name...); meta
    // also writes 0.1's name and version in 0.2 (deprecated, docs/cli.md).
    for (Metadata.Field f : Metadata.Field.values()) {
      Object want = m.get(f).map(v -> (Object) v).orElse(Json.NULL);
      assertEquals(f.key(), want, meta.get(f.key()));
      assertEquals(f.key(), want, info.get(f.key()));
    }
    assertEquals(ODD, meta.get("model_name"));
    assertEquals(meta.get("model_name"), meta.get("name"));
    assertEquals(meta.get("model_version"), meta.get("version"));
    assertEquals(Json.NULL, meta.get("description"));
    for (Map<String, Object> read : List.of(meta, info)) {
      assertEquals("1", read.get("format_version"));
      assertEquals(m.writer(), read.get("writer"));
    }
  }

  @Test
  public void metadataSetByTheCommandIsKeptWhereJavaDoesNotChangeIt() throws Exception {
    String path = scratch.archive();
    Archive.save(path, "a", weights(1));
    String name = "bert \u00e9 \uD83D\uDE42 \"x\" 'y'";
    TestSupport.cli("meta", path, "--name", name, "--description", "line 1\nline 2");
    Metadata m = Archive.updateMetadata(path, MetadataUpdate.none().modelVersion("7"));
    assertFields(m, name, "7", null, "line 1\nline 2");
    @SuppressWarnings("unchecked")
    Map<String, Object> meta = (Map<String, Object>) Json.parse(
        TestSupport.cli("meta", path, "--json").out());
    assertEquals(name, meta.get("model_name"));
    assertEquals("7", meta.get("model_version"));
    assertEquals("line 1\nline 2", meta.get("description"));
  }

  @Test
  public void metadataWrittenInJavaIsWhatPythonReadsAndTheOtherWay() throws Exception {
    String path = scratch.archive();
    Archive.save(path, "a", weights(1), SaveOptions.defaults().metadata(MetadataUpdate.none()
        .modelName(ODD).description("").quantization("none")));
    Metadata m = read(path);
    assertFields(m, ODD, null, "none", "");
    assertPythonReads(m, pythonFields(TestSupport.python("meta", path).out()));
    // Python changes two fields (one to any text, given escaped), clears one
    // and keeps the fourth; Java reads what Python reads.
    String fromPython = "\u00fcber \uD83E\uDD16 \\ \"'\n\u0000";
    String escaped = pythonAscii(Optional.of(fromPython));
    Map<String, String> python = pythonFields(TestSupport.python("meta", path,
        "model_version:=" + escaped.substring(1, escaped.length() - 1),
        "description=python", "model_name=").out());
    Metadata after = read(path);
    assertFields(after, null, fromPython, "none", "python");
    assertPythonReads(after, python);
  }

  @Test
  public void aRefusedSaveChangesNoMetadataAndItsHintNamesSaveOptions() throws Exception {
    String path = scratch.archive();
    Archive.save(path, "a", weights(1),
        SaveOptions.defaults().metadata(MetadataUpdate.none().modelName("one")));
    byte[] bytes = Files.readAllBytes(Paths.get(path));
    ModelzipException e = assertThrows(ModelzipException.class, () -> Archive.save(path, "A",
        weights(2), SaveOptions.defaults().metadata(MetadataUpdate.none().modelName("two"))));
    assertEquals(ModelzipException.Code.ALREADY_EXISTS, e.code());
    assertTrue(e.getMessage(), e.getMessage().endsWith("; SaveOptions.replace(true) replaces it"));
    assertArrayEquals(bytes, Files.readAllBytes(Paths.get(path)));
    // With replace(true) the same save replaces the tag and sets the name.
    Archive.save(path, "A", weights(2), SaveOptions.defaults().replace(true)
        .metadata(MetadataUpdate.none().modelName("two")));
    assertFields(read(path), "two", null, null, null);
  }

  @Test
  public void updateMetadataCreatesAMissingArchive() throws Exception {
    // As C++'s Writer and Python's update_metadata do: no tags, the metadata
    // given.
    String missing = scratch.file("missing.zip");
    Metadata created = Archive.updateMetadata(missing, MetadataUpdate.none().modelName("x"));
    assertEquals(Optional.of("x"), created.modelName());
    assertEquals(Optional.empty(), created.description());
    try (Archive archive = Archive.open(missing)) {
      assertEquals(List.of(), archive.tags());
      assertEquals(created, archive.metadata());
    }
    assertEquals(List.of("missing.zip"), filesInScratch());
  }

  @Test
  public void badValuesAreRefusedWhenTheUpdateIsMade() throws Exception {
    NullPointerException npe =
        assertThrows(NullPointerException.class, () -> MetadataUpdate.none().modelName(null));
    assertTrue(npe.getMessage(), npe.getMessage().contains("clear(MODEL_NAME)"));
    assertThrows(NullPointerException.class, () -> MetadataUpdate.none().set(null, "x"));
    assertThrows(NullPointerException.class,
        () -> MetadataUpdate.none().clear((Metadata.Field) null));
    assertThrows(NullPointerException.class, () -> SaveOptions.defaults().metadata(null));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> MetadataUpdate.none().description("ab\uDC00"));
    assertTrue(e.getMessage(), e.getMessage().contains("unpaired surrogate U+DC00 at index 2"));

    // A damaged archive is left as it is.
    Path damaged = Paths.get(scratch.file("damaged.zip"));
    byte[] junk = "PK\u0003\u0004 not a zip at all".getBytes(StandardCharsets.UTF_8);
    Files.write(damaged, junk);
    ModelzipException error = assertThrows(ModelzipException.class,
        () -> Archive.updateMetadata(damaged.toString(), MetadataUpdate.none().modelName("x")));
    assertEquals(ModelzipException.Code.CORRUPT, error.code());
    assertEquals(damaged.toString(), error.archive());
    assertArrayEquals(junk, Files.readAllBytes(damaged));
    assertEquals(List.of("damaged.zip"), filesInScratch());
  }

  @Test
  public void updatesAreValuesComparedByWhatTheyChange() {
    MetadataUpdate none = MetadataUpdate.none();
    assertTrue(none.isEmpty());
    assertEquals(Map.of(), none.changes());
    MetadataUpdate u = none.modelName("n").clear(Metadata.Field.DESCRIPTION);
    assertTrue(none.isEmpty());  // unchanged: each method returns a new update
    assertFalse(u.isEmpty());
    assertEquals(List.of(Metadata.Field.MODEL_NAME, Metadata.Field.DESCRIPTION),
        new ArrayList<>(u.changes().keySet()));
    assertEquals(Optional.of("n"), u.changes().get(Metadata.Field.MODEL_NAME));
    assertEquals(Optional.empty(), u.changes().get(Metadata.Field.DESCRIPTION));
    assertThrows(UnsupportedOperationException.class, () -> u.changes().clear());
    MetadataUpdate same = none.clear(Metadata.Field.DESCRIPTION)
        .set(Metadata.Field.MODEL_NAME, "n");
    assertEquals(u, same);
    assertEquals(u.hashCode(), same.hashCode());
    assertNotEquals(u, none.modelName("n"));  // keeping a field is not clearing it
    assertNotEquals(u, none.modelName("m").clear(Metadata.Field.DESCRIPTION));
    assertEquals("MetadataUpdate(model_name=\"n\", description=(cleared))", u.toString());
    // The last change of a field wins.
    assertEquals(none.modelName("n"), none.clear(Metadata.Field.MODEL_NAME).modelName("n"));
    assertEquals(SaveOptions.defaults().metadata(u), SaveOptions.defaults().metadata(same));
    assertNotEquals(SaveOptions.defaults(), SaveOptions.defaults().metadata(u));
    assertEquals(none, SaveOptions.defaults().metadata());
  }

  @Test
  public void fromCopiesTheMetadataOfAnotherArchive() {
    String source = scratch.file("source.zip");
    String target = scratch.archive();
    Archive.save(source, "a", weights(1), SaveOptions.defaults().metadata(
        MetadataUpdate.none().modelName("resnet").quantization("none").description(ODD)));
    Archive.save(target, "a", weights(1),
        SaveOptions.defaults().metadata(MetadataUpdate.none().modelVersion("old")));
    Metadata copied = Archive.updateMetadata(target, MetadataUpdate.from(read(source)));
    assertFields(copied, "resnet", null, "none", ODD);  // the version it lacks is cleared
    assertEquals(read(source), copied);
    assertEquals(MetadataUpdate.from(copied), MetadataUpdate.from(read(source)));
  }

  @Test
  public void concurrentUpdatesOfDifferentFieldsKeepEachOther() throws Exception {
    // Each update is applied under the write lock to the metadata the archive
    // has then: whatever the interleaving, neither thread loses the other's
    // field, and each field ends with its thread's last value.
    String path = scratch.archive();
    Archive.save(path, "a", weights(1));
    int rounds = 20;
    List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
    Thread names = new Thread(() -> {
      try {
        for (int i = 0; i < rounds; i++) {
          Archive.updateMetadata(path, MetadataUpdate.none().modelName("name-" + i));
        }
      } catch (Throwable t) {
        errors.add(t);
      }
    });
    Thread versions = new Thread(() -> {
      try {
        for (int i = 0; i < rounds; i++) {
          Archive.save(path, "v" + i, weights(i), SaveOptions.defaults().durable(false)
              .metadata(MetadataUpdate.none().modelVersion("version-" + i)));
        }
      } catch (Throwable t) {
        errors.add(t);
      }
    });
    names.start();
    versions.start();
    names.join();
    versions.join();
    assertEquals(List.of(), errors);
    assertFields(read(path), "name-" + (rounds - 1), "version-" + (rounds - 1), null, null);
    try (Archive archive = Archive.open(path)) {
      assertEquals(rounds + 1, archive.tags().size());
      assertEquals(List.of(), archive.verify());
    }
  }

  @Test
  public void aFailedUpdateLeavesTheArchiveAsItWas() throws Exception {
    // A JVM of its own under a file size limit of 1 MiB: the commit rewrites
    // the 4 MiB archive into a temporary file, and the write beyond 1 MiB
    // fails (EFBIG; the JVM ignores SIGXFSZ).
    String path = scratch.archive();
    float[] big = new float[1 << 20];
    for (int i = 0; i < big.length; i++) {
      big[i] = i;
    }
    Archive.save(path, "a", Map.of("big", Tensor.of(big)),
        SaveOptions.defaults().metadata(MetadataUpdate.none().modelName("kept")));
    byte[] bytes = Files.readAllBytes(Paths.get(path));
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    String command = "ulimit -f 2048 && exec \"$0\" \"$@\"";  // blocks of 512 bytes
    TestSupport.Run run = TestSupport.run(List.of("/bin/sh", "-c", command, java,
        "-Djava.library.path=" + System.getProperty("java.library.path"),
        "-cp", System.getProperty("java.class.path"), MetadataProbe.class.getName(), path,
        "changed"));
    assertEquals(run.stderr + run.out(), 3, run.exitCode);
    assertTrue(run.out(), run.out().startsWith("IO " + path + ": "));
    assertArrayEquals(bytes, Files.readAllBytes(Paths.get(path)));
    assertEquals(List.of("model.zip"), filesInScratch());  // no temporary file left
    // Without the limit the same update succeeds.
    Metadata m = Archive.updateMetadata(path, MetadataUpdate.none().description("changed"));
    assertFields(m, "kept", null, null, "changed");
  }
}
