package org.modelzip;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * How a tag is being trained: its trainingConfig.fb (schemas/training.fbs),
 * read by {@link Archive#trainingConfig(String)}. The same fields, under the
 * same names, as C++'s {@code modelzip::training::TrainingConfig}, Python's
 * {@code Archive.training_config()} dict and {@code modelzip info --json}.
 * An immutable value; read-only (a tag's training configuration is written
 * by C++ or Python).
 */
public final class TrainingConfig {
  /**
   * The optimizer: its {@code type} as the schema names it ("Sgd",
   * "Nesterovs", "Adam", "AdamW", "AdaMax", "AmsGrad", "Nadam", "RmsProp",
   * "AdaGrad", "AdaDelta", "NoOp") and its hyperparameters by name, in
   * schema order ("learning_rate", "beta1", "beta2", "epsilon"... as in
   * Python's dict; none for NoOp).
   */
  public record Updater(String type, Map<String, Double> parameters) {
    public Updater {
      Objects.requireNonNull(type, "type");
      parameters = Collections.unmodifiableMap(new LinkedHashMap<>(parameters));
    }
  }

  /** One step of a "MapSchedule": {@code value} applies from {@code start} on. */
  public record Step(long start, double value) {}

  /**
   * A regularization term: {@code type} "l1", "l2" or "weight_decay", its
   * coefficient as a schedule, and whether weight decay is scaled by the
   * learning rate.
   */
  public record Regularization(String type, Schedule coefficient, boolean applyLearningRate) {
    public Regularization {
      Objects.requireNonNull(type, "type");
      Objects.requireNonNull(coefficient, "coefficient");
    }
  }

  /**
   * A value that changes with the iteration or epoch (schemas/training.fbs
   * gives each formula): its {@link #name()} ("FixedSchedule",
   * "StepSchedule", "ExponentialSchedule", "InverseSchedule",
   * "PolySchedule", "SigmoidSchedule", "CycleSchedule", "MapSchedule",
   * "RampSchedule"), what it counts ({@link #type()}), its fields by name
   * ({@link #parameters()}), a MapSchedule's {@link #steps()} and a
   * RampSchedule's {@link #base()}. An immutable value.
   */
  public static final class Schedule {
    private final String name;
    private final String type;  // null for FixedSchedule and RampSchedule
    private final Map<String, Number> parameters;
    private final List<Step> steps;
    private final Schedule base;  // RampSchedule only

    private Schedule(String name, String type, Map<String, Number> parameters, List<Step> steps,
        Schedule base) {
      this.name = name;
      this.type = type;
      this.parameters = Collections.unmodifiableMap(parameters);
      this.steps = List.copyOf(steps);
      this.base = base;
    }

    /** The schedule's kind, as the schema names it ("StepSchedule"...). */
    public String name() {
      return name;
    }

    /**
     * "iteration" or "epoch": whether the schedule counts iterations or
     * epochs; empty for a FixedSchedule and a RampSchedule (whose ramp
     * counts iterations and whose base has its own type).
     */
    public Optional<String> type() {
      return Optional.ofNullable(type);
    }

    /**
     * The schedule's numbers by name, in schema order, as in Python's dict:
     * {@code Double} for values ("value", "initial_value", "gamma",
     * "decay_rate", "step"...), {@code Long} for counts ("max_iterations",
     * "step_size", "cycle_length", "annealing_length", "num_iterations").
     */
    public Map<String, Number> parameters() {
      return parameters;
    }

    /** A MapSchedule's steps, their starts increasing from 0; empty for the others. */
    public List<Step> steps() {
      return steps;
    }

    /** The schedule a RampSchedule warms up; empty for the others. */
    public Optional<Schedule> base() {
      return Optional.ofNullable(base);
    }

    /** Equal in every part. */
    @Override
    public boolean equals(Object other) {
      return other instanceof Schedule o && name.equals(o.name) && Objects.equals(type, o.type)
          && parameters.equals(o.parameters) && steps.equals(o.steps)
          && Objects.equals(base, o.base);
    }

    @Override
    public int hashCode() {
      return Objects.hash(name, type, parameters, steps, base);
    }

    @Override
    public String toString() {
      return name + (type == null ? "" : "(" + type + ")") + parameters
          + (steps.isEmpty() ? "" : steps.toString()) + (base == null ? "" : " of " + base);
    }

    /** From archive_natives.cpp's to_java_schedule; null stays null. */
    static Schedule fromNative(Object[] parts) {
      if (parts == null) {
        return null;
      }
      long[] starts = (long[]) parts[6];
      double[] values = (double[]) parts[7];
      List<Step> steps = new ArrayList<>(starts.length);
      for (int i = 0; i < starts.length; i++) {
        steps.add(new Step(starts[i], values[i]));
      }
      return new Schedule(Native.string((byte[]) parts[0]), Native.string((byte[]) parts[1]),
          scalars((byte[][]) parts[2], (double[]) parts[3], (long[]) parts[4], (long[]) parts[5]),
          steps, fromNative((Object[]) parts[8]));
    }
  }

  private final Updater updater;
  private final Schedule learningRateSchedule;  // null: the updater's fixed rate
  private final List<Regularization> regularization;
  private final boolean minimize;
  private final List<String> featureMapping;
  private final List<String> labelMapping;
  private final List<String> featureMaskMapping;
  private final List<String> labelMaskMapping;
  private final List<String> lossVariables;
  private final long iterationCount;
  private final long epochCount;
  private final Map<String, String> properties;

  private TrainingConfig(Object[] parts) {
    String[] updaterKeys = Native.strings((byte[][]) parts[1]);
    double[] updaterValues = (double[]) parts[2];
    Map<String, Double> updaterParameters = new LinkedHashMap<>();
    for (int i = 0; i < updaterKeys.length; i++) {
      updaterParameters.put(updaterKeys[i], updaterValues[i]);
    }
    this.updater = new Updater(Native.string((byte[]) parts[0]), updaterParameters);
    this.learningRateSchedule = Schedule.fromNative((Object[]) parts[3]);
    List<Regularization> terms = new ArrayList<>();
    for (Object item : (Object[]) parts[4]) {
      Object[] r = (Object[]) item;
      terms.add(new Regularization(Native.string((byte[]) r[0]),
          Schedule.fromNative((Object[]) r[1]), ((long[]) r[2])[0] != 0));
    }
    this.regularization = List.copyOf(terms);
    long[] counts = (long[]) parts[5];
    this.minimize = counts[0] != 0;
    this.iterationCount = counts[1];
    this.epochCount = counts[2];
    this.featureMapping = List.of(Native.strings((byte[][]) parts[6]));
    this.labelMapping = List.of(Native.strings((byte[][]) parts[7]));
    this.featureMaskMapping = List.of(Native.strings((byte[][]) parts[8]));
    this.labelMaskMapping = List.of(Native.strings((byte[][]) parts[9]));
    this.lossVariables = List.of(Native.strings((byte[][]) parts[10]));
    String[] keys = Native.strings((byte[][]) parts[11]);
    String[] values = Native.strings((byte[][]) parts[12]);
    Map<String, String> props = new LinkedHashMap<>();
    for (int i = 0; i < keys.length; i++) {
      props.put(keys[i], values[i]);
    }
    this.properties = Collections.unmodifiableMap(props);
  }

  /** From archive_natives.cpp's archive_training_config. */
  static TrainingConfig fromNative(Object[] parts) {
    return new TrainingConfig(parts);
  }

  private static Map<String, Number> scalars(byte[][] keys, double[] doubles, long[] longs,
      long[] isLong) {
    Map<String, Number> out = new LinkedHashMap<>();
    for (int i = 0; i < keys.length; i++) {
      out.put(Native.string(keys[i]), isLong[i] != 0 ? (Number) longs[i] : (Number) doubles[i]);
    }
    return out;
  }

  /** The optimizer and its fixed hyperparameters. */
  public Updater updater() {
    return updater;
  }

  /** The schedule that replaces the updater's fixed learning rate; empty when there is none. */
  public Optional<Schedule> learningRateSchedule() {
    return Optional.ofNullable(learningRateSchedule);
  }

  /** The regularization terms, in stored order. */
  public List<Regularization> regularization() {
    return regularization;
  }

  /** Whether the loss is minimized (else maximized). */
  public boolean minimize() {
    return minimize;
  }

  /** The placeholders fed by the i-th features of a data set. */
  public List<String> featureMapping() {
    return featureMapping;
  }

  /** The placeholders fed by the i-th labels of a data set. */
  public List<String> labelMapping() {
    return labelMapping;
  }

  /** The placeholders fed by the i-th feature masks of a data set. */
  public List<String> featureMaskMapping() {
    return featureMaskMapping;
  }

  /** The placeholders fed by the i-th label masks of a data set. */
  public List<String> labelMaskMapping() {
    return labelMaskMapping;
  }

  /** The loss variables; empty: the graph's own. */
  public List<String> lossVariables() {
    return lossVariables;
  }

  /** Completed iterations (updater steps). */
  public long iterationCount() {
    return iterationCount;
  }

  /** Completed epochs. */
  public long epochCount() {
    return epochCount;
  }

  /** Free-form properties (data loader position, seeds...), by key in sorted order. */
  public Map<String, String> properties() {
    return properties;
  }

  /** Equal in every field. */
  @Override
  public boolean equals(Object other) {
    return other instanceof TrainingConfig o && updater.equals(o.updater)
        && Objects.equals(learningRateSchedule, o.learningRateSchedule)
        && regularization.equals(o.regularization) && minimize == o.minimize
        && featureMapping.equals(o.featureMapping) && labelMapping.equals(o.labelMapping)
        && featureMaskMapping.equals(o.featureMaskMapping)
        && labelMaskMapping.equals(o.labelMaskMapping) && lossVariables.equals(o.lossVariables)
        && iterationCount == o.iterationCount && epochCount == o.epochCount
        && properties.equals(o.properties);
  }

  @Override
  public int hashCode() {
    return Objects.hash(updater, learningRateSchedule, regularization, minimize, featureMapping,
        labelMapping, featureMaskMapping, labelMaskMapping, lossVariables, iterationCount,
        epochCount, properties);
  }

  @Override
  public String toString() {
    return "TrainingConfig(" + updater.type() + updater.parameters()
        + (learningRateSchedule == null ? "" : ", learning rate " + learningRateSchedule)
        + (regularization.isEmpty() ? "" : ", regularization " + regularization)
        + ", iteration " + iterationCount + ", epoch " + epochCount + ")";
  }
}
