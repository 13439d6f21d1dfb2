package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.ModelzipException;
import org.modelzip.Param;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;

/**
 * SaveOptions.share: a parameter written as a reference to another tag's
 * parameter without its tensor (C++ NewTag::share, Python's share=).
 */
public class ShareTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  private void saveFirst() {
    Map<String, Tensor> first = new LinkedHashMap<>();
    first.put("emb", Tensor.of(new float[] {1, 2, 3, 4}, 2, 2));
    first.put("fc", Tensor.of(new float[] {5, 6}));
    Archive.save(scratch.archive(), "step-1", first);
  }

  @Test
  public void aSharedParameterIsAReferenceWithoutItsTensor() throws Exception {
    saveFirst();
    // Dedup off: only the explicit share can make "emb" a reference, and no
    // tensor of it is given to compare.
    Archive.save(scratch.archive(), "step-2", Map.of("fc", Tensor.of(new float[] {7, 8})),
        SaveOptions.defaults().dedup(false).share("emb", "STEP-1", "emb")
            .share("old_fc", "step-1", "fc"));
    try (Archive archive = Archive.open(scratch.archive())) {
      List<Param> params = archive.params("step-2");
      assertEquals(List.of("fc", "emb", "old_fc"), params.stream().map(Param::name).toList());
      assertFalse(params.get(0).shared());
      Param emb = params.get(1);
      assertTrue(emb.shared());
      assertEquals("step-1", emb.ownerTag());
      assertEquals(archive.param("emb", "step-1").shape().length, emb.shape().length);
      assertTrue(params.get(2).shared());
      assertArrayEquals(new float[] {1, 2, 3, 4}, archive.tensor("emb", null).toFloatArray(), 0f);
      assertArrayEquals(new float[] {5, 6}, archive.tensor("old_fc", null).toFloatArray(), 0f);
      assertEquals(List.of(), archive.problems());
    }
    // Python reads the reference: the blob of step-1, the same values.
    Object python =
        Json.parse(TestSupport.python("param", scratch.archive(), "step-2", "emb").out());
    assertEquals(Map.of("shared", true, "blob", "step-1/params/0.fb",
        "values", List.of(List.of("1.0", "2.0"), List.of("3.0", "4.0"))), python);
  }

  @Test
  public void aShareOfNothingFailsTheSaveAndLeavesTheArchive() throws Exception {
    saveFirst();
    byte[] before = Files.readAllBytes(Paths.get(scratch.archive()));
    for (String[] from : new String[][] {{"step-0", "emb"}, {"step-1", "nothing"}}) {
      ModelzipException e = assertThrows(ModelzipException.class,
          () -> Archive.save(scratch.archive(), "step-2", Map.of(),
              SaveOptions.defaults().share("emb", from[0], from[1])));
      assertEquals(e.getMessage(), ModelzipException.Code.NOT_FOUND, e.code());
      assertEquals(scratch.archive(), e.archive());
      assertEquals("step-2", e.tag());
      String missing = from[0].equals("step-0") ? "step-0" : "nothing";
      assertTrue(e.getMessage(), e.getMessage().contains(missing));
      assertArrayEquals(before, Files.readAllBytes(Paths.get(scratch.archive())));
    }
    // A tag cannot share from the tag it replaces (it is removed first).
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "step-1", Map.of(),
            SaveOptions.defaults().replace(true).share("emb", "step-1", "emb")));
    assertEquals(ModelzipException.Code.NOT_FOUND, e.code());
    assertArrayEquals(before, Files.readAllBytes(Paths.get(scratch.archive())));
  }

  @Test
  public void aSharedNameMustNotBeATensorOfTheSave() {
    saveFirst();
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "step-2",
            Map.of("emb", Tensor.of(new float[] {1})),
            SaveOptions.defaults().share("emb", "step-1", "emb")));
    assertEquals(ModelzipException.Code.INVALID_ARGUMENT, e.code());
    assertEquals("step-2", e.tag());
    assertTrue(e.getMessage(), e.getMessage().contains("'emb'"));
  }

  @Test
  public void sharesAreOptionsValues() {
    SaveOptions a = SaveOptions.defaults().share("emb", "step-1", "emb");
    assertEquals(Map.of(), SaveOptions.defaults().shares());
    assertEquals(Map.of("emb", new SaveOptions.Share("step-1", "emb")), a.shares());
    assertEquals(a, SaveOptions.defaults().share("emb", "step-1", "emb"));
    assertFalse(a.equals(SaveOptions.defaults()));
    // The same name again replaces its share; other options keep the shares.
    assertEquals(Map.of("emb", new SaveOptions.Share("step-0", "e")),
        a.share("emb", "step-0", "e").compress(true).shares());
    assertThrows(UnsupportedOperationException.class, () -> a.shares().clear());
    assertThrows(NullPointerException.class, () -> a.share("x", null, "y"));
    assertThrows(NullPointerException.class, () -> a.share(null, "t", "y"));
  }
}
