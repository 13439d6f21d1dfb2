// LargeTensorBench: one float32 tensor of 2 GiB or more (no single
// ByteBuffer or Java array holds it) made from ByteBuffer parts, saved,
// read back zero-copy as parts, and checked value by value. The JUnit suite
// tests the part splitting with small parts (ZeroCopyTest); this is the run
// at the real size, by hand, too large for the suite's time and memory: it
// needs about 3 GiB of memory beside the page cache and twice --size-mib of
// disk (the archive).
//
//   java -Djava.library.path=build/src/java \
//        -cp build/src/java/modelzip.jar:build/benchmarks/java/modelzip-bench.jar \
//        LargeTensorBench [--size-mib 2049] [--dir /tmp]
//
// Value i of the tensor is (float) (i % 2^24): every value tells its index
// modulo 2^24, so a part read at the wrong offset shows. Prints the seconds
// of each step and the checked sum; exits non-zero when a value is wrong.
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Locale;
import java.util.Map;
import org.modelzip.Archive;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;

public final class LargeTensorBench {
  private static final int PERIOD = 1 << 24; // values of one period: 64 MiB

  public static void main(String[] args) throws Exception {
    long sizeMib = 2049;
    Path dir = Paths.get(System.getProperty("java.io.tmpdir"));
    for (int i = 0; i < args.length; i += 2) {
      switch (args[i]) {
        case "--size-mib":
          sizeMib = Long.parseLong(args[i + 1]);
          break;
        case "--dir":
          dir = Paths.get(args[i + 1]);
          break;
        default:
          throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    long bytes = sizeMib << 20;
    long values = bytes / 4;
    // One period in a direct buffer, given as many times as the tensor holds it.
    ByteBuffer period = ByteBuffer.allocateDirect(4 * PERIOD).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < PERIOD; i++) period.putFloat(4 * i, i);
    int count = (int) ((bytes + period.capacity() - 1) / period.capacity());
    ByteBuffer[] parts = new ByteBuffer[count];
    for (int i = 0; i < count; i++) {
      long left = bytes - (long) i * period.capacity();
      parts[i] = period.duplicate().limit((int) Math.min(period.capacity(), left));
    }
    Path file = Files.createTempFile(dir, "large-tensor-", ".zip");
    Files.delete(file);
    try {
      long t0 = System.nanoTime();
      Tensor made = Tensor.of("float32", parts, null);
      long t1 = System.nanoTime();
      if (made.byteSize() != bytes) throw new AssertionError("made " + made.byteSize());
      Archive.save(file.toString(), "v1", Map.of("big", made));
      made.close();
      long t2 = System.nanoTime();
      double sum = 0;
      long checked = 0;
      try (Archive archive = Archive.open(file.toString());
           Tensor big = archive.tensor("big", null)) {
        if (!big.isMapped()) throw new AssertionError("not a zero-copy view");
        ByteBuffer[] read = big.buffers();
        for (ByteBuffer part : read) {
          FloatBuffer floats = part.asFloatBuffer();
          for (int i = 0; i < floats.limit(); i++, checked++) {
            float v = floats.get(i);
            if (v != (float) (checked % PERIOD)) {
              throw new AssertionError("value " + checked + " is " + v);
            }
            sum += v;
          }
        }
        long t3 = System.nanoTime();
        // The last values, as numbers, beyond 2^31 bytes.
        float[] tail = big.toFloatArray(values - 4, 4);
        for (int i = 0; i < 4; i++) {
          if (tail[i] != (float) ((values - 4 + i) % PERIOD)) throw new AssertionError("tail");
        }
        System.out.printf(Locale.ROOT,
            "%d bytes (%.2f GiB) in %d parts made %.2f s, saved %.2f s, read as %d parts"
                + " and checked %.2f s: %d values, sum %.6e%n",
            bytes, bytes / (double) (1L << 30), count, (t1 - t0) / 1e9, (t2 - t1) / 1e9,
            read.length, (t3 - t2) / 1e9, checked, sum);
      }
      if (checked != values) throw new AssertionError("checked " + checked + " of " + values);
    } finally {
      Files.deleteIfExists(file);
    }
  }
}
