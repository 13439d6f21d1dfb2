// EntryStreamBench: the cost of Archive.entryStream's reads themselves, one
// entry read front to back in small calls (64 KiB by default), as
// InputStream users read (BufferedInputStream, Files.copy...). Each call
// crosses JNI once, so what a call costs besides moving the bytes (a native
// buffer per call, a second copy) shows as the gap to ZipFile.getInputStream
// reading the same entry in the same calls. One stored and one deflated
// entry of --size-mib; the bytes are read, not checked (one unmeasured
// warm-up run checks their CRC-32). Prints the medians of --reps runs, of
// the wall time and of the reading thread's CPU time (steadier than the wall
// time on a shared machine). Not a test: numbers only.
//
//   java -Djava.library.path=build/src/java \
//        -cp build/src/java/modelzip.jar:build/benchmarks/java/modelzip-bench.jar \
//        EntryStreamBench [--size-mib 256] [--call-kib 64] [--reps 5] [--dir /tmp]
//                         [--kinds stored,deflated]
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.zip.CRC32;
import java.util.zip.ZipFile;
import org.modelzip.Archive;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;

public final class EntryStreamBench {
  private static int sizeMib = 256;
  private static int callKib = 64;
  private static int reps = 5;
  private static Path dir = Paths.get(System.getProperty("java.io.tmpdir"));
  private static String kinds = "stored,deflated";
  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  interface Opener {
    InputStream open() throws Exception;
  }

  // Reads the stream to its end in calls of `call` bytes; returns the bytes
  // read, or their CRC-32 when `crc` is set.
  private static long drain(InputStream in, int call, boolean crc) throws Exception {
    byte[] buffer = new byte[call];
    CRC32 c = new CRC32();
    long total = 0;
    for (int n; (n = in.read(buffer, 0, call)) > 0;) {
      if (crc) c.update(buffer, 0, n);
      total += n;
    }
    return crc ? c.getValue() : total;
  }

  // {wall seconds, CPU seconds}: the medians of --reps runs.
  private static double[] median(Opener opener, long size, long expectedCrc) throws Exception {
    try (InputStream in = opener.open()) {
      if (drain(in, callKib << 10, true) != expectedCrc) throw new AssertionError("other bytes");
    }
    double[] wall = new double[reps];
    double[] cpu = new double[reps];
    for (int i = 0; i < reps; i++) {
      long start = System.nanoTime();
      long cpuStart = THREADS.getCurrentThreadCpuTime();
      try (InputStream in = opener.open()) {
        if (drain(in, callKib << 10, false) != size) throw new AssertionError("short read");
      }
      cpu[i] = (THREADS.getCurrentThreadCpuTime() - cpuStart) / 1e9;
      wall[i] = (System.nanoTime() - start) / 1e9;
    }
    Arrays.sort(wall);
    Arrays.sort(cpu);
    return new double[] {wall[reps / 2], cpu[reps / 2]};
  }

  private static void print(String label, double[] times, long size, long calls) {
    System.out.printf(Locale.ROOT,
        "  %-24s %8.3f s  %7.2f us/call  %7.0f MiB/s  (CPU %8.3f s, %7.2f us/call)%n", label,
        times[0], times[0] * 1e6 / calls, size / times[0] / (1 << 20), times[1],
        times[1] * 1e6 / calls);
  }

  private static void run(String label, Path file, boolean compress) throws Exception {
    float[] values = new float[sizeMib << 18];
    java.util.Random random = new java.util.Random(1);
    for (int i = 0; i < values.length; i++) {
      values[i] = (float) Math.sin(i * 1e-4) + (random.nextInt(256) * 1e-6f);
    }
    Files.deleteIfExists(file);
    Archive.save(file.toString(), "v1", Map.of("w", Tensor.of(values)),
        SaveOptions.defaults().compress(compress).durable(false));
    values = null;
    try (Archive archive = Archive.open(file.toString());
         ZipFile zip = new ZipFile(file.toFile())) {
      String entry = archive.param("w", "v1").blob();
      long size = archive.entrySize(entry);
      long crc = zip.getEntry(entry).getCrc();
      double[] stream = median(() -> archive.entryStream(entry), size, crc);
      double[] zipFile = median(() -> zip.getInputStream(zip.getEntry(entry)), size, crc);
      long calls = (size + (callKib << 10) - 1) / (callKib << 10);
      System.out.printf(
          Locale.ROOT, "%s entry, %d bytes in %d calls of %d KiB:%n", label, size, calls, callKib);
      print("entryStream", stream, size, calls);
      print("ZipFile.getInputStream", zipFile, size, calls);
    }
  }

  public static void main(String[] args) throws Exception {
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--size-mib" -> sizeMib = Integer.parseInt(args[i + 1]);
        case "--call-kib" -> callKib = Integer.parseInt(args[i + 1]);
        case "--reps" -> reps = Integer.parseInt(args[i + 1]);
        case "--dir" -> dir = Paths.get(args[i + 1]);
        case "--kinds" -> kinds = args[i + 1];
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    Path file = Files.createTempFile(dir, "entry-stream-", ".zip");
    try {
      for (String kind : kinds.split(",")) {
            switch (kind) {
          case "stored" -> run("stored", file, false);
          case "deflated" -> run("deflated", file, true);
          default -> throw new IllegalArgumentException("unknown kind " + kind);
        }
      }
    } finally {
      Files.deleteIfExists(file);
    }
  }
}
