package org.modelzip.tests;

import java.util.Locale;
import org.junit.runner.Description;
import org.junit.runner.JUnitCore;
import org.junit.runner.Result;
import org.junit.runner.notification.Failure;
import org.junit.runner.notification.RunListener;

/**
 * Runs the JUnit suite: one line per test, each failure with its stack
 * trace, then pytest's summary line ("N passed, N failed, N skipped in
 * T.TTs"), which tests/summarize.py counts. Skipped tests (a missing engine,
 * an Assume) are never counted as passed. Exit status 1 if anything failed.
 */
public final class TestMain {
  static final Class<?>[] SUITE = {
      ArchiveTest.class, RoundTripTest.class, ZeroCopyTest.class, ErrorsTest.class,
      HostileTest.class, ConcurrencyTest.class, RemoteTest.class, EmbeddingsTest.class,
      FloatValuesTest.class, SaveOptionsTest.class, MetadataTest.class, ArchiveAccessTest.class,
      ShareTest.class, TrainingWriteTest.class,
  };

  public static void main(String[] args) {
    JUnitCore core = new JUnitCore();
    core.addListener(new RunListener() {
      @Override
      public void testFinished(Description d) {
        System.out.println("test " + d.getClassName() + "." + d.getMethodName());
      }

      @Override
      public void testFailure(Failure f) {
        System.out.println("FAILED " + f.getTestHeader() + ":\n" + f.getTrace());
      }

      @Override
      public void testAssumptionFailure(Failure f) {
        System.out.println("SKIPPED " + f.getTestHeader() + ": " + f.getMessage());
      }
    });
    Result result = core.run(SUITE);
    int skipped = result.getAssumptionFailureCount() + result.getIgnoreCount();
    int failed = result.getFailureCount();
    int passed = result.getRunCount() - failed - result.getAssumptionFailureCount();
    System.out.println(String.format(Locale.ROOT, "%d passed, %d failed, %d skipped in %.2fs",
        passed, failed, skipped, result.getRunTime() / 1000.0));
    System.exit(failed == 0 ? 0 : 1);
  }
}
