package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.stream.Collectors;
import org.junit.Rule;
import org.junit.Test;
import org.junit.function.ThrowingRunnable;
import org.modelzip.Archive;
import org.modelzip.Embeddings;
import org.modelzip.ModelzipException;
import org.modelzip.Param;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;
import org.modelzip.WordSimilarity;

/**
 * finalfusion lookups on the shared real files: vectors, and similarities
 * checked against cosines computed here from those vectors.
 */
public class EmbeddingsTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();
  private static final String SIMILARITY =
      TestSupport.SHARED_TESTDATA.resolve("finalfusion/similarity.fifu").toString();

  private static double cosine(float[] a, float[] b) {
    double dot = 0, na = 0, nb = 0;
    for (int i = 0; i < a.length; i++) {
      dot += (double) a[i] * b[i];
      na += (double) a[i] * a[i];
      nb += (double) b[i] * b[i];
    }
    return dot / Math.sqrt(na * nb);
  }

  @Test
  public void similarWordsAreRankedByCosine() {
    try (Embeddings e = Embeddings.open(SIMILARITY)) {
      List<String> words = e.words();
      assertTrue(words.contains("Berlin"));
      float[] berlin = e.vector("Berlin");
      assertEquals(e.dims(), berlin.length);
      List<WordSimilarity> similar = e.similar("Berlin", 5);
      assertEquals(5, similar.size());
      assertEquals(similar, e.similar("Berlin", 5));  // values: equal when word and similarity are
      assertFalse(similar.equals(e.similar("Potsdam", 5)));
      double previous = 2;
      for (WordSimilarity s : similar) {
        assertFalse(s.word().equals("Berlin"));
        assertEquals(s.word(), cosine(berlin, e.vector(s.word())), s.similarity(), 1e-5);
        assertTrue(s.similarity() <= previous);
        previous = s.similarity();
      }
      // No other word is closer than the fifth.
      for (String w : words) {
        if (!w.equals("Berlin") && similar.stream().noneMatch(s -> s.word().equals(w))) {
          assertTrue(w, cosine(berlin, e.vector(w)) <= previous + 1e-6);
        }
      }
    }
  }

  @Test
  public void unknownWordsAreNoSuchElement() {
    try (Embeddings e = Embeddings.open(SIMILARITY)) {
      assertFalse(e.contains("NotAWordAtAll"));
      for (NoSuchElementException missing : List.of(
               assertThrows(NoSuchElementException.class, () -> e.vector("NotAWordAtAll")),
               assertThrows(NoSuchElementException.class, () -> e.similar("NotAWordAtAll", 3)))) {
        // As every lookup by name: the cause is the library's NOT_FOUND with the file.
        assertEquals(SIMILARITY + ": no embedding for 'NotAWordAtAll'", missing.getMessage());
        ModelzipException cause = (ModelzipException) missing.getCause();
        assertEquals(ModelzipException.Code.NOT_FOUND, cause.code());
        assertEquals(SIMILARITY, cause.archive());
        assertEquals(missing.getMessage(), cause.getMessage());
      }
      // Messages are printable, as the library's are: a control character
      // of the word is escaped (docs/java.md, Errors).
      NoSuchElementException escaped =
          assertThrows(NoSuchElementException.class, () -> e.vector("Not\rA\u001aWord"));
      assertEquals(SIMILARITY + ": no embedding for 'Not\\rA\\x1aWord'", escaped.getMessage());
      assertEquals("no embedding for 'Not\\rA\\x1aWord'",
          ((ModelzipException) escaped.getCause()).bareMessage());
    }
  }

  @Test
  public void embeddingParametersOfAnArchiveWrittenByPython() throws Exception {
    String path = scratch.archive();
    TestSupport.python("embed", path, "v1", SIMILARITY);
    try (Archive archive = Archive.open(path); Embeddings file = Embeddings.open(SIMILARITY)) {
      Param p = archive.params(null).get(0);
      assertEquals("words", p.name());
      assertTrue(p.embedding());
      assertArrayEquals(new long[] {file.words().size(), file.dims()}, p.shape());  // rows x dims
      assertEquals(file.words().size(), file.rows());
      assertEquals(List.of(), List.copyOf(archive.load(null).keySet()));
      ModelzipException notTensor = assertThrows(ModelzipException.class,
          () -> archive.tensor("words", null));
      assertEquals(ModelzipException.Code.INVALID_ARGUMENT, notTensor.code());
      // The Java way to read it, not C++'s embedding_file(); the context kept.
      assertTrue(notTensor.getMessage(), notTensor.getMessage().endsWith(
          "parameter 'words' is an embedding, not a tensor: read it with"
              + " Embeddings.open(archive, name, tag)"));
      assertEquals(path, notTensor.archive());
      assertEquals("v1", notTensor.tag());
      assertTrue(notTensor.entry(), notTensor.entry().startsWith("v1/params/"));
      Embeddings stored = Embeddings.open(archive, "words", null);
      archive.close();  // the embeddings keep the mapping alive
      assertEquals(file.words(), stored.words());
      assertArrayEquals(file.vector("Berlin"), stored.vector("Berlin"), 0f);
      assertEquals(file.similar("Berlin", 5), stored.similar("Berlin", 5));
      NoSuchElementException missing =
          assertThrows(NoSuchElementException.class, () -> stored.vector("NotAWordAtAll"));
      assertEquals(path + ": parameter 'words': no embedding for 'NotAWordAtAll'",
          missing.getMessage());
      assertEquals(path, ((ModelzipException) missing.getCause()).archive());
      assertEquals("Embeddings(" + path + ":words)", stored.toString());
      assertEquals("Embeddings(" + SIMILARITY + ")", file.toString());
      stored.close();
      assertEquals("Embeddings(" + path + ":words)", stored.toString());  // also when closed
      assertThrows(IllegalStateException.class, () -> stored.vector("Berlin"));
    }
  }

  @Test
  public void subwordVocabulariesEmbedUnknownWords() {
    String buckets = TestSupport.SHARED_TESTDATA.resolve("finalfusion/ff_buckets.fifu").toString();
    try (Embeddings e = Embeddings.open(buckets)) {
      String unknown = "xq" + e.words().get(0);
      assertFalse(e.words().contains(unknown));
      float[] v = e.vector(unknown);
      double norm = 0;
      for (float x : v) {
        norm += x * x;
      }
      assertEquals("subword sums are normalised", 1.0, Math.sqrt(norm), 1e-4);
      // The known words' rows, then the file's 2^10 rows of n-gram buckets
      // (Python's rows gives 1026 for its 2 words).
      assertEquals(2, e.words().size());
      assertEquals(2 + 1024, e.rows());
    }
  }

  /** The unit vectors `modelzip embed --json` prints for {@code words} of SOURCE... */
  private static Map<String, float[]> cliUnitVectors(String... sourceThenWords) throws Exception {
    List<String> args = new ArrayList<>(List.of("embed"));
    args.addAll(List.of(sourceThenWords));
    args.add("--json");
    @SuppressWarnings("unchecked")
    Map<String, Object> json =
        (Map<String, Object>) Json.parse(TestSupport.cli(args.toArray(new String[0])).out());
    Map<String, float[]> out = new LinkedHashMap<>();
    for (Map.Entry<String, Object> e : json.entrySet()) {
      List<?> values = (List<?>) e.getValue();
      float[] v = new float[values.size()];
      for (int i = 0; i < v.length; i++) {
        v[i] = Float.parseFloat((String) values.get(i));
      }
      out.put(e.getKey(), v);
    }
    return out;
  }

  private static final List<String> WORDS = List.of("Berlin", "Paris", "Köln", "New York");
  /** Row i: the vector of WORDS[i]; unit vectors obvious by eye. */
  private static final float[] MATRIX = {0, 2, 0, 0, 3, 0, 0, 0, 0, 0, 0, -5, 1, 1, 0, 0};

  @Test
  public void embeddingsMadeFromAMatrixAreSavedAndReadBackByTheCommand() throws Exception {
    Embeddings made = Embeddings.fromMatrix(WORDS, MATRIX, 4);
    assertEquals(WORDS, made.words());
    assertEquals(4, made.dims());
    assertEquals(4, made.rows());
    assertArrayEquals(new float[] {0, 0, 0, -5}, made.vector("Köln"), 0f); // stored as given
    Archive.save(scratch.archive(), "v1", Map.of("w", Tensor.of(new float[] {1, 2})),
        SaveOptions.defaults().embedding("words", made).compress(true));
    try (Archive archive = Archive.open(scratch.archive())) {
      Param p = archive.param("words", "v1");
      assertTrue(p.embedding());
      assertFalse(p.compressed()); // always stored
      assertEquals(List.of("w", "words"),
          archive.params("v1").stream().map(Param::name).collect(Collectors.toList()));
      try (Embeddings read = Embeddings.open(archive, "words", "v1")) {
        assertEquals(WORDS, read.words());
        for (int i = 0; i < WORDS.size(); i++) {
          assertArrayEquals(WORDS.get(i), Arrays.copyOfRange(MATRIX, 4 * i, 4 * i + 4),
              read.vector(WORDS.get(i)), 0f);
        }
      }
    }
    // The command reads the parameter: unit vectors, and the nearest word.
    float r = (float) Math.sqrt(0.5);
    Map<String, float[]> unit =
        cliUnitVectors(scratch.archive(), "words", "Berlin", "Köln", "New York");
    assertArrayEquals(new float[] {0, 1, 0, 0}, unit.get("Berlin"), 0f);
    assertArrayEquals(new float[] {0, 0, 0, -1}, unit.get("Köln"), 0f);
    assertArrayEquals(new float[] {r, r, 0, 0}, unit.get("New York"), 1e-7f);
    String similar =
        TestSupport.cli("similar", scratch.archive(), "words", "Berlin", "-k", "1").out();
    assertTrue(similar, similar.startsWith("New York"));
    // A .fifu file: written by save, read by open and the command alike.
    String fifu = scratch.file("made.fifu");
    made.save(fifu);
    try (Embeddings again = Embeddings.open(fifu)) {
      assertEquals(WORDS, again.words());
      assertArrayEquals(Arrays.copyOfRange(MATRIX, 4, 8), again.vector("Paris"), 0f);
    }
    assertArrayEquals(new float[] {1, 0, 0, 0}, cliUnitVectors(fifu, "Paris").get("Paris"), 0f);
    made.close();
  }

  @Test
  public void embeddingsReadFromAFileOrAnArchiveAreSavedAsTheirBytes() throws Exception {
    // Files whose rewrite differs from them (the library's writer lists a
    // norms chunk their header leaves out: subwords with metadata, simple),
    // and ones it reproduces (quantized, dense).
    for (String name :
        List.of("ff_buckets.fifu", "embeddings.fifu", "pq.fifu", "similarity.fifu")) {
      String path = TestSupport.SHARED_TESTDATA.resolve("finalfusion/" + name).toString();
      byte[] original = Files.readAllBytes(Paths.get(path));
      String archivePath = scratch.file(name + ".zip");
      try (Embeddings file = Embeddings.open(path)) {
        Archive.save(archivePath, "v1", Map.of(), SaveOptions.defaults().embedding("e", file));
        file.save(scratch.file("file-" + name));
      }
      assertArrayEquals(
          name, original, Files.readAllBytes(Paths.get(scratch.file("file-" + name))));
      String blob;
      try (Archive archive = Archive.open(archivePath)) {
        blob = archive.param("e", "v1").blob();
        assertArrayEquals(name, original, archive.entry(blob));
        // Read back from the archive and saved again (no dedup: a blob of its own).
        try (Embeddings stored = Embeddings.open(archive, "e", "v1")) {
          Archive.save(archivePath, "v2", Map.of(),
              SaveOptions.defaults().embedding("e", stored).dedup(false));
          stored.save(scratch.file("stored-" + name));
        }
      }
      assertArrayEquals(
          name, original, Files.readAllBytes(Paths.get(scratch.file("stored-" + name))));
      String blob2;
      try (Archive archive = Archive.open(archivePath)) {
        Param again = archive.param("e", "v2");
        assertFalse(again.shared());
        blob2 = again.blob();
      }
      // As another zip reader sees the entries.
      Map<String, byte[]> entries = new LinkedHashMap<>();
      try (java.util.zip.ZipInputStream zip =
               new java.util.zip.ZipInputStream(Files.newInputStream(Paths.get(archivePath)))) {
        for (java.util.zip.ZipEntry e; (e = zip.getNextEntry()) != null;) {
          entries.put(e.getName(), zip.readAllBytes());
        }
      }
      assertArrayEquals(name, original, entries.get(blob));
      assertArrayEquals(name, original, entries.get(blob2));
    }
  }

  @Test
  public void anExistingFifuFileIsSavedAsAnEmbeddingParameter() throws Exception {
    String buckets = TestSupport.SHARED_TESTDATA.resolve("finalfusion/ff_buckets.fifu").toString();
    try (Embeddings file = Embeddings.open(buckets)) {
      Archive.save(
          scratch.archive(), "v1", Map.of(), SaveOptions.defaults().embedding("subwords", file));
    }
    try (Embeddings file = Embeddings.open(buckets);
         Archive archive = Archive.open(scratch.archive());
         Embeddings saved = Embeddings.open(archive, "subwords", null)) {
      assertEquals(file.words(), saved.words());
      assertEquals(file.rows(), saved.rows());
      String known = file.words().get(0);
      String unknown = known + "xyzzy"; // through its subwords
      assertArrayEquals(file.vector(known), saved.vector(known), 0f);
      assertArrayEquals(file.vector(unknown), saved.vector(unknown), 0f);
      // The command reads both alike.
      assertArrayEquals(cliUnitVectors(buckets, known, unknown).get(unknown),
          cliUnitVectors(scratch.archive(), "subwords", known, unknown).get(unknown), 0f);
    }
  }

  @Test
  public void embeddingParametersAreCheckedAsInCpp() throws Exception {
    // Caller mistakes: IllegalArgumentException, the library's INVALID_ARGUMENT its cause.
    for (ThrowingRunnable wrong :
        List.<ThrowingRunnable>of(()
                                      -> Embeddings.fromMatrix(WORDS, Arrays.copyOf(MATRIX, 12), 4),
            ()
                -> Embeddings.fromMatrix(WORDS, MATRIX, 2),
            ()
                -> Embeddings.fromMatrix(List.of("a", "b", "a", "c"), MATRIX, 4),
            () -> Embeddings.fromMatrix(WORDS, MATRIX, 4, new float[] {1, 2}))) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, wrong);
      assertEquals(e.getMessage(), ModelzipException.Code.INVALID_ARGUMENT,
          ((ModelzipException) e.getCause()).code());
    }
    assertThrows(IllegalArgumentException.class, () -> Embeddings.fromMatrix(WORDS, MATRIX, -4));
    assertThrows(NullPointerException.class,
        () -> Embeddings.fromMatrix(java.util.Arrays.asList("a", null, "b", "c"), MATRIX, 4));
    Embeddings made = Embeddings.fromMatrix(WORDS, MATRIX, 4, new float[] {1, 2, 3, 4});
    Archive.save(scratch.archive(), "v1", Map.of("w", Tensor.of(new float[] {1})));
    byte[] before = Files.readAllBytes(Paths.get(scratch.archive()));
    // A name that is also a tensor's fails the save, naming it; the archive stays.
    ModelzipException clash = assertThrows(ModelzipException.class,
        ()
            -> Archive.save(scratch.archive(), "v2", Map.of("w", Tensor.of(new float[] {1})),
                SaveOptions.defaults().embedding("w", made)));
    assertEquals(ModelzipException.Code.INVALID_ARGUMENT, clash.code());
    assertEquals("v2", clash.tag());
    assertTrue(clash.getMessage(), clash.getMessage().contains("'w'"));
    assertArrayEquals(before, Files.readAllBytes(Paths.get(scratch.archive())));
    // Closed embeddings are named, not read.
    made.close();
    IllegalStateException closed = assertThrows(IllegalStateException.class,
        ()
            -> Archive.save(
                scratch.archive(), "v2", Map.of(), SaveOptions.defaults().embedding("emb", made)));
    assertTrue(closed.getMessage(), closed.getMessage().contains("embedding parameter 'emb'"));
    assertThrows(IllegalStateException.class, () -> made.save(scratch.file("x.fifu")));
    assertArrayEquals(before, Files.readAllBytes(Paths.get(scratch.archive())));
  }
}
