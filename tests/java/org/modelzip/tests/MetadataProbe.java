package org.modelzip.tests;

import org.modelzip.Archive;
import org.modelzip.MetadataUpdate;
import org.modelzip.ModelzipException;

/**
 * Sets the description of the archive named by its first argument to its
 * second argument and prints the metadata, or the error's code and message
 * (exit status 3): run in a JVM of its own by MetadataTest, under a file
 * size limit that makes the commit's write fail.
 */
public final class MetadataProbe {
  public static void main(String[] args) {
    try {
      System.out.println(
          Archive.updateMetadata(args[0], MetadataUpdate.none().description(args[1])));
    } catch (ModelzipException e) {
      System.out.println(e.code() + " " + e.getMessage());
      System.exit(3);
    }
  }
}
