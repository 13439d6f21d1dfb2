// Lists a zip archive with java.util.zip.ZipInputStream, the standard Java
// streaming reader: it walks local headers in file order and stops at the
// first central directory header. Prints one line per entry,
// "<name>\t<bytes read>", then the contents of tags.txt after a line "--".
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

public class ListZip {
  public static void main(String[] args) throws Exception {
    String tags = null;
    try (ZipInputStream zip =
        new ZipInputStream(new BufferedInputStream(new FileInputStream(args[0])))) {
      byte[] buffer = new byte[1 << 16];
      for (ZipEntry e; (e = zip.getNextEntry()) != null; ) {
        ByteArrayOutputStream data = new ByteArrayOutputStream();
        for (int n; (n = zip.read(buffer)) > 0; ) data.write(buffer, 0, n);
        System.out.println(e.getName() + "\t" + data.size());
        if (e.getName().equals("tags.txt")) tags = data.toString(StandardCharsets.UTF_8);
      }
    }
    System.out.println("--");
    if (tags != null) System.out.print(tags);
  }
}
