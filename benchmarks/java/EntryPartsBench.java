// EntryPartsBench: reading one deflated entry front to back in parts, the
// two ways the Java binding offers, beside java.util.zip on the same file:
//   - Archive.entry(name, offset, length) part after part: each call
//     decompresses the entry from its start to the part's end, so a walk
//     costs (size / part)^2 / 2 parts' worth of decompression;
//   - Archive.entryStream(name), read in parts of the same size: the entry
//     is decompressed once;
//   - ZipFile.getInputStream and ZipInputStream, the same parts.
// Prints the median of --reps runs (after one unmeasured warm-up). Not a
// test: numbers only.
//
//   java -Djava.library.path=build/src/java \
//        -cp build/src/java/modelzip.jar:build/benchmarks/java/modelzip-bench.jar \
//        EntryPartsBench [--size-mib 64] [--part-kib 1024] [--reps 3] [--dir /tmp]
//
// The entry is one float32 tensor saved with SaveOptions.compress(true):
// values of a smooth curve with noise in the low bits, which deflate shrinks
// to about 80%. The file is in the page cache.
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import java.util.zip.ZipInputStream;
import org.modelzip.Archive;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;

public final class EntryPartsBench {
  private static int sizeMib = 64;
  private static int partKib = 1024;
  private static int reps = 3;
  private static Path dir = Paths.get(System.getProperty("java.io.tmpdir"));

  interface Step {
    long run() throws Exception;  // returns the CRC-32 of the bytes read
  }

  private static double median(Step step, long expectedCrc) throws Exception {
    if (step.run() != expectedCrc) throw new AssertionError("other bytes read");
    double[] seconds = new double[reps];
    for (int i = 0; i < reps; i++) {
      long start = System.nanoTime();
      if (step.run() != expectedCrc) throw new AssertionError("other bytes read");
      seconds[i] = (System.nanoTime() - start) / 1e9;
    }
    Arrays.sort(seconds);
    return seconds[reps / 2];
  }

  private static long crcOfStream(InputStream in, int part) throws Exception {
    CRC32 crc = new CRC32();
    byte[] buffer = new byte[part];
    for (int n; (n = in.readNBytes(buffer, 0, part)) > 0; ) crc.update(buffer, 0, n);
    return crc.getValue();
  }

  public static void main(String[] args) throws Exception {
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--size-mib" -> sizeMib = Integer.parseInt(args[i + 1]);
        case "--part-kib" -> partKib = Integer.parseInt(args[i + 1]);
        case "--reps" -> reps = Integer.parseInt(args[i + 1]);
        case "--dir" -> dir = Paths.get(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    int part = partKib << 10;
    Path file = Files.createTempFile(dir, "entry-parts-", ".zip");
    try {
      float[] values = new float[sizeMib << 18];
      java.util.Random random = new java.util.Random(1);
      for (int i = 0; i < values.length; i++) {
        values[i] = (float) Math.sin(i * 1e-4) + (random.nextInt(256) * 1e-6f);
      }
      Files.delete(file);
      Archive.save(file.toString(), "v1", Map.of("w", Tensor.of(values)),
          SaveOptions.defaults().compress(true).durable(false));
      String entry;
      long size;
      try (Archive archive = Archive.open(file.toString())) {
        entry = archive.entryNames().stream().filter(n -> n.startsWith("v1/params/"))
            .findFirst().orElseThrow();
        size = archive.entrySize(entry);
      }
      long packed;
      try (ZipFile zip = new ZipFile(file.toFile())) {
        packed = zip.getEntry(entry).getCompressedSize();
      }
      CRC32 all = new CRC32();
      try (Archive archive = Archive.open(file.toString())) {
        all.update(archive.entry(entry));
      }
      long crc = all.getValue();
      System.out.printf(Locale.ROOT, "entry %s: %d bytes, deflated to %d; parts of %d KiB (%d parts)%n",
          entry, size, packed, partKib, (size + part - 1) / part);

      double parts = median(() -> {
        try (Archive archive = Archive.open(file.toString())) {
          CRC32 c = new CRC32();
          for (long at = 0; at < size; at += part) {
            c.update(archive.entry(entry, at, (int) Math.min(part, size - at)));
          }
          return c.getValue();
        }
      }, crc);
      double stream = median(() -> {
        try (Archive archive = Archive.open(file.toString());
             InputStream in = archive.entryStream(entry)) {
          return crcOfStream(in, part);
        }
      }, crc);
      double zipFile = median(() -> {
        try (ZipFile zip = new ZipFile(file.toFile());
             InputStream in = zip.getInputStream(zip.getEntry(entry))) {
          return crcOfStream(in, part);
        }
      }, crc);
      double zipStream = median(() -> {
        try (ZipInputStream zip = new ZipInputStream(Files.newInputStream(file))) {
          for (ZipEntry e; (e = zip.getNextEntry()) != null; ) {
            if (e.getName().equals(entry)) return crcOfStream(zip, part);
          }
          throw new AssertionError("no entry " + entry);
        }
      }, crc);
      System.out.printf(Locale.ROOT, "%-40s %9.3f s%n", "entry(name, offset, length) walk", parts);
      System.out.printf(Locale.ROOT, "%-40s %9.3f s  (%.1fx faster than the walk)%n",
          "entryStream(name)", stream, parts / stream);
      System.out.printf(Locale.ROOT, "%-40s %9.3f s%n", "ZipFile.getInputStream", zipFile);
      System.out.printf(Locale.ROOT, "%-40s %9.3f s%n", "ZipInputStream", zipStream);
    } finally {
      Files.deleteIfExists(file);
    }
  }
}
