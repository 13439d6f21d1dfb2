package org.modelzip.tests;

import org.junit.rules.TemporaryFolder;

/** JUnit's TemporaryFolder (one per test, removed after it) naming files in it. */
public class ScratchFolder extends TemporaryFolder {
  /** The test's archive, "model.zip" in the folder (not created). */
  String archive() {
    return file("model.zip");
  }

  /** A file in the folder (not created). */
  String file(String name) {
    return getRoot().toPath().resolve(name).toString();
  }
}
