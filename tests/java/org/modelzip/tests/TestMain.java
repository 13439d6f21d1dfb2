package org.modelzip.tests;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.junit.runner.Description;
import org.junit.runner.JUnitCore;
import org.junit.runner.Request;
import org.junit.runner.Result;
import org.junit.runner.notification.Failure;
import org.junit.runner.notification.RunListener;

/**
 * Runs the JUnit suite: one line per test, each failure with its stack
 * trace, then pytest's summary line ("N passed, N failed, N skipped in
 * T.TTs"), which tests/summarize.py counts. Skipped tests (a missing engine,
 * an Assume) are never counted as passed. Exit status 1 if anything failed.
 * Arguments, when given, select tests: a class of the suite or one test of
 * it ({@code ZeroCopyTest}, {@code ZeroCopyTest.buffersOutliveTheArchiveAndTheTensor}).
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
    // Arguments: only these tests, each a class of the suite ("ZeroCopyTest")
    // or one test of it ("ZeroCopyTest.buffersOutliveTheArchiveAndTheTensor").
    Result result;
    if (args.length == 0) {
      result = core.run(SUITE);
    } else {
      List<Request> requests = new ArrayList<>();
      for (String arg : args) {
        String[] parts = arg.split("\\.", 2);
        Class<?> suiteClass =
            Arrays.stream(SUITE)
                .filter(c -> c.getSimpleName().equals(parts[0]))
                .findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no test class " + parts[0]));
        requests.add(
            parts.length == 1 ? Request.aClass(suiteClass) : Request.method(suiteClass, parts[1]));
      }
      result = new Result();
      RunListener counter = result.createListener();
      core.addListener(counter);
      for (Request request : requests) {
        core.run(request);
      }
    }
    int skipped = result.getAssumptionFailureCount() + result.getIgnoreCount();
    int failed = result.getFailureCount();
    int passed = result.getRunCount() - failed - result.getAssumptionFailureCount();
    System.out.println(String.format(Locale.ROOT, "%d passed, %d failed, %d skipped in %.2fs",
        passed, failed, skipped, result.getRunTime() / 1000.0));
    System.exit(failed == 0 ? 0 : 1);
  }
}
