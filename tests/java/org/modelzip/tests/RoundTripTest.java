package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.Param;
import org.modelzip.Tensor;

/**
 * Java -> Python -> the modelzip command -> Java, with one tensor of every
 * data type; each side checks the values against its own copy of the
 * formulas (Values.java, tests/java/interop.py).
 */
public class RoundTripTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  @Before
  public void setUp() throws Exception {
    TestSupport.assumePython();
  }

  private static byte[] bytes(ByteBuffer buffer) {
    byte[] out = new byte[buffer.remaining()];
    buffer.get(out);
    return out;
  }

  @Test
  public void javaToPythonToCliAndBack() throws Exception {
    Map<String, Tensor> mine = Values.all();
    Archive.save(scratch.archive(), "java", mine);
    TestSupport.python("check", scratch.archive(), "java");
    TestSupport.cli("verify", scratch.archive());
    // The command prints the stored little-endian bytes: the same as Java's buffers.
    for (String dtype : List.of("float32", "uint64", "bfloat16", "bool")) {
      assertArrayEquals(dtype, bytes(mine.get(dtype).buffer()),
          TestSupport.cli("cat", scratch.archive(), dtype, "--tag", "java").stdout);
    }

    TestSupport.python("write", scratch.archive(), "py");
    assertEquals("java\npy\n", TestSupport.cli("tags", scratch.archive()).out());
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(List.of("java", "py"), archive.tags());
      Values.checkAll(archive.load("py"));
      for (Param p : archive.params("py")) {
        assertEquals(p.name(), p.dtype());
      }
    }

    Archive.removeTag(scratch.archive(), "java");
    assertEquals("py\n", TestSupport.cli("tags", scratch.archive()).out());
    TestSupport.cli("verify", scratch.archive());
    TestSupport.python("check", scratch.archive(), "py");
  }

  @Test
  public void deflatedTensorsFromPythonAreReadAsCopies() throws Exception {
    TestSupport.python("write", scratch.archive(), "packed", "--compress");
    try (Archive archive = Archive.open(scratch.archive())) {
      for (Param p : archive.params(null)) {
        assertTrue(p.name(), p.compressed());
      }
      Map<String, Tensor> loaded = archive.load(null);
      Values.checkAll(loaded);
      assertFalse(loaded.get("float32").isMapped());
      ByteBuffer b = loaded.get("float32").buffer();
      assertTrue(b.isDirect());
      assertEquals(-2f, b.getFloat(0), 0f);
    }
  }
}
