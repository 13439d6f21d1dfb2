// Reads archives front to back with java.util.zip.ZipInputStream (a
// streaming reader: it walks the local headers and stops at the central
// directory) and checks that each holds the expected tags.txt; every
// entry's data is read whole, so ZipInputStream checks its CRC-32.
// usage: java ZipStreamCheck MANIFEST (lines: "<archive> <tag> <tag>...")
// Prints "FAIL <archive>: <why>" per failure; exit status 1 if any.
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.FileReader;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

public class ZipStreamCheck {
  public static void main(String[] args) throws Exception {
    int failures = 0;
    try (BufferedReader manifest = new BufferedReader(new FileReader(args[0]))) {
      for (String line; (line = manifest.readLine()) != null; ) {
        String[] parts = line.trim().split("\\s+");
        if (parts.length == 0 || parts[0].isEmpty()) continue;
        String expected = String.join("\n", Arrays.copyOfRange(parts, 1, parts.length)) + "\n";
        try {
          String tags = null;
          try (InputStream in = new FileInputStream(parts[0]);
               ZipInputStream zip = new ZipInputStream(in)) {
            for (ZipEntry e; (e = zip.getNextEntry()) != null; ) {
              byte[] data = zip.readAllBytes();
              if (e.getName().equals("tags.txt")) tags = new String(data, StandardCharsets.UTF_8);
            }
          }
          if (tags == null) throw new Exception("no tags.txt");
          if (!tags.equals(expected))
            throw new Exception("tags.txt is " + tags.replace("\n", " ") + "instead of "
                + expected.replace("\n", " "));
        } catch (Exception e) {
          System.out.println("FAIL " + parts[0] + ": " + e);
          failures++;
        }
      }
    }
    System.exit(failures > 0 ? 1 : 0);
  }
}
