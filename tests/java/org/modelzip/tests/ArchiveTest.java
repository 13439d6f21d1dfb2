package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.ModelzipException;
import org.modelzip.Param;
import org.modelzip.Tensor;

/** Archive and Tensor in Java alone: save, read, tags, params, sharing, removal. */
public class ArchiveTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  private static Map<String, Tensor> tensors(Object... nameThenTensor) {
    Map<String, Tensor> out = new LinkedHashMap<>();
    for (int i = 0; i < nameThenTensor.length; i += 2) {
      out.put((String) nameThenTensor[i], (Tensor) nameThenTensor[i + 1]);
    }
    return out;
  }

  @Test
  public void everyDtypeRoundTripsInJava() {
    Archive.save(scratch.archive(), "v1", Values.all());
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("v1"), archive.tags());
      Values.checkAll(archive.load("v1"));
      for (String dtype : Values.DTYPES) {
        try (Tensor t = archive.tensor(dtype, null)) {
          Values.check(dtype, t);
        }
      }
      assertEquals(List.of(), archive.verify());
    }
  }

  @Test
  public void tagsAreOrderedMatchedWithoutCaseAndNullMeansNewest() {
    Archive.save(scratch.archive(), "Step-1", tensors("w", Tensor.of(new float[] {1, 2})));
    Archive.save(scratch.archive(), "step-2", tensors("w", Tensor.of(new float[] {3, 4})));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("Step-1", "step-2"), archive.tags());
      assertArrayEquals(new float[] {3, 4}, archive.tensor("w", null).toFloatArray(), 0f);
      assertArrayEquals(new float[] {1, 2}, archive.tensor("w", "STEP-1").toFloatArray(), 0f);
    }
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "STEP-2", tensors("w", Tensor.of(new float[] {5}))));
    assertEquals(ModelzipException.Code.ALREADY_EXISTS, e.code());
    // The hint names Java's call that replaces a tag.
    assertTrue(e.getMessage(), e.getMessage().endsWith("; Archive.replace replaces it"));
  }

  @Test
  public void paramsDescribeEachTensorAndSharedData() {
    Tensor big = Tensor.of(new double[] {1, 2, 3, 4, 5, 6}, 2, 3);
    Archive.save(scratch.archive(), "a", tensors("big", big, "n", Tensor.of(new long[] {7})));
    // The same values again: stored as a reference to tag a's data (dedup).
    Archive.save(scratch.archive(), "b", tensors("big", big, "n", Tensor.of(new long[] {8})));
    try (Archive archive = Archive.open(scratch.archive())) {
      List<Param> params = archive.params("b");
      assertEquals(2, params.size());
      Param p = params.get(0);
      assertEquals("big", p.name());
      assertEquals("float64", p.dtype());
      assertArrayEquals(new long[] {2, 3}, p.shape());
      assertEquals(48, p.bytes());
      assertTrue(p.shared());
      assertEquals("a", p.ownerTag());
      assertEquals("dense", p.layout());
      assertFalse(params.get(1).shared());
      assertEquals("b", params.get(1).ownerTag());
      assertArrayEquals(new double[] {1, 2, 3, 4, 5, 6}, archive.tensor("big", "b").toDoubleArray(), 0);
      // Values: equal when every part is (lists of them compare as users expect).
      assertEquals(params, archive.params("B"));
      assertEquals(params.hashCode(), archive.params("b").hashCode());
      assertFalse(params.equals(archive.params("a")));
    }
  }

  @Test
  public void replaceSwapsATagInOneCommit() throws Exception {
    Archive.save(scratch.archive(), "latest", tensors("w", Tensor.of(new int[] {1})));
    Archive.save(scratch.archive(), "best", tensors("w", Tensor.of(new int[] {2})));
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "latest", tensors("w", Tensor.of(new int[] {3}))));
    assertEquals(ModelzipException.Code.ALREADY_EXISTS, e.code());
    Archive.replace(scratch.archive(), "Latest", tensors("w", Tensor.of(new int[] {3})));
    Archive.replace(scratch.archive(), "fresh", tensors("w", Tensor.of(new int[] {4})));
    try (Archive archive = Archive.open(scratch.archive())) {
      // The replacement is the newest tag, with the new spelling.
      assertEquals(List.of("best", "Latest", "fresh"), archive.tags());
      assertArrayEquals(new int[] {3}, archive.tensor("w", "latest").toIntArray());
      assertArrayEquals(new int[] {2}, archive.tensor("w", "best").toIntArray());
      assertEquals(List.of(), archive.verify());
    }
  }

  @Test
  public void anArchiveTellsWhetherItChangedSinceOpenAndReopens() throws Exception {
    Archive.save(scratch.archive(), "a", tensors("w", Tensor.of(new float[] {1, 2})));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertFalse(archive.changedSinceOpen());
      Archive.save(scratch.archive(), "b", tensors("w", Tensor.of(new float[] {3, 4})));
      assertTrue(archive.changedSinceOpen());
      assertEquals(List.of("a"), archive.tags());  // still the archive as it was opened
      try (Archive now = archive.reopen()) {
        assertEquals(List.of("a", "b"), now.tags());
        assertFalse(now.changedSinceOpen());
        assertArrayEquals(new float[] {3, 4}, now.tensor("w", "b").toFloatArray(), 0f);
        assertEquals(scratch.archive(), now.name());
      }
      assertEquals(List.of("a"), archive.tags());
      java.nio.file.Files.delete(java.nio.file.Path.of(scratch.archive()));
      assertTrue(archive.changedSinceOpen());
      ModelzipException gone = assertThrows(ModelzipException.class, archive::reopen);
      assertEquals(ModelzipException.Code.IO, gone.code());
    }
  }

  @Test
  public void removeTagKeepsDataOtherTagsShare() throws Exception {
    Tensor w = Tensor.of(new int[] {1, 2, 3});
    Archive.save(scratch.archive(), "a", tensors("w", w));
    Archive.save(scratch.archive(), "b", tensors("w", w));
    Archive.removeTag(scratch.archive(), "A");
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("b"), archive.tags());
      assertArrayEquals(new int[] {1, 2, 3}, archive.tensor("w", "b").toIntArray());
      assertEquals(List.of(), archive.verify());
    }
    NoSuchElementException e =
        assertThrows(NoSuchElementException.class, () -> Archive.removeTag(scratch.archive(), "a"));
    assertEquals(ModelzipException.Code.NOT_FOUND, ((ModelzipException) e.getCause()).code());
  }

  @Test
  public void shapesScalarsAndEmptyTensors() {
    Archive.save(scratch.archive(), "s", tensors(
        "scalar", Tensor.of("float32", new float[] {2.5f}, new long[0]),
        "empty", Tensor.of(new float[0], 0, 4),
        "matrix", Tensor.of(new short[] {1, 2, 3, 4, 5, 6}, 3, 2)));
    try (Archive archive = Archive.open(scratch.archive())) {
      Tensor scalar = archive.tensor("scalar", null);
      assertArrayEquals(new long[0], scalar.shape());
      assertEquals(1, scalar.numel());
      assertArrayEquals(new float[] {2.5f}, scalar.toFloatArray(), 0f);
      Tensor empty = archive.tensor("empty", null);
      assertArrayEquals(new long[] {0, 4}, empty.shape());
      assertEquals(0, empty.toFloatArray().length);
      assertEquals(0, empty.buffer().remaining());
      assertArrayEquals(new long[] {3, 2}, archive.tensor("matrix", null).shape());
    }
  }

  @Test
  public void wrongArrayKindsAndShapesAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> Tensor.of("float32", new int[] {1}, null));
    assertThrows(IllegalArgumentException.class, () -> Tensor.of("complex64", new float[] {1}, null));
    assertThrows(IllegalArgumentException.class, () -> Tensor.of("string", new byte[] {1}, null));
    assertThrows(NullPointerException.class, () -> Tensor.of(new String[] {"a", null}));
    // A shape that does not fit is the caller's mistake, as a wrong array kind.
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> Tensor.of(new float[] {1, 2, 3}, 2, 2));
    assertEquals(
        ModelzipException.Code.INVALID_ARGUMENT, ((ModelzipException) e.getCause()).code());
    e = assertThrows(IllegalArgumentException.class, () -> Tensor.of(new float[] {1, 2}, -1, -2));
    assertEquals(
        ModelzipException.Code.INVALID_ARGUMENT, ((ModelzipException) e.getCause()).code());
    Tensor f = Tensor.of(new float[] {1});
    assertArrayEquals(new double[] {1}, f.toDoubleArray(), 0.0);  // widened exactly
    assertThrows(IllegalArgumentException.class, Tensor.of(new double[] {1})::toFloatArray);
    assertThrows(IllegalArgumentException.class, f::toStringArray);
    IllegalArgumentException wrong = assertThrows(IllegalArgumentException.class, f::toIntArray);
    assertEquals("toIntArray() of a float32 tensor (use toFloatArray())", wrong.getMessage());
    wrong = assertThrows(IllegalArgumentException.class, Tensor.of(new long[] {1})::toIntArray);
    assertEquals("toIntArray() of an int64 tensor (use toLongArray())", wrong.getMessage());
  }

  @Test
  public void closedObjectsThrowInsteadOfCrashing() {
    Archive.save(scratch.archive(), "v", tensors("w", Tensor.of(new float[] {1})));
    Archive archive = Archive.open(scratch.archive());
    Tensor t = archive.tensor("w", null);
    archive.close();
    archive.close();  // idempotent
    assertThrows(IllegalStateException.class, archive::tags);
    assertThrows(IllegalStateException.class, () -> archive.tensor("w", null));
    assertArrayEquals(new float[] {1}, t.toFloatArray(), 0f);  // the tensor outlives the archive
    t.close();
    // A tensor read from an archive is named in the errors of its use.
    assertEquals("tensor 'w' float32[1] of '" + scratch.archive() + "' is closed",
        assertThrows(IllegalStateException.class, t::toFloatArray).getMessage());
    assertThrows(IllegalStateException.class, t::buffer);
    try (Archive again = Archive.open(scratch.archive())) {
      Tensor loaded = again.load("V").get("w");
      loaded.close();
      assertEquals("tensor 'w' float32[1] of '" + scratch.archive() + "' tag 'V' is closed",
          assertThrows(IllegalStateException.class, loaded::toFloatArray).getMessage());
    }
    Tensor made = Tensor.of(new float[] {1});
    made.close();
    assertEquals("tensor float32[1] is closed",
        assertThrows(IllegalStateException.class, made::toFloatArray).getMessage());
    // Among many tensors, the error says which one, in which save.
    Map<String, Tensor> many = new LinkedHashMap<>();
    many.put("a", Tensor.of(new float[] {1}));
    many.put("w", t);
    IllegalStateException closed = assertThrows(IllegalStateException.class,
        () -> Archive.save(scratch.archive(), "v2", many));
    assertEquals(scratch.archive() + ": tag 'v2': parameter 'w': tensor 'w' float32[1] of '"
        + scratch.archive() + "' is closed", closed.getMessage());
    // Printable, as the library's messages: control characters escaped.
    Map<String, Tensor> oddName = Map.of("w\r\u0085", made);
    assertEquals(
        scratch.archive() + ": tag 'v\\x1b': parameter 'w\\r\\u0085': tensor float32[1] is closed",
        assertThrows(IllegalStateException.class,
            () -> Archive.save(scratch.archive(), "v\u001b", oddName)).getMessage());
    many.put("w", null);
    NullPointerException missing = assertThrows(NullPointerException.class,
        () -> Archive.save(scratch.archive(), "v2", many));
    assertEquals(scratch.archive() + ": tag 'v2': parameter 'w': the tensor is null",
        missing.getMessage());
    assertEquals("float32", t.dtype());  // plain values stay readable
    try (Archive reopened = Archive.open(scratch.archive())) {
      assertEquals(List.of("v"), reopened.tags());
    }
  }

  @Test
  public void anUnknownDataTypeIsNamedAsSuch() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> Tensor.of("fp32", new float[] {1}, null));
    assertTrue(e.getMessage(), e.getMessage().startsWith("unknown data type \"fp32\" (the types: bool, "));
    assertTrue(e.getMessage(), e.getMessage().contains("float4_e2m1fn_x2, string)"));
  }

  @Test
  public void storedEntriesAreMappedJavaTensorsAreNot() {
    Archive.save(scratch.archive(), "v", tensors("w", Tensor.of(new float[] {1, 2, 3, 4})));
    try (Archive archive = Archive.open(scratch.archive())) {
      assertFalse(archive.params("v").get(0).compressed());
      assertTrue(archive.tensor("w", null).isMapped());
    }
    assertFalse(Tensor.of(new float[] {1}).isMapped());
  }
}
