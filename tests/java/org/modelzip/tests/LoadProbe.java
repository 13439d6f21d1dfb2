package org.modelzip.tests;

import org.modelzip.Archive;

/**
 * Opens the archive named by its argument and prints its tags: run in a JVM
 * of its own by ErrorsTest, to see what a program gets when
 * libmodelzip_jni.so cannot be found.
 */
public final class LoadProbe {
  public static void main(String[] args) {
    try (Archive archive = Archive.open(args[0])) {
      System.out.println(archive.tags());
    }
  }
}
