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
 * An immutable value: read from a tag, or made by a {@link Builder}
 * ({@link #builder}, {@link #toBuilder}) and saved with a tag by
 * {@link SaveOptions#trainingConfig}.
 *
 * <pre>{@code
 * TrainingConfig config = TrainingConfig.builder(
 *         new TrainingConfig.Updater("Adam", Map.of("learning_rate", 0.01)))
 *     .learningRateSchedule(TrainingConfig.Schedule.of("StepSchedule", "epoch",
 *         Map.of("initial_value", 0.01, "decay_rate", 0.5, "step", 10.0)))
 *     .iterationCount(1000).epochCount(3).build();   // checked; defaults filled in
 * }</pre>
 */
public final class TrainingConfig {
  /**
   * The optimizer: its {@code type} as the schema names it ("Sgd",
   * "Nesterovs", "Adam", "AdamW", "AdaMax", "AmsGrad", "Nadam", "RmsProp",
   * "AdaGrad", "AdaDelta", "NoOp") and its hyperparameters by name, in
   * schema order ("learning_rate", "beta1", "beta2", "epsilon"... as in
   * Python's dict; none for NoOp). One made for a {@link Builder} may name
   * only some of them: the others take the schema's defaults (Deeplearning4j's
   * values: Adam's beta2 0.999...) when the configuration is built.
   */
  public record Updater(String type, Map<String, Double> parameters) {
    public Updater {
      Objects.requireNonNull(type, "type");
      parameters.forEach((k, v) -> {
        Objects.requireNonNull(k, () -> type + ": a parameter name is null");
        Objects.requireNonNull(v, () -> type + ": parameter '" + k + "' is null");
      });
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

    /**
     * A schedule of kind {@code name} ("StepSchedule"...), counting
     * {@code type} ("iteration" or "epoch"; {@code null}: "iteration", and
     * {@code null} for a FixedSchedule and a RampSchedule, which have none),
     * with its numbers by name as {@link #parameters()} names them (those
     * left out take the schema's defaults; {@code Long} or {@code Integer}
     * for the counts). A MapSchedule is made by {@link #map}, a RampSchedule by
     * {@link #ramp}. The names and values are checked when a configuration
     * holding the schedule is built ({@link Builder#build()}).
     */
    public static Schedule of(String name, String type, Map<String, ? extends Number> parameters) {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(parameters, "parameters");
      Map<String, Number> copy = new LinkedHashMap<>();
      for (Map.Entry<String, ? extends Number> e : parameters.entrySet()) {
        copy.put(Objects.requireNonNull(e.getKey(), () -> name + ": a parameter name is null"),
            Objects.requireNonNull(e.getValue(),
                () -> name + ": parameter '" + e.getKey() + "' is null"));
      }
      return new Schedule(name, type, copy, List.of(), null);
    }

    /** A "FixedSchedule": {@code value} at every iteration and epoch. */
    public static Schedule fixed(double value) {
      return of("FixedSchedule", null, Map.of("value", value));
    }

    /**
     * A "MapSchedule" counting {@code type} ({@code null}: "iteration"): the
     * value of the last step whose start is at most the count; the starts
     * increase strictly from 0.
     */
    public static Schedule map(String type, List<Step> steps) {
      Objects.requireNonNull(steps, "steps");
      return new Schedule("MapSchedule", type, new LinkedHashMap<>(), steps, null);
    }

    /**
     * A "RampSchedule": {@code base}'s value times
     * min(1, (iteration + 1) / numIterations), a warm-up.
     */
    public static Schedule ramp(Schedule base, long numIterations) {
      Objects.requireNonNull(base, "base");
      Map<String, Number> parameters = new LinkedHashMap<>();
      parameters.put("num_iterations", numIterations);
      return new Schedule("RampSchedule", null, parameters, List.of(), base);
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

    /** The parts fromNative reads (archive_natives.cpp's schedule_from_java). */
    Object[] toNative() {
      int n = parameters.size();
      byte[][] keys = new byte[n][];
      double[] doubles = new double[n];
      long[] longs = new long[n];
      long[] isLong = new long[n];
      int i = 0;
      for (Map.Entry<String, Number> e : parameters.entrySet()) {
        keys[i] = Native.utf8(e.getKey());
        Number v = e.getValue();
        if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
          longs[i] = v.longValue();
          isLong[i] = 1;
        } else {
          doubles[i] = v.doubleValue();
        }
        i++;
      }
      long[] starts = new long[steps.size()];
      double[] values = new double[steps.size()];
      for (int s = 0; s < steps.size(); s++) {
        starts[s] = steps.get(s).start();
        values[s] = steps.get(s).value();
      }
      return new Object[] {Native.utf8(name), Native.utf8(type), keys, doubles, longs, isLong,
          starts, values, base == null ? null : base.toNative()};
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

  /** From archive_natives.cpp's to_java_training_config. */
  static TrainingConfig fromNative(Object[] parts) {
    return new TrainingConfig(parts);
  }

  /** The parts fromNative reads (archive_natives.cpp's training_config_from_java). */
  Object[] toNative() {
    return toNative(updater, learningRateSchedule, regularization, minimize, featureMapping,
        labelMapping, featureMaskMapping, labelMaskMapping, lossVariables, iterationCount,
        epochCount, properties);
  }

  private static Object[] toNative(Updater updater, Schedule learningRateSchedule,
      List<Regularization> regularization, boolean minimize, List<String> featureMapping,
      List<String> labelMapping, List<String> featureMaskMapping, List<String> labelMaskMapping,
      List<String> lossVariables, long iterationCount, long epochCount,
      Map<String, String> properties) {
    byte[][] updaterKeys = new byte[updater.parameters().size()][];
    double[] updaterValues = new double[updaterKeys.length];
    int i = 0;
    for (Map.Entry<String, Double> e : updater.parameters().entrySet()) {
      updaterKeys[i] = Native.utf8(e.getKey());
      updaterValues[i++] = e.getValue();
    }
    Object[] terms = new Object[regularization.size()];
    for (int t = 0; t < terms.length; t++) {
      Regularization r = regularization.get(t);
      terms[t] = new Object[] {Native.utf8(r.type()), r.coefficient().toNative(),
          new long[] {r.applyLearningRate() ? 1 : 0}};
    }
    return new Object[] {Native.utf8(updater.type()), updaterKeys, updaterValues,
        learningRateSchedule == null ? null : learningRateSchedule.toNative(), terms,
        new long[] {minimize ? 1 : 0, iterationCount, epochCount},
        Native.utf8(featureMapping.toArray(new String[0])),
        Native.utf8(labelMapping.toArray(new String[0])),
        Native.utf8(featureMaskMapping.toArray(new String[0])),
        Native.utf8(labelMaskMapping.toArray(new String[0])),
        Native.utf8(lossVariables.toArray(new String[0])),
        Native.utf8(properties.keySet().toArray(new String[0])),
        Native.utf8(properties.values().toArray(new String[0]))};
  }

  /**
   * A builder of a configuration with {@code updater} and the schema's
   * defaults for the rest: no learning-rate schedule, no regularization,
   * minimize, no mappings or loss variables (the graph's own), counters 0,
   * no properties.
   */
  public static Builder builder(Updater updater) {
    return new Builder(updater);
  }

  /**
   * A builder holding every field of this configuration: to save it again
   * with other counters, e.g.
   * {@code config.toBuilder().iterationCount(config.iterationCount() + 100).build()}.
   */
  public Builder toBuilder() {
    Builder b = new Builder(updater);
    b.learningRateSchedule = learningRateSchedule;
    b.regularization = regularization;
    b.minimize = minimize;
    b.featureMapping = featureMapping;
    b.labelMapping = labelMapping;
    b.featureMaskMapping = featureMaskMapping;
    b.labelMaskMapping = labelMaskMapping;
    b.lossVariables = lossVariables;
    b.iterationCount = iterationCount;
    b.epochCount = epochCount;
    b.properties = new LinkedHashMap<>(properties);
    return b;
  }

  /**
   * Makes a {@link TrainingConfig} (C++'s {@code training::TrainingConfig},
   * Python's {@code training=} dict) field by field; {@link #build()} checks
   * it. Each setter replaces the field and returns this builder. Not
   * thread-safe (a plain mutable builder); the configurations it builds are
   * immutable.
   */
  public static final class Builder {
    private Updater updater;
    private Schedule learningRateSchedule;
    private List<Regularization> regularization = List.of();
    private boolean minimize = true;
    private List<String> featureMapping = List.of();
    private List<String> labelMapping = List.of();
    private List<String> featureMaskMapping = List.of();
    private List<String> labelMaskMapping = List.of();
    private List<String> lossVariables = List.of();
    private long iterationCount;
    private long epochCount;
    private Map<String, String> properties = new LinkedHashMap<>();

    private Builder(Updater updater) {
      updater(updater);
    }

    /** The optimizer and its hyperparameters (those left out: the schema's defaults). */
    public Builder updater(Updater updater) {
      this.updater = Objects.requireNonNull(updater, "updater");
      return this;
    }

    /**
     * The schedule that replaces the updater's fixed learning rate;
     * {@code null}: none (AdaDelta and NoOp, which have no learning rate,
     * take none).
     */
    public Builder learningRateSchedule(Schedule schedule) {
      this.learningRateSchedule = schedule;
      return this;
    }

    /** The regularization terms, in order. */
    public Builder regularization(List<Regularization> terms) {
      this.regularization = List.copyOf(terms);
      return this;
    }

    /** Whether the loss is minimized (the default) or maximized. */
    public Builder minimize(boolean minimize) {
      this.minimize = minimize;
      return this;
    }

    /** The placeholders fed by the i-th features of a data set. */
    public Builder featureMapping(List<String> names) {
      this.featureMapping = List.copyOf(names);
      return this;
    }

    /** The placeholders fed by the i-th labels of a data set. */
    public Builder labelMapping(List<String> names) {
      this.labelMapping = List.copyOf(names);
      return this;
    }

    /** The placeholders fed by the i-th feature masks of a data set. */
    public Builder featureMaskMapping(List<String> names) {
      this.featureMaskMapping = List.copyOf(names);
      return this;
    }

    /** The placeholders fed by the i-th label masks of a data set. */
    public Builder labelMaskMapping(List<String> names) {
      this.labelMaskMapping = List.copyOf(names);
      return this;
    }

    /** The loss variables; empty (the default): the graph's own. */
    public Builder lossVariables(List<String> names) {
      this.lossVariables = List.copyOf(names);
      return this;
    }

    /** Completed iterations (updater steps), at least 0. */
    public Builder iterationCount(long count) {
      this.iterationCount = count;
      return this;
    }

    /** Completed epochs, at least 0. */
    public Builder epochCount(long count) {
      this.epochCount = count;
      return this;
    }

    /** The free-form properties, replacing those set before. */
    public Builder properties(Map<String, String> properties) {
      Map<String, String> copy = new LinkedHashMap<>();
      properties.forEach((k, v) -> copy.put(Objects.requireNonNull(k, "property key"),
          Objects.requireNonNull(v, () -> "property '" + k + "' is null")));
      this.properties = copy;
      return this;
    }

    /** Sets one free-form property (data loader position, seed...). */
    public Builder property(String key, String value) {
      properties.put(Objects.requireNonNull(key, "key"),
          Objects.requireNonNull(value, () -> "property '" + key + "' is null"));
      return this;
    }

    /**
     * The configuration, as the library holds it: the hyperparameters and
     * schedule numbers left out are filled in with the schema's defaults,
     * in schema order, so it equals what {@link Archive#trainingConfig}
     * reads back after a save.
     *
     * @throws IllegalArgumentException naming the first rule the
     *     configuration breaks (the library's checks, as C++'s
     *     {@code validate_training_config}: an unknown updater, schedule,
     *     type, regularization or field name, a learning rate below 0, a
     *     beta outside [0, 1), a value that is not finite, a MapSchedule
     *     whose starts do not increase from 0, a learning-rate schedule for
     *     AdaDelta or NoOp, a negative counter, an empty mapping name...);
     *     its cause is the {@link ModelzipException} (INVALID_ARGUMENT)
     */
    public TrainingConfig build() {
      Object[] parts = toNative(updater, learningRateSchedule, regularization, minimize,
          featureMapping, labelMapping, featureMaskMapping, labelMaskMapping, lossVariables,
          iterationCount, epochCount, properties);
      try {
        return fromNative(Native.trainingConfigNormalize(parts));
      } catch (ModelzipException e) {
        if (e.code() == ModelzipException.Code.INVALID_ARGUMENT) {
          throw new IllegalArgumentException(e.getMessage(), e);
        }
        throw e;
      }
    }
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
