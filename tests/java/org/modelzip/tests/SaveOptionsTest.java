package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.Metadata;
import org.modelzip.ModelzipException;
import org.modelzip.Param;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;

/** Archive.save with SaveOptions (keepLast, durable, compress, dedup, replace) and Archive.metadata. */
public class SaveOptionsTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  private static Map<String, Tensor> weights(int step) {
    Map<String, Tensor> out = new LinkedHashMap<>();
    out.put("w", Tensor.of(new float[] {step, step + 0.5f, -step}, 3));
    out.put("step", Tensor.of(new long[] {step}));
    return out;
  }

  private static void checkStep(Archive archive, String tag, int step) {
    assertArrayEquals(new float[] {step, step + 0.5f, -step},
        archive.tensor("w", tag).toFloatArray(), 0f);
    assertArrayEquals(new long[] {step}, archive.tensor("step", tag).toLongArray());
  }

  @Test
  public void keepLastRollsTheCheckpointsInEachSave() {
    SaveOptions rolling = SaveOptions.defaults().keepLast(2);
    for (int step = 1; step <= 5; step++) {
      Archive.save(scratch.archive(), "step-" + step, weights(step), rolling);
      try (Archive archive = Archive.open(scratch.archive())) {
        List<String> want = new ArrayList<>();
        for (int kept = Math.max(1, step - 1); kept <= step; kept++) {
          want.add("step-" + kept);
        }
        assertEquals(want, archive.tags());
      }
    }
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("step-4", "step-5"), archive.tags());
      checkStep(archive, "step-4", 4);
      checkStep(archive, "step-5", 5);
      assertEquals(List.of(), archive.verify());
    }
  }

  @Test
  public void keepLastWithReplaceCountsTheReplacedTagOnce() {
    Archive.save(scratch.archive(), "a", weights(1));
    Archive.save(scratch.archive(), "best", weights(2));
    Archive.save(scratch.archive(), "c", weights(3));
    // "best" is replaced and becomes the newest; keepLast(2) then keeps c and it.
    Archive.save(scratch.archive(), "BEST", weights(4),
        SaveOptions.defaults().replace(true).keepLast(2));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("c", "BEST"), archive.tags());
      checkStep(archive, "c", 3);
      checkStep(archive, "best", 4);
      assertEquals(List.of(), archive.verify());
    }
    // Without replace(true) the options refuse an existing tag, as save does;
    // the hint names the option that replaces it (it named Archive.replace).
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "c", weights(5), SaveOptions.defaults().keepLast(1)));
    assertEquals(ModelzipException.Code.ALREADY_EXISTS, e.code());
    assertTrue(e.getMessage(), e.getMessage().endsWith(
        "tag 'c' exists already (tags ignore case); SaveOptions.replace(true) replaces it"));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("c", "BEST"), archive.tags());
    }
  }

  @Test
  public void nonDurableSaveReadsBackExactly() {
    Archive.save(scratch.archive(), "fast", weights(7), SaveOptions.defaults().durable(false));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("fast"), archive.tags());
      checkStep(archive, "fast", 7);
      assertEquals(List.of(), archive.verify());
    }
  }

  @Test
  public void compressedSaveIsDeflatedAndReadsBackExactly() throws Exception {
    float[] values = new float[4096];  // compressible: a short period
    for (int i = 0; i < values.length; i++) {
      values[i] = (i % 7) * 0.25f;
    }
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    tensors.put("big", Tensor.of(values, 64, 64));
    tensors.put("names", Tensor.of(new String[] {"x", "y"}));
    Archive.save(scratch.archive(), "plain", tensors);
    Archive.save(scratch.archive(), "small", tensors,
        SaveOptions.defaults().compress(true).dedup(false));
    try (Archive archive = Archive.open(scratch.archive())) {
      for (Param p : archive.params("small")) {
        assertTrue(p.toString(), p.compressed());
        assertFalse(p.toString(), p.shared());
      }
      for (Param p : archive.params("plain")) {
        assertFalse(p.toString(), p.compressed());
      }
      assertArrayEquals(values, archive.tensor("big", "small").toFloatArray(), 0f);
      assertArrayEquals(new String[] {"x", "y"}, archive.tensor("names", "small").toStringArray());
      assertFalse(archive.tensor("big", "small").isMapped());
      assertEquals(List.of(), archive.verify());
    }
    // What a zip reader sees: the new tag's parameter entries are deflated and
    // smaller than the stored ones of "plain".
    try (ZipFile zip = new ZipFile(scratch.archive())) {
      List<ZipEntry> deflated = new ArrayList<>();
      long plainBytes = 0;
      long smallBytes = 0;
      for (ZipEntry entry : java.util.Collections.list(zip.entries())) {
        if (entry.getName().startsWith("small/params/")) {
          assertEquals(entry.getName(), ZipEntry.DEFLATED, entry.getMethod());
          deflated.add(entry);
          smallBytes += entry.getCompressedSize();
        } else if (entry.getName().startsWith("plain/params/")) {
          assertEquals(entry.getName(), ZipEntry.STORED, entry.getMethod());
          plainBytes += entry.getCompressedSize();
        }
      }
      assertEquals(2, deflated.size());
      assertTrue(smallBytes + " deflated bytes, " + plainBytes + " stored", smallBytes < plainBytes);
    }
  }

  @Test
  public void aStreamingZipReaderReadsEveryEntryAsZipFileDoes() throws Exception {
    // java.util.zip.ZipInputStream reads local headers only (no central
    // directory): it refuses stored entries whose sizes come after the data,
    // and checks every CRC-32 as it reads.
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    tensors.put("w", Tensor.of(new float[] {1, 2, 3, 4}, 2, 2));
    tensors.put("names", Tensor.of(new String[] {"x", "y"}));
    Archive.save(scratch.archive(), "stored", tensors);
    Archive.save(scratch.archive(), "deflated", tensors,
        SaveOptions.defaults().compress(true).dedup(false));
    Map<String, byte[]> streamed = new LinkedHashMap<>();
    try (java.util.zip.ZipInputStream in =
             new java.util.zip.ZipInputStream(Files.newInputStream(Path.of(scratch.archive())))) {
      for (ZipEntry e = in.getNextEntry(); e != null; e = in.getNextEntry()) {
        streamed.put(e.getName(), in.readAllBytes());
      }
    }
    try (ZipFile zip = new ZipFile(scratch.archive())) {
      List<String> names = new ArrayList<>();
      for (ZipEntry entry : java.util.Collections.list(zip.entries())) {
        names.add(entry.getName());
        assertArrayEquals(entry.getName(), zip.getInputStream(entry).readAllBytes(),
            streamed.get(entry.getName()));
      }
      assertEquals(names, List.copyOf(streamed.keySet()));
      assertTrue(names.toString(), names.contains("deflated/params/0.fb"));
    }
  }

  @Test
  public void dedupOptionDecidesWhetherEqualDataIsShared() {
    Tensor same = Tensor.of(new double[] {1, 2, 3});
    Archive.save(scratch.archive(), "a", Map.of("x", same));
    Archive.save(scratch.archive(), "b", Map.of("x", same));
    Archive.save(scratch.archive(), "c", Map.of("x", same), SaveOptions.defaults().dedup(false));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertTrue(archive.params("b").get(0).shared());
      assertFalse(archive.params("c").get(0).shared());
      assertArrayEquals(new double[] {1, 2, 3}, archive.tensor("x", "c").toDoubleArray(), 0);
    }
  }

  @Test
  public void invalidOptionsAreRefusedBeforeAnythingIsWritten() {
    IllegalArgumentException zero =
        assertThrows(IllegalArgumentException.class, () -> SaveOptions.defaults().keepLast(0));
    assertTrue(zero.getMessage(), zero.getMessage().contains("at least 1, not 0"));
    assertThrows(IllegalArgumentException.class, () -> SaveOptions.defaults().keepLast(-3));
    assertThrows(IllegalArgumentException.class,
        () -> SaveOptions.defaults().keepLast(Integer.MIN_VALUE));
    assertThrows(NullPointerException.class,
        () -> Archive.save(scratch.archive(), "a", weights(1), null));
    assertFalse(Files.exists(Path.of(scratch.archive())));
  }

  @Test
  public void optionsAreImmutableValues() {
    SaveOptions d = SaveOptions.defaults();
    SaveOptions rolling = d.keepLast(3).durable(false);
    assertEquals(OptionalInt.empty(), d.keepLast());
    assertTrue(d.durable());
    assertFalse(d.compress());
    assertTrue(d.dedup());
    assertFalse(d.replace());
    assertEquals(OptionalInt.of(3), rolling.keepLast());
    assertFalse(rolling.durable());
    assertEquals(rolling, SaveOptions.defaults().durable(false).keepLast(3));
    assertEquals(rolling.hashCode(), SaveOptions.defaults().durable(false).keepLast(3).hashCode());
    assertFalse(rolling.equals(d));
  }

  private static Map<String, String> pythonFields(String output) {
    Map<String, String> out = new LinkedHashMap<>();
    for (String line : output.split("\n")) {
      int eq = line.indexOf('=');
      out.put(line.substring(0, eq), line.substring(eq + 1));
    }
    return out;
  }

  /** Python's repr of an optional str (ASCII values in these tests). */
  private static String repr(Optional<String> value) {
    return value.map(v -> "'" + v + "'").orElse("None");
  }

  @Test
  public void metadataOfANewArchiveHasNoOptionalField() {
    Archive.save(scratch.archive(), "a", weights(1));
    try (Archive archive = Archive.open(scratch.archive())) {
      Metadata m = archive.metadata();
      assertEquals(1, m.formatVersion());
      assertEquals(Optional.empty(), m.modelName());
      assertEquals(Optional.empty(), m.modelVersion());
      assertEquals(Optional.empty(), m.quantization());
      assertEquals(Optional.empty(), m.description());
      assertTrue(m.writer(), m.writer().startsWith("modelzip"));
      assertEquals(m, archive.metadata());
    }
  }

  @Test
  public void metadataWrittenByTheCommandIsReadInJava() throws Exception {
    Archive.save(scratch.archive(), "a", weights(1));
    TestSupport.cli("meta", scratch.archive(), "--name", "résnet", "--version", "2",
        "--description", "ImageNet, 90 epochs");
    try (Archive archive = Archive.open(scratch.archive())) {
      Metadata m = archive.metadata();
      assertEquals(Optional.of("résnet"), m.modelName());
      assertEquals(Optional.of("2"), m.modelVersion());
      assertEquals(Optional.empty(), m.quantization());
      assertEquals(Optional.of("ImageNet, 90 epochs"), m.description());
      checkStep(archive, "a", 1);
    }
    TestSupport.cli("meta", scratch.archive(), "--clear", "version", "--quantization", "none");
    try (Archive archive = Archive.open(scratch.archive())) {
      Metadata m = archive.metadata();
      assertEquals(Optional.of("résnet"), m.modelName());
      assertEquals(Optional.empty(), m.modelVersion());
      assertEquals(Optional.of("none"), m.quantization());
    }
  }

  @Test
  public void metadataWrittenByPythonIsReadInJavaAsPythonReadsIt() throws Exception {
    Archive.save(scratch.archive(), "a", weights(1));
    Map<String, String> python = pythonFields(TestSupport.python("meta", scratch.archive(),
        "model_name=bert", "quantization=int8-per-channel", "description=fine-tuned").out());
    try (Archive archive = Archive.open(scratch.archive())) {
      Metadata m = archive.metadata();
      assertEquals(Optional.of("bert"), m.modelName());
      assertEquals(Optional.empty(), m.modelVersion());
      assertEquals(Optional.of("int8-per-channel"), m.quantization());
      assertEquals(Optional.of("fine-tuned"), m.description());
      // Every field as Python's modelzip.Metadata has it.
      assertEquals(String.valueOf(m.formatVersion()), python.get("format_version"));
      assertEquals(repr(m.modelName()), python.get("model_name"));
      assertEquals(repr(m.modelVersion()), python.get("model_version"));
      assertEquals(repr(m.quantization()), python.get("quantization"));
      assertEquals(repr(m.description()), python.get("description"));
      assertEquals(repr(Optional.of(m.writer())), python.get("writer"));
    }
  }
}
