package org.modelzip.tests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.After;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.Tensor;

/** One Archive shared by threads: concurrent reads, and a close while they read. */
public class ConcurrencyTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();
  private ExecutorService pool;

  @Before
  public void setUp() throws Exception {
    Archive.save(scratch.archive(), "v", Values.all());
    pool = Executors.newFixedThreadPool(3);
  }

  @After
  public void tearDown() throws Exception {
    pool.shutdownNow();
    assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
  }

  @Test
  public void twoThreadsReadOneArchive() throws Exception {
    try (Archive archive = Archive.open(scratch.archive())) {
      CountDownLatch start = new CountDownLatch(1);
      List<Future<Integer>> readers = new ArrayList<>();
      for (int thread = 0; thread < 2; thread++) {
        readers.add(pool.submit(() -> {
          start.await();
          int reads = 0;
          for (int i = 0; i < 200; i++) {
            Map<String, Tensor> loaded = archive.load(null);
            Values.checkAll(loaded);
            ByteBuffer b = archive.tensor("float32", null).buffer();
            assertEquals(-2f, b.getFloat(0), 0f);
            loaded.values().forEach(Tensor::close);
            reads++;
          }
          return reads;
        }));
      }
      start.countDown();
      for (Future<Integer> reader : readers) {
        assertEquals(200, (int) reader.get(120, TimeUnit.SECONDS));
      }
    }
  }

  @Test
  public void closingWhileOthersReadEndsTheirReadsWithAnException() throws Exception {
    Archive archive = Archive.open(scratch.archive());
    CountDownLatch reading = new CountDownLatch(2);
    List<Future<String>> readers = new ArrayList<>();
    for (int thread = 0; thread < 2; thread++) {
      readers.add(pool.submit(() -> {
        reading.countDown();
        for (int i = 0; i < 1_000_000; i++) {  // bounded: ends long before, at close()
          try {
            archive.tensor("int64", null).toLongArray();
            archive.params(null);
          } catch (IllegalStateException closed) {
            return closed.getMessage();
          }
        }
        return "never closed";
      }));
    }
    assertTrue(reading.await(30, TimeUnit.SECONDS));
    Thread.sleep(50);
    archive.close();
    for (Future<String> reader : readers) {
      String message = reader.get(120, TimeUnit.SECONDS);
      assertTrue(message, message.contains("is closed"));
    }
  }
}
