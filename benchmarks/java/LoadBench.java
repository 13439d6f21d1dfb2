// LoadBench: the Java binding's saves and loads beside what a JVM program
// does without it (java.util.zip: a stored ZipOutputStream, ZipFile entries
// read into byte arrays), measured in the same run on the same bytes.
// Prints the median of --reps repetitions (after one unmeasured warm-up) and
// each row's ratio to its baseline. Not a test: numbers only.
//
//   java -Djava.library.path=build/src/java \
//        -cp build/src/java/modelzip.jar:build/benchmarks/java/modelzip-bench.jar \
//        LoadBench [--size-mib 256] [--tensors 64] [--reps 3] [--dir /tmp]
//
// Every load reads each float once (the sum is printed so no work is
// skipped). Files are in the page cache: this measures the library and the
// binding, not the disk. Saves are durable on both sides (fsync).
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipOutputStream;
import org.modelzip.Archive;
import org.modelzip.Tensor;

public final class LoadBench {
  private static int sizeMib = 256;
  private static int tensors = 64;
  private static int reps = 3;
  private static Path dir = Paths.get(System.getProperty("java.io.tmpdir"));

  interface Step {
    double run() throws Exception;  // returns a checksum
  }

  private static double sink;

  /** Median seconds of `reps` runs of `step`, after one warm-up run. */
  private static double median(Step step) throws Exception {
    sink += step.run();
    double[] seconds = new double[reps];
    for (int i = 0; i < reps; i++) {
      long start = System.nanoTime();
      sink += step.run();
      seconds[i] = (System.nanoTime() - start) / 1e9;
    }
    Arrays.sort(seconds);
    return seconds[reps / 2];
  }

  private static void latencyRow(String what, double seconds, double baseline) {
    System.out.printf(Locale.ROOT, "  %-44s %8.3f ms %7.2fx%n", what, seconds * 1e3,
        baseline / seconds);
  }

  private static void row(String what, double seconds, double baseline) {
    double gib = sizeMib / 1024.0;
    System.out.printf(Locale.ROOT, "  %-44s %8.3f s %7.2f GiB/s %7.2fx%n", what, seconds,
        gib / seconds, baseline / seconds);
  }

  private static double sum(float[] values) {
    double s = 0;
    for (float v : values) {
      s += v;
    }
    return s;
  }

  /** Only two buffer classes come here (heap and direct views), so the call stays inlined. */
  private static double sum(FloatBuffer values) {
    double s = 0;
    while (values.hasRemaining()) {
      s += values.get();
    }
    return s;
  }

  public static void main(String[] args) throws Exception {
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--size-mib": sizeMib = Integer.parseInt(args[i + 1]); break;
        case "--tensors": tensors = Integer.parseInt(args[i + 1]); break;
        case "--reps": reps = Integer.parseInt(args[i + 1]); break;
        case "--dir": dir = Paths.get(args[i + 1]); break;
        default: throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    int floats = (int) ((long) sizeMib * 1024 * 1024 / 4 / tensors);
    Map<String, Tensor> model = new LinkedHashMap<>();
    Map<String, byte[]> raw = new LinkedHashMap<>();
    for (int t = 0; t < tensors; t++) {
      float[] values = new float[floats];
      for (int i = 0; i < floats; i++) {
        values[i] = (t * 31 + i) % 1000 * 0.001f;
      }
      model.put("layer" + t + ".weight", Tensor.of(values));
      ByteBuffer bytes = ByteBuffer.allocate(floats * 4).order(ByteOrder.LITTLE_ENDIAN);
      bytes.asFloatBuffer().put(values);
      raw.put("layer" + t + ".weight", bytes.array());
    }
    Path archive = dir.resolve("loadbench-modelzip.zip");
    Path plainZip = dir.resolve("loadbench-javazip.zip");
    System.out.printf(Locale.ROOT, "LoadBench: %d MiB in %d float32 tensors, median of %d%n",
        sizeMib, tensors, reps);
    try {
      // --- saves: a new file each time, fsynced
      double javaZipSave = median(() -> {
        Files.deleteIfExists(plainZip);
        try (FileOutputStream file = new FileOutputStream(plainZip.toFile());
             ZipOutputStream zip = new ZipOutputStream(file)) {
          zip.setMethod(ZipOutputStream.STORED);
          for (Map.Entry<String, byte[]> e : raw.entrySet()) {
            ZipEntry entry = new ZipEntry("step/" + e.getKey());
            CRC32 crc = new CRC32();
            crc.update(e.getValue());
            entry.setSize(e.getValue().length);
            entry.setCrc(crc.getValue());
            zip.putNextEntry(entry);
            zip.write(e.getValue());
            zip.closeEntry();
          }
          zip.finish();
          file.getFD().sync();
        }
        return 0;
      });
      double modelzipSave = median(() -> {
        Files.deleteIfExists(archive);
        Archive.save(archive.toString(), "step", model);
        return 0;
      });
      System.out.println("save (durable):");
      row("java.util.zip ZipOutputStream, stored", javaZipSave, javaZipSave);
      row("modelzip Archive.save", modelzipSave, javaZipSave);

      // --- loads: every float read once
      double javaZipLoad = median(() -> {
        double s = 0;
        try (ZipFile zip = new ZipFile(plainZip.toFile())) {
          for (Enumeration<? extends ZipEntry> en = zip.entries(); en.hasMoreElements();) {
            try (InputStream in = zip.getInputStream(en.nextElement())) {
              s += sum(ByteBuffer.wrap(in.readAllBytes()).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer());
            }
          }
        }
        return s;
      });
      double modelzipBuffers = median(() -> {
        double s = 0;
        try (Archive a = Archive.open(archive.toString())) {
          for (Tensor t : a.load(null).values()) {
            s += sum(t.buffer().asFloatBuffer());
            t.close();
          }
        }
        return s;
      });
      double modelzipArrays = median(() -> {
        double s = 0;
        try (Archive a = Archive.open(archive.toString())) {
          for (Tensor t : a.load(null).values()) {
            s += sum(t.toFloatArray());
            t.close();
          }
        }
        return s;
      });
      System.out.println("load and read every value:");
      row("java.util.zip ZipFile, readAllBytes", javaZipLoad, javaZipLoad);
      row("modelzip buffer() (zero-copy)", modelzipBuffers, javaZipLoad);
      row("modelzip toFloatArray() (copy)", modelzipArrays, javaZipLoad);

      // --- one tensor out of many (open + read one entry)
      String last = "layer" + (tensors - 1) + ".weight";
      double javaZipOne = median(() -> {
        try (ZipFile zip = new ZipFile(plainZip.toFile());
             InputStream in = zip.getInputStream(zip.getEntry("step/" + last))) {
          return ByteBuffer.wrap(in.readAllBytes()).order(ByteOrder.LITTLE_ENDIAN).getFloat(0);
        }
      });
      double modelzipOne = median(() -> {
        try (Archive a = Archive.open(archive.toString()); Tensor t = a.tensor(last, null)) {
          return t.buffer().getFloat(0);
        }
      });
      System.out.println("open and read the first value of one tensor:");
      latencyRow("java.util.zip ZipFile, readAllBytes", javaZipOne, javaZipOne);
      latencyRow("modelzip tensor().buffer()", modelzipOne, javaZipOne);
      System.out.printf(Locale.ROOT, "(checksum %.1f)%n", sink);
    } finally {
      Files.deleteIfExists(archive);
      Files.deleteIfExists(plainZip);
    }
  }
}
