package org.modelzip.tests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.Rule;
import org.junit.Test;
import org.modelzip.Archive;
import org.modelzip.ModelzipException;
import org.modelzip.Param;
import org.modelzip.SaveOptions;
import org.modelzip.Tensor;
import org.modelzip.TrainingConfig;
import org.modelzip.TrainingConfig.Regularization;
import org.modelzip.TrainingConfig.Schedule;
import org.modelzip.TrainingConfig.Step;
import org.modelzip.TrainingConfig.Updater;

/**
 * What a save writes besides tensors: a training configuration built in
 * Java (SaveOptions.trainingConfig, TrainingConfig.Builder) and optimizer
 * state shared from another tag (SaveOptions.shareUpdaterState, C++
 * NewTag::share_updater_state).
 */
public class TrainingWriteTest {
  @Rule public final ScratchFolder scratch = new ScratchFolder();

  private static Map<String, Number> numbers(Object... keyThenValue) {
    Map<String, Number> out = new LinkedHashMap<>();
    for (int i = 0; i < keyThenValue.length; i += 2) {
      out.put((String) keyThenValue[i], (Number) keyThenValue[i + 1]);
    }
    return out;
  }

  /**
   * interop.py's TRAINING, written here again from its values: an updater
   * with every hyperparameter, a ramp over a step schedule, a map schedule's
   * steps, a count beyond 2^53, mappings, counters and properties.
   */
  private static TrainingConfig interopTraining() {
    Map<String, Double> adamW = new LinkedHashMap<>();
    adamW.put("learning_rate", 0.01);
    adamW.put("beta1", 0.8);
    adamW.put("beta2", 0.99);
    adamW.put("epsilon", 1e-7);
    adamW.put("weight_decay", 0.125);
    return TrainingConfig.builder(new Updater("AdamW", adamW))
        .learningRateSchedule(Schedule.ramp(Schedule.of("StepSchedule", "epoch",
            numbers("initial_value", 0.5, "decay_rate", 0.25, "step", 3.0)), 100))
        .regularization(List.of(
            new Regularization("l2", Schedule.fixed(0.0625), true),
            new Regularization("weight_decay",
                Schedule.map("iteration", List.of(new Step(0, 0.5), new Step(10, 0.25))), false),
            new Regularization("l1", Schedule.of("PolySchedule", null, numbers(
                "initial_value", 2.0, "power", 1.5, "max_iterations", 9007199254740993L)), true)))
        .minimize(false)
        .featureMapping(List.of("in: x"))
        .labelMapping(List.of("y"))
        .labelMaskMapping(List.of("m\u00e9"))
        .lossVariables(List.of("loss"))
        .iterationCount(1234)
        .epochCount(5)
        .property("seed", "42")
        .property("loader", "shard-3\u00e9")
        .build();
  }

  @Test
  public void aConfigBuiltInJavaIsReadAlikeByJavaPythonAndTheCommand() throws Exception {
    TrainingConfig built = interopTraining();
    Archive.save(scratch.archive(), "j1", Map.of("w", Tensor.of(new float[] {1, 2})),
        SaveOptions.defaults().trainingConfig(built));
    // Python compares what it reads with its own TRAINING, and so with the
    // command's info --json.
    TestSupport.python("training-check", scratch.archive(), "j1");
    TestSupport.python("training", scratch.archive(), "p1");
    try (Archive archive = Archive.open(scratch.archive())) {
      assertEquals(Optional.of(built), archive.trainingConfig("j1"));
      assertEquals(archive.trainingConfig("p1"), archive.trainingConfig("j1"));
      // The same values encode to the same FlatBuffer, whoever saves them.
      assertArrayEquals(archive.entry("p1/trainingConfig.fb"),
          archive.entry("j1/trainingConfig.fb"));
      assertEquals(Optional.empty(), archive.trainingConfig("p1").orElseThrow()
          .regularization().get(0).coefficient().type());
      assertEquals(List.of(), archive.problems());
    }
  }

  @Test
  public void buildFillsInTheSchemaDefaultsInSchemaOrder() {
    TrainingConfig c = TrainingConfig.builder(new Updater("Adam", Map.of("epsilon", 1e-6)))
        .learningRateSchedule(Schedule.of("ExponentialSchedule", null, Map.of("gamma", 0.5)))
        .build();
    // Deeplearning4j's Adam: learning rate 1e-3, beta1 0.9, beta2 0.999.
    assertEquals(List.of("learning_rate", "beta1", "beta2", "epsilon"),
        new ArrayList<>(c.updater().parameters().keySet()));
    assertEquals(Map.of("learning_rate", 1e-3, "beta1", 0.9, "beta2", 0.999, "epsilon", 1e-6),
        c.updater().parameters());
    Schedule lr = c.learningRateSchedule().orElseThrow();
    assertEquals(Optional.of("iteration"), lr.type());
    assertEquals(numbers("initial_value", 0.0, "gamma", 0.5), lr.parameters());
    assertTrue(c.minimize());
    assertEquals(0, c.iterationCount());
    assertEquals(List.of(), c.regularization());
    // An Integer count is a count; a whole Double is taken as one.
    Schedule poly = TrainingConfig.builder(new Updater("Sgd", Map.of()))
        .learningRateSchedule(Schedule.of("PolySchedule", "epoch",
            Map.of("initial_value", 1, "max_iterations", 8.0)))
        .build().learningRateSchedule().orElseThrow();
    assertEquals(numbers("initial_value", 1.0, "power", 0.0, "max_iterations", 8L),
        poly.parameters());
  }

  private static String refused(TrainingConfig.Builder builder) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, builder::build);
    ModelzipException cause = (ModelzipException) e.getCause();
    assertEquals(ModelzipException.Code.INVALID_ARGUMENT, cause.code());
    assertEquals(cause.getMessage(), e.getMessage());
    return e.getMessage();
  }

  @Test
  public void buildRefusesWhatTheLibraryRefusesNamingIt() {
    String m = refused(TrainingConfig.builder(new Updater("Adma", Map.of())));
    assertTrue(m, m.contains("\"Adma\"") && m.contains("Adam, AdamW"));
    m = refused(TrainingConfig.builder(new Updater("Adam", Map.of("beta3", 0.5))));
    assertTrue(m, m.contains("'beta3'") && m.contains("learning_rate, beta1, beta2, epsilon"));
    m = refused(TrainingConfig.builder(new Updater("Adam", Map.of("learning_rate", -1.0))));
    assertTrue(m, m.contains("learning_rate"));
    m = refused(TrainingConfig.builder(new Updater("Adam", Map.of("beta1", 1.0))));
    assertTrue(m, m.contains("beta1"));
    m = refused(TrainingConfig.builder(new Updater("AdaDelta", Map.of()))
        .learningRateSchedule(Schedule.fixed(0.1)));
    assertTrue(m, m.contains("AdaDelta"));
    m = refused(TrainingConfig.builder(new Updater("Sgd", Map.of()))
        .learningRateSchedule(Schedule.map(null, List.of(new Step(5, 0.1)))));
    assertTrue(m, m.contains("MapSchedule"));
    m = refused(TrainingConfig.builder(new Updater("Sgd", Map.of()))
        .learningRateSchedule(Schedule.of("PolySchedule", null, Map.of("max_iterations", 1.5))));
    assertTrue(m, m.contains("'max_iterations' must be a whole number"));
    m = refused(TrainingConfig.builder(new Updater("Sgd", Map.of()))
        .learningRateSchedule(Schedule.of("FixedSchedule", "epoch", Map.of("value", 1.0))));
    assertTrue(m, m.contains("FixedSchedule has no type"));
    m = refused(TrainingConfig.builder(new Updater("Sgd", Map.of()))
        .regularization(List.of(new Regularization("l3", Schedule.fixed(1), true))));
    assertTrue(m, m.contains("\"l3\""));
    m = refused(TrainingConfig.builder(new Updater("Sgd", Map.of())).iterationCount(-1));
    assertTrue(m, m.contains("iteration"));
    m = refused(TrainingConfig.builder(new Updater("Sgd", Map.of()))
        .featureMapping(List.of("")));
    assertTrue(m, m.contains("feature"));
    // Ramps nested without end: refused by depth, never a native stack overflow.
    Schedule deep = Schedule.fixed(1);
    for (int i = 0; i < 1000; i++) {
      deep = Schedule.ramp(deep, 10);
    }
    m = refused(TrainingConfig.builder(new Updater("Sgd", Map.of())).learningRateSchedule(deep));
    assertTrue(m, m.contains("nest at most 16 deep"));
  }

  @Test
  public void toBuilderKeepsEveryFieldSoCountersCanMoveOn() throws Exception {
    TestSupport.python("training", scratch.archive(), "p1");
    TrainingConfig read;
    try (Archive archive = Archive.open(scratch.archive())) {
      read = archive.trainingConfig("p1").orElseThrow();
    }
    assertEquals(read, read.toBuilder().build());
    TrainingConfig next = read.toBuilder().iterationCount(read.iterationCount() + 100)
        .epochCount(6).property("seed", "43").build();
    Archive.save(scratch.archive(), "p2", Map.of("w", Tensor.of(new float[] {3, 4})),
        SaveOptions.defaults().trainingConfig(next));
    try (Archive archive = Archive.open(scratch.archive())) {
      TrainingConfig c = archive.trainingConfig("p2").orElseThrow();
      assertEquals(1334, c.iterationCount());
      assertEquals(6, c.epochCount());
      assertEquals(Map.of("seed", "43", "loader", "shard-3\u00e9"), c.properties());
      assertEquals(read.updater(), c.updater());
      assertEquals(read.learningRateSchedule(), c.learningRateSchedule());
      assertEquals(read.regularization(), c.regularization());
    }
  }

  @Test
  public void optimizerStateIsSharedFromAnotherTagWithoutItsTensor() throws Exception {
    Map<String, Map<String, Tensor>> adam = Map.of("w", Map.of(
        "M", Tensor.of(new float[] {0.25f, -1}), "V", Tensor.of(new float[] {0.5f, 4})));
    Archive.save(scratch.archive(), "t1", Map.of("w", Tensor.of(new float[] {1, 2})), adam,
        SaveOptions.defaults());
    // Dedup off: only the share can make "V" a reference.
    Archive.save(scratch.archive(), "t2", Map.of("w", Tensor.of(new float[] {3, 4})),
        Map.of("w", Map.of("M", Tensor.of(new float[] {7, 8}))),
        SaveOptions.defaults().dedup(false).shareUpdaterState("w", "V", "T1"));
    try (Archive archive = Archive.open(scratch.archive())) {
      List<Param> states = archive.updaterStates("t2");
      assertEquals(List.of("M", "V"), states.stream().map(Param::state).toList());
      assertFalse(states.get(0).shared());
      assertTrue(states.get(1).shared());
      assertEquals("t1", states.get(1).ownerTag());
      assertArrayEquals(new float[] {0.5f, 4},
          archive.updaterState("w", "V", "t2").toFloatArray(), 0f);
      assertArrayEquals(new float[] {7, 8},
          archive.updaterState("w", "M", "t2").toFloatArray(), 0f);
      assertEquals(List.of(), archive.problems());
    }
    byte[] before = Files.readAllBytes(Paths.get(scratch.archive()));
    // A share of a state the tag does not have fails at commit, the archive
    // left as it was.
    ModelzipException e = assertThrows(ModelzipException.class,
        () -> Archive.save(scratch.archive(), "t3", Map.of("w", Tensor.of(new float[] {1, 2})),
            Map.of(), SaveOptions.defaults().shareUpdaterState("w", "R", "t1")));
    assertEquals(e.getMessage(), ModelzipException.Code.NOT_FOUND, e.code());
    assertEquals("t3", e.tag());
    assertArrayEquals(before, Files.readAllBytes(Paths.get(scratch.archive())));
    // Sharing the same state again replaces the earlier share.
    SaveOptions twice = SaveOptions.defaults().shareUpdaterState("w", "V", "t1")
        .shareUpdaterState("w", "V", "t2");
    assertEquals(List.of(new SaveOptions.UpdaterStateShare("w", "V", "t2")),
        twice.updaterStateShares());
  }
}
