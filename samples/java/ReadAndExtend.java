// A Java program that reads a modelzip archive (e.g. one written by Python),
// prints its tags and one tensor, and saves a new tag beside the others.
//
//   java -Djava.library.path=<folder of libmodelzip_jni.so> \
//        -cp modelzip.jar:modelzip-sample.jar ReadAndExtend model.zip
//
// The new tag, "<newest>-java", holds every float32 tensor of the newest tag
// scaled by 0.5.
import java.util.LinkedHashMap;
import java.util.Map;
import org.modelzip.Archive;
import org.modelzip.Param;
import org.modelzip.Tensor;

public final class ReadAndExtend {
  public static void main(String[] args) {
    if (args.length != 1) {
      System.err.println("usage: ReadAndExtend ARCHIVE");
      System.exit(2);
    }
    String path = args[0];
    String newest;
    Map<String, Tensor> halves = new LinkedHashMap<>();
    try (Archive archive = Archive.open(path)) {
      System.out.println("tags: " + archive.tags());
      newest = archive.tags().get(archive.tags().size() - 1);
      for (Param p : archive.params(null)) {
        System.out.println("  " + p);
      }
      for (Map.Entry<String, Tensor> e : archive.load(null).entrySet()) {
        try (Tensor t = e.getValue()) {
          if (!t.dtype().equals("float32")) {
            continue;
          }
          float[] values = t.toFloatArray();
          System.out.println(e.getKey() + " " + t + " first values:" + head(values));
          for (int i = 0; i < values.length; i++) {
            values[i] *= 0.5f;
          }
          halves.put(e.getKey(), Tensor.of(values, t.shape()));
        }
      }
    }
    String tag = newest + "-java";
    Archive.save(path, tag, halves);
    try (Archive archive = Archive.open(path)) {
      System.out.println("saved " + tag + "; tags now: " + archive.tags());
    }
  }

  private static String head(float[] values) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < Math.min(values.length, 4); i++) {
      out.append(' ').append(values[i]);
    }
    return out.toString();
  }
}
