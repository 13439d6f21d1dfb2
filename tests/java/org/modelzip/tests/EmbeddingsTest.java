package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.List;
import java.util.NoSuchElementException;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.Embeddings;
import org.modelzip.ModelzipException;
import org.modelzip.Param;
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
}
