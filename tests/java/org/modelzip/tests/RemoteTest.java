package org.modelzip.tests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.concurrent.TimeUnit;
import org.junit.After;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.ModelzipException;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;

/**
 * Archives read from http:// URLs served by nginx on 127.0.0.1, started as
 * the remote tests start it (tests/remote/servers.py, through
 * tests/java/interop.py serve). Skipped without remote support or Python.
 */
public class RemoteTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();
  private Path root;
  private Process server;
  private String baseUrl;

  @Before
  public void setUp() throws Exception {
    assumeTrue("modelzip built without remote support", TestSupport.env("MODELZIP_REMOTE", "0").equals("1"));
    TestSupport.assumePython();
    root = scratch.getRoot().toPath();
    Archive.save(root.resolve("model.zip").toString(), "java", Values.all());
    server = new ProcessBuilder(TestSupport.PYTHON, TestSupport.INTEROP.toString(), "serve", root.toString())
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    BufferedReader out = new BufferedReader(
        new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
    baseUrl = out.readLine();  // the server prints its URL once it listens (or exits)
    assertTrue("server URL: " + baseUrl, baseUrl != null && baseUrl.startsWith("http://127.0.0.1:"));
  }

  @After
  public void tearDown() throws Exception {
    if (server != null) {
      server.getOutputStream().close();  // interop.py serve stops nginx at end of input
      if (!server.waitFor(30, TimeUnit.SECONDS)) {
        server.destroyForcibly();
      }
    }
  }

  @Test
  public void everyDtypeReadsFromAnHttpUrl() {
    try (Archive archive = Archive.open(baseUrl + "model.zip")) {
      assertEquals(List.of("java"), archive.tags());
      Values.checkAll(archive.load("java"));
      assertEquals(List.of(), archive.verify());
    }
  }

  @Test
  public void entryStreamsReadStoredAndDeflatedEntriesFromAnHttpUrl() throws Exception {
    byte[] noise = new byte[3 << 20];
    new java.util.Random(7).nextBytes(noise);
    String local = root.resolve("packed.zip").toString();
    Archive.save(local, "stored", java.util.Map.of("noise", Tensor.of(noise)));
    Archive.save(local, "deflated", java.util.Map.of("noise", Tensor.of(noise),
        "zeros", Tensor.of(new float[1 << 20])), SaveOptions.defaults().compress(true).dedup(false));
    try (Archive file = Archive.open(local); Archive url = Archive.open(baseUrl + "packed.zip")) {
      assertEquals(file.entryNames(), url.entryNames());
      for (String name : file.entryNames()) {
        try (java.io.InputStream in = url.entryStream(name)) {
          byte[] read = new byte[(int) file.entrySize(name)];
          int at = 0;
          for (int n; (n = in.read(read, at, Math.min(100_000, read.length - at))) > 0; ) at += n;
          assertEquals(name, read.length, at);
          assertEquals(-1, in.read());
          org.junit.Assert.assertArrayEquals(name, file.entry(name), read);
        }
      }
    }
  }

  @Test
  public void aMissingObjectIsAnErrorNamingTheUrl() throws Exception {
    String url = baseUrl + "missing.zip";
    ModelzipException e = org.junit.Assert.assertThrows(ModelzipException.class, () -> Archive.open(url));
    assertTrue(e.getMessage(), e.getMessage().contains("missing.zip"));
    assertTrue(Files.exists(root.resolve("model.zip")));
    try (Archive archive = Archive.open(baseUrl + "model.zip")) {
      org.junit.Assert.assertThrows(NoSuchElementException.class, () -> archive.tensor("nope", null));
    }
  }
}
