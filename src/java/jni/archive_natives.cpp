// The natives of org.modelzip.Archive (declared in Native.java): reading
// (metadata too) through modelzip::Archive, saving, removing tags and
// changing the metadata through modelzip::Writer. A jlong archive is a heap
// modelzip::Archive owned by a Java NativeHandle; a jlong tensor a heap
// modelzip::Tensor.
#include "natives.hpp"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "embeddings_handle.hpp"
#include "format/tag_name.hpp"
#include "graph/training_fields.hpp"
#include "modelzip/archive.hpp"
#include "modelzip/entry_stream.hpp"
#include "modelzip/graph/checkpoint.hpp"
#include "modelzip/graph/training.hpp"
#include "modelzip/writer.hpp"
#include "support.hpp"

namespace modelzip::jni {
namespace {

const Archive& archive_of(jlong handle) {
  return from_handle<Archive>(handle);
}

// `copy`: ReadMode::copy (owned memory, every CRC-32 checked), else zero_copy.
ReadMode read_mode(jboolean copy) {
  return copy != JNI_FALSE ? ReadMode::copy : ReadMode::zero_copy;
}

jlong archive_open(JNIEnv* env, jclass, jbyteArray path) {
  return guarded(env, [&] { return to_handle(Archive::open(to_string(env, path))); });
}

void archive_free(JNIEnv*, jclass, jlong archive) {
  free_handle<Archive>(archive);
}

jobjectArray archive_tags(JNIEnv* env, jclass, jlong archive) {
  return guarded(env, [&] { return to_java_byte_arrays(env, archive_of(archive).tags()); });
}

jboolean archive_changed_since_open(JNIEnv* env, jclass, jlong archive) {
  return guarded(env,
                 [&] { return static_cast<jboolean>(archive_of(archive).changed_since_open()); });
}

jlong archive_reopen(JNIEnv* env, jclass, jlong archive) {
  return guarded(env, [&] { return to_handle(archive_of(archive).reopen()); });
}

jobject to_java_param(JNIEnv* env, const ParamInfo& p) {
  jobject out = env->NewObject(
      java_types().param, java_types().param_init, to_java_bytes(env, p.name),
      to_java_bytes(env, p.state), to_java_bytes(env, dtype_name(p.dtype)),
      to_java_longs(env, p.shape), static_cast<jlong>(p.nbytes), static_cast<jboolean>(p.shared),
      to_java_bytes(env, p.owner_tag), to_java_bytes(env, layout_name(p.layout)),
      static_cast<jboolean>(p.compressed), static_cast<jboolean>(p.kind == BlobKind::embedding),
      to_java_bytes(env, p.blob));
  check(env);
  return out;
}

jobjectArray to_java_params(JNIEnv* env, const std::vector<ParamInfo>& params) {
  jobjectArray out =
      env->NewObjectArray(static_cast<jsize>(params.size()), java_types().param, nullptr);
  check(env);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const LocalFrame frame(env, 16);  // the arrays each Param is made of
    env->SetObjectArrayElement(out, static_cast<jsize>(i), to_java_param(env, params[i]));
  }
  return out;
}

jobjectArray archive_params(JNIEnv* env, jclass, jlong archive, jbyteArray tag) {
  return guarded(
      env, [&] { return to_java_params(env, archive_of(archive).params(to_string(env, tag))); });
}

jobjectArray archive_updater_states(JNIEnv* env, jclass, jlong archive, jbyteArray tag) {
  return guarded(env, [&] {
    return to_java_params(env, archive_of(archive).updater_states(to_string(env, tag)));
  });
}

jobject archive_updater_state(JNIEnv* env, jclass, jlong archive, jbyteArray variable,
                              jbyteArray state, jbyteArray tag, jboolean copy) {
  return guarded(env, [&] {
    return to_java_tensor(
        env, archive_of(archive).updater_state(to_string(env, variable), to_string(env, state),
                                               to_string(env, tag), read_mode(copy)));
  });
}

// An embedding parameter is refused as the library refuses it (with its
// archive, entry and tag), naming the Java way to read it where the
// library names C++'s (embedding_file()).
jobject archive_tensor(JNIEnv* env, jclass, jlong archive, jbyteArray name, jbyteArray tag,
                       jboolean copy) {
  return guarded(env, [&] {
    const Archive& a = archive_of(archive);
    const std::string param = to_string(env, name);
    const std::string tag_name = to_string(env, tag);
    try {
      return to_java_tensor(env, a.tensor(param, tag_name, read_mode(copy)));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::invalid_argument) throw;
      bool embedding = false;
      try {
        embedding = a.param(param, tag_name).kind == BlobKind::embedding;
      } catch (const Error&) {  // the tensor's own error is the one to report
      }
      if (!embedding) throw;
      throw Error(e.code(),
                  "parameter '" + param +
                      "' is an embedding, not a tensor: read it with Embeddings.open(archive, "
                      "name, tag)",
                  e.context());
    }
  });
}

jobjectArray archive_load(JNIEnv* env, jclass, jlong archive, jbyteArray tag, jboolean copy) {
  return guarded(env, [&] {
    const Archive& a = archive_of(archive);
    const std::string tag_name = to_string(env, tag);
    // The stored order (params.txt), as load() gives it.
    std::vector<std::string> names;
    for (const ParamInfo& p : a.params(tag_name))
      if (p.kind == BlobKind::tensor) names.push_back(p.name);
    NamedTensors tensors = a.load(tag_name, {.mode = read_mode(copy)});
    jobjectArray java_tensors =
        env->NewObjectArray(static_cast<jsize>(names.size()), java_types().tensor, nullptr);
    check(env);
    for (std::size_t i = 0; i < names.size(); ++i) {
      auto found = tensors.find(names[i]);
      if (found == tensors.end())
        throw Error(ErrorCode::corrupt, "parameter '" + names[i] + "' listed but not loaded",
                    {.archive = a.name(), .tag = tag_name});
      jobject item = to_java_tensor(env, std::move(found->second));
      env->SetObjectArrayElement(java_tensors, static_cast<jsize>(i), item);
      env->DeleteLocalRef(item);
    }
    jobjectArray java_names = to_java_byte_arrays(env, names);
    jclass object = env->FindClass("java/lang/Object");
    check(env);
    jobjectArray out = env->NewObjectArray(2, object, nullptr);
    check(env);
    env->SetObjectArrayElement(out, 0, java_names);
    env->SetObjectArrayElement(out, 1, java_tensors);
    return out;
  });
}

jobject archive_param(JNIEnv* env, jclass, jlong archive, jbyteArray name, jbyteArray tag) {
  return guarded(env, [&] {
    return to_java_param(env, archive_of(archive).param(to_string(env, name), to_string(env, tag)));
  });
}

jobjectArray archive_entry_names(JNIEnv* env, jclass, jlong archive) {
  return guarded(env, [&] { return to_java_byte_arrays(env, archive_of(archive).entry_names()); });
}

jboolean archive_has_entry(JNIEnv* env, jclass, jlong archive, jbyteArray name) {
  return guarded(env, [&] {
    return static_cast<jboolean>(archive_of(archive).has_entry(to_string(env, name)));
  });
}

// The most elements one Java array holds (what JVMs allocate).
constexpr std::uint64_t kMaxJavaArray = 0x7fffffff - 8;

jlong archive_entry_size(JNIEnv* env, jclass, jlong archive, jbyteArray name) {
  return guarded(env, [&] {
    return static_cast<jlong>(archive_of(archive).entry_size(to_string(env, name)));
  });
}

// A new byte[] holding `data`.
jbyteArray to_java_byte_array(JNIEnv* env, std::span<const std::byte> data) {
  jbyteArray out = env->NewByteArray(static_cast<jsize>(data.size()));
  check(env);
  env->SetByteArrayRegion(out, 0, static_cast<jsize>(data.size()),
                          reinterpret_cast<const jbyte*>(data.data()));
  check(env);
  return out;
}

// The most bytes the glue holds in native memory at once when it copies an
// entry into a Java array.
constexpr std::size_t kCopyChunk = std::size_t{1} << 20;

// The whole entry, read with its size and CRC-32 checked (as Python's
// Archive.entry), into a new byte[] of its declared size: a stored entry
// copied from its view of the archive's mapping, a deflated one
// decompressed through an EntryStream at most kCopyChunk bytes at a time,
// so either needs its Java array and a bounded buffer, never a native copy
// of its own size (as Archive::entry_part of the whole entry would be). An
// entry too large for one Java array is refused by its declared size,
// before anything is read.
jbyteArray archive_entry(JNIEnv* env, jclass, jlong archive, jbyteArray name) {
  return guarded(env, [&] {
    const Archive& a = archive_of(archive);
    const std::string entry_name = to_string(env, name);
    const std::uint64_t size = a.entry_size(entry_name);
    if (size > kMaxJavaArray)
      throw Error(ErrorCode::limit_exceeded,
                  "entry of " + std::to_string(size) +
                      " bytes does not fit one Java byte[] (at most " +
                      std::to_string(kMaxJavaArray) +
                      "): read it in parts with entry(name, offset, length)",
                  {.archive = a.name(), .entry = entry_name});
    // A stored entry's part is a view of the archive (a deflated one's is
    // decompressed): the whole entry as a view, CRC-checked, costs no memory.
    // The zip's compression method tells them apart, nothing is read for it.
    EntryStream stream = EntryStream::open(a, entry_name);
    if (size == 0 || !stream.compressed())
      return to_java_byte_array(env, a.entry_part(entry_name, 0, size).span());
    jbyteArray out = env->NewByteArray(static_cast<jsize>(size));
    check(env);
    std::vector<std::byte> chunk(
        static_cast<std::size_t>(std::min<std::uint64_t>(size, kCopyChunk)));
    std::uint64_t done = 0;
    while (done < size) {
      const auto want =
          static_cast<std::size_t>(std::min<std::uint64_t>(size - done, chunk.size()));
      const std::size_t n = stream.read({chunk.data(), want});
      if (n == 0) break;  // the stream throws first for data shorter than declared
      env->SetByteArrayRegion(out, static_cast<jsize>(done), static_cast<jsize>(n),
                              reinterpret_cast<const jbyte*>(chunk.data()));
      check(env);
      done += n;
    }
    // At the declared size the stream has checked the size and CRC-32.
    if (done < size || stream.read({chunk.data(), 1}) != 0)
      throw Error(ErrorCode::corrupt, "the entry's data does not have its declared size",
                  {.archive = a.name(), .entry = entry_name});
    return out;
  });
}

// `length` bytes of the entry from byte `offset` (Java checked the range
// against entry_size; Archive::entry_part checks it again): a copy from the
// mapping for a stored entry, for a deflated one decompressed up to the
// part's end (not CRC-checked unless the part ends the entry).
jbyteArray archive_entry_part(JNIEnv* env, jclass, jlong archive, jbyteArray name, jlong offset,
                              jint length) {
  return guarded(env, [&] {
    const Archive& a = archive_of(archive);
    const std::string entry_name = to_string(env, name);
    if (offset < 0 || length < 0)
      throw Error(ErrorCode::invalid_argument,
                  std::to_string(length) + " bytes from byte " + std::to_string(offset) +
                      ": a negative offset or length",
                  {.archive = a.name(), .entry = entry_name});
    return to_java_byte_array(env, a.entry_part(entry_name, static_cast<std::uint64_t>(offset),
                                                static_cast<std::uint64_t>(length))
                                       .span());
  });
}

// What a Java EntryInputStream owns: the stream, and the native buffer its
// reads copy through, made at the first read and kept (EntryInputStream's
// methods are synchronized, so one read at a time uses it). It keeps the
// archive's state alive.
struct JavaEntryStream {
  EntryStream stream;
  std::vector<std::byte> buffer{};  // at most kCopyChunk bytes
};

jlong archive_entry_stream(JNIEnv* env, jclass, jlong archive, jbyteArray name) {
  return guarded(env, [&] {
    return to_handle(JavaEntryStream{EntryStream::open(archive_of(archive), to_string(env, name))});
  });
}

void entry_stream_free(JNIEnv*, jclass, jlong stream) {
  free_handle<JavaEntryStream>(stream);
}

// Reads the stream's next bytes into b[off, off + len) (Java checked the
// range) through the stream's buffer, of min(len, 1 MiB) at most: no
// allocation once the buffer has grown to the calls' size. Returns how many:
// len, or fewer at the entry's end (0 once it is read).
jint entry_stream_read(JNIEnv* env, jclass, jlong stream, jbyteArray b, jint off, jint len) {
  return guarded(env, [&]() -> jint {
    JavaEntryStream& s = from_handle<JavaEntryStream>(stream);
    constexpr auto kChunk = static_cast<jint>(kCopyChunk);
    const auto wanted = static_cast<std::size_t>(std::min(len, kChunk));
    if (s.buffer.size() < wanted) {
      s.buffer.clear();  // no copy of the old contents
      s.buffer.resize(wanted);
    }
    jint done = 0;
    while (done < len) {
      const jint want = std::min(len - done, kChunk);
      const std::size_t n = s.stream.read({s.buffer.data(), static_cast<std::size_t>(want)});
      env->SetByteArrayRegion(b, off + done, static_cast<jsize>(n),
                              reinterpret_cast<const jbyte*>(s.buffer.data()));
      check(env);
      done += static_cast<jint>(n);
      if (static_cast<jint>(n) < want) break;
    }
    return done;
  });
}

// {byte[][] entries, byte[][] messages, long[] counts}: one element each per
// Problem, in verify's order; counts[i] is what problems_found counts for
// problem i (N for "... and N more problems in this entry", else 1).
jobjectArray archive_verify(JNIEnv* env, jclass, jlong archive) {
  return guarded(env, [&] {
    const std::vector<Problem> problems = archive_of(archive).verify();
    std::vector<std::string> entries;
    std::vector<std::string> messages;
    std::vector<std::int64_t> counts;
    for (const Problem& p : problems) {
      entries.push_back(p.entry);
      messages.push_back(p.message);
      counts.push_back(static_cast<std::int64_t>(problems_found(std::span(&p, 1))));
    }
    jclass object = env->FindClass("java/lang/Object");
    check(env);
    jobjectArray out = env->NewObjectArray(3, object, nullptr);
    check(env);
    env->SetObjectArrayElement(out, 0, to_java_byte_arrays(env, entries));
    env->SetObjectArrayElement(out, 1, to_java_byte_arrays(env, messages));
    env->SetObjectArrayElement(out, 2, to_java_longs(env, counts));
    return out;
  });
}

// A new Object[] holding `items` (local references, deleted here).
jobjectArray object_array(JNIEnv* env, const std::vector<jobject>& items) {
  jclass object = env->FindClass("java/lang/Object");
  check(env);
  jobjectArray out = env->NewObjectArray(static_cast<jsize>(items.size()), object, nullptr);
  env->DeleteLocalRef(object);
  check(env);
  jsize i = 0;
  for (jobject item : items) {
    env->SetObjectArrayElement(out, i++, item);
    if (item) env->DeleteLocalRef(item);
  }
  return out;
}

jdoubleArray to_java_doubles(JNIEnv* env, const std::vector<double>& values) {
  jdoubleArray out = env->NewDoubleArray(static_cast<jsize>(values.size()));
  check(env);
  env->SetDoubleArrayRegion(out, 0, static_cast<jsize>(values.size()), values.data());
  check(env);
  return out;
}

// The scalar fields of an updater or schedule (graph/training_fields.hpp, the
// list Python's dicts and `modelzip info --json` use, in the same order):
// {byte[][] keys, double[] doubles, long[] longs, long[] is_long}; field i
// is longs[i] where is_long[i] is 1, else doubles[i].
template <class S>
void put_scalars(JNIEnv* env, const S& s, std::vector<jobject>& out) {
  std::vector<std::string> keys;
  std::vector<double> doubles;
  std::vector<std::int64_t> longs;
  std::vector<std::int64_t> is_long;
  graph::detail::for_each_scalar(s, [&](std::string_view key, auto value) {
    keys.emplace_back(key);
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, std::int64_t>) {
      doubles.push_back(0);
      longs.push_back(value);
      is_long.push_back(1);
    } else {
      doubles.push_back(value);
      longs.push_back(0);
      is_long.push_back(0);
    }
  });
  out.push_back(to_java_byte_arrays(env, keys));
  out.push_back(to_java_doubles(env, doubles));
  out.push_back(to_java_longs(env, longs));
  out.push_back(to_java_longs(env, is_long));
}

// {byte[] name, byte[] type (null for FixedSchedule and RampSchedule), the
// four arrays of put_scalars, long[] step starts, double[] step values
// (MapSchedule), Object[] base (RampSchedule, else null)}.
// Holds 9 local references per level of nesting while it builds.
jobjectArray to_java_schedule(JNIEnv* env, const training::Schedule& schedule) {
  std::vector<jobject> parts;
  parts.push_back(to_java_bytes(env, training::schedule_name(schedule)));
  std::visit(
      [&](const auto& s) {
        if constexpr (requires { s.type; })
          parts.push_back(to_java_bytes(env, training::schedule_type_name(s.type)));
        else
          parts.push_back(nullptr);
        put_scalars(env, s, parts);
      },
      static_cast<const training::ScheduleVariant&>(schedule));
  std::vector<std::int64_t> starts;
  std::vector<double> values;
  if (const auto* m = std::get_if<training::MapSchedule>(&schedule))
    for (const training::ScheduleStep& step : m->steps) {
      starts.push_back(step.start);
      values.push_back(step.value);
    }
  parts.push_back(to_java_longs(env, starts));
  parts.push_back(to_java_doubles(env, values));
  const auto* r = std::get_if<training::RampSchedule>(&schedule);
  parts.push_back(r && r->base ? to_java_schedule(env, *r->base) : nullptr);
  return object_array(env, parts);
}

// {byte[] updater type, byte[][] updater keys, double[] updater values,
// Object[] learning rate schedule (or null), Object[] regularization (each
// {byte[] type, Object[] coefficient schedule, long[] {apply_learning_rate}}),
// long[] {minimize, iteration_count, epoch_count}, byte[][] feature,
// label, feature mask and label mask mappings, loss variables, byte[][]
// property keys, byte[][] property values}: TrainingConfig.fromNative's
// parts (and training_config_from_java's).
jobjectArray to_java_training_config(JNIEnv* env, const training::TrainingConfig& config) {
  // Schedules nest at most kMaxScheduleDepth deep (validate_training_config).
  if (env->EnsureLocalCapacity(32 + 9 * (training::kMaxScheduleDepth + 1)) != 0)
    throw JavaExceptionPending{};
  std::vector<jobject> updater;  // every updater field is a double
  std::visit([&](const auto& u) { put_scalars(env, u, updater); }, config.updater);
  env->DeleteLocalRef(updater[2]);
  env->DeleteLocalRef(updater[3]);
  jclass object = env->FindClass("java/lang/Object");
  check(env);
  jobjectArray regularization =
      env->NewObjectArray(static_cast<jsize>(config.regularization.size()), object, nullptr);
  env->DeleteLocalRef(object);
  check(env);
  for (std::size_t i = 0; i < config.regularization.size(); ++i) {
    const training::Regularization& r = config.regularization[i];
    jobjectArray item = object_array(
        env, {to_java_bytes(env, training::regularization_name(r.type)),
              to_java_schedule(env, r.coefficient),
              to_java_longs(env, std::vector<std::int64_t>{r.apply_learning_rate ? 1 : 0})});
    env->SetObjectArrayElement(regularization, static_cast<jsize>(i), item);
    env->DeleteLocalRef(item);
  }
  std::vector<std::string> keys;
  std::vector<std::string> values;
  for (const auto& [k, v] : config.properties) {
    keys.push_back(k);
    values.push_back(v);
  }
  return object_array(
      env,
      {to_java_bytes(env, training::updater_name(config.updater)), updater[0], updater[1],
       config.learning_rate_schedule ? to_java_schedule(env, *config.learning_rate_schedule)
                                     : nullptr,
       regularization,
       to_java_longs(env, std::vector<std::int64_t>{config.minimize ? 1 : 0, config.iteration_count,
                                                    config.epoch_count}),
       to_java_byte_arrays(env, config.feature_mapping),
       to_java_byte_arrays(env, config.label_mapping),
       to_java_byte_arrays(env, config.feature_mask_mapping),
       to_java_byte_arrays(env, config.label_mask_mapping),
       to_java_byte_arrays(env, config.loss_variables), to_java_byte_arrays(env, keys),
       to_java_byte_arrays(env, values)});
}

// The parts of to_java_training_config; null when the tag has no
// trainingConfig.fb.
jobjectArray archive_training_config(JNIEnv* env, jclass, jlong archive, jbyteArray tag) {
  return guarded(env, [&]() -> jobjectArray {
    const std::optional<training::TrainingConfig> config =
        load_training_config(archive_of(archive), to_string(env, tag));
    return config ? to_java_training_config(env, *config) : nullptr;
  });
}

// --- Training configurations from Java: the parts to_java_training_config
// makes, as TrainingConfig.toNative makes them from values a Java program
// built. Names (updater, schedule, type, regularization, field) must be the
// schema's; every error is Error(invalid_argument) naming the part.

// Element `i` of the Object[] `parts` (a local reference; null when absent).
jobject part(JNIEnv* env, jobjectArray parts, jsize i) {
  if (parts == nullptr || i >= env->GetArrayLength(parts))
    throw Error(ErrorCode::invalid_argument,
                "training config: part " + std::to_string(i) + " is missing");
  jobject out = env->GetObjectArrayElement(parts, i);
  check(env);
  return out;
}

std::vector<double> to_doubles(JNIEnv* env, jdoubleArray values) {
  if (values == nullptr) return {};
  const jsize n = env->GetArrayLength(values);
  std::vector<double> out(static_cast<std::size_t>(n));
  env->GetDoubleArrayRegion(values, 0, n, out.data());
  check(env);
  return out;
}

// Named numbers from Java (the arrays put_scalars makes), given to the
// fields of an updater or schedule struct of those names.
class JavaScalars {
 public:
  JavaScalars(std::string what, std::vector<std::string> keys, std::vector<double> doubles,
              std::vector<std::int64_t> longs, std::vector<std::int64_t> is_long)
      : what_(std::move(what)),
        keys_(std::move(keys)),
        doubles_(std::move(doubles)),
        longs_(std::move(longs)),
        is_long_(std::move(is_long)) {
    if (doubles_.size() != keys_.size() || longs_.size() != keys_.size() ||
        is_long_.size() != keys_.size())
      throw Error(ErrorCode::invalid_argument, what_ + ": names and numbers differ in number");
  }

  // `s` with every field named here set; a name that is not one of its
  // fields, or a fraction for an integer field, is an error.
  template <class S>
  S set(S s) const {
    std::vector<bool> used(keys_.size());
    std::string fields;
    graph::detail::for_each_scalar(s, [&](std::string_view key, auto& member) {
      fields += (fields.empty() ? "" : ", ") + std::string(key);
      for (std::size_t i = 0; i < keys_.size(); ++i) {
        if (keys_[i] != key) continue;
        used[i] = true;
        if constexpr (std::is_same_v<std::remove_reference_t<decltype(member)>, double>) {
          member = is_long_[i] != 0 ? static_cast<double>(longs_[i]) : doubles_[i];
        } else if (is_long_[i] != 0) {
          member = longs_[i];
        } else {
          const double d = doubles_[i];
          // [-2^63, 2^63): every double in it converts exactly.
          if (!(d >= -0x1p63 && d < 0x1p63) ||
              d != static_cast<double>(static_cast<std::int64_t>(d)))
            throw Error(ErrorCode::invalid_argument, what_ + " '" + std::string(key) +
                                                         "' must be a whole number (a Long), not " +
                                                         std::to_string(d));
          member = static_cast<std::int64_t>(d);
        }
      }
    });
    for (std::size_t i = 0; i < keys_.size(); ++i)
      if (!used[i])
        throw Error(ErrorCode::invalid_argument,
                    what_ + " has no field '" + keys_[i] +
                        "' (its fields: " + (fields.empty() ? std::string("none") : fields) + ")");
    return s;
  }

 private:
  std::string what_;
  std::vector<std::string> keys_;
  std::vector<double> doubles_;
  std::vector<std::int64_t> longs_;
  std::vector<std::int64_t> is_long_;
};

// The alternative of variant `V` whose name (`name_of` of it as a `Result`)
// is `name`, made by make(alternative{}); `names` lists every name, for the
// error of a name that is none of them.
template <class V, class Result, class NameOf, class Make>
std::optional<Result> alternative_named(std::string_view name, NameOf name_of, Make make,
                                        std::string& names) {
  std::optional<Result> out;
  auto one = [&]<class A>(A alternative) {
    const std::string_view n = name_of(Result(alternative));
    names += (names.empty() ? "" : ", ") + std::string(n);
    if (!out && n == name) out.emplace(make(std::move(alternative)));
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (one(std::variant_alternative_t<I, V>{}), ...);
  }
  (std::make_index_sequence<std::variant_size_v<V>>{});
  return out;
}

// A schedule from the parts to_java_schedule makes; `depth` counts the
// schedules around it (Java programs can nest ramps without end).
training::Schedule schedule_from_java(JNIEnv* env, jobjectArray parts, const std::string& what,
                                      int depth) {
  if (depth > training::kMaxScheduleDepth)
    throw Error(
        ErrorCode::invalid_argument,
        what + ": schedules nest at most " + std::to_string(training::kMaxScheduleDepth) + " deep");
  const LocalFrame frame(env, 16);
  const std::string name = to_string(env, static_cast<jbyteArray>(part(env, parts, 0)));
  const auto type = static_cast<jbyteArray>(part(env, parts, 1));
  const std::string type_name = to_string(env, type);
  const JavaScalars scalars(what + " " + name,
                            to_strings(env, static_cast<jobjectArray>(part(env, parts, 2))),
                            to_doubles(env, static_cast<jdoubleArray>(part(env, parts, 3))),
                            to_longs(env, static_cast<jlongArray>(part(env, parts, 4))),
                            to_longs(env, static_cast<jlongArray>(part(env, parts, 5))));
  const std::vector<std::int64_t> starts =
      to_longs(env, static_cast<jlongArray>(part(env, parts, 6)));
  const std::vector<double> values =
      to_doubles(env, static_cast<jdoubleArray>(part(env, parts, 7)));
  const auto base = static_cast<jobjectArray>(part(env, parts, 8));
  std::string names;
  std::optional<training::Schedule> out =
      alternative_named<training::ScheduleVariant, training::Schedule>(
          name, [](const training::Schedule& s) { return training::schedule_name(s); },
          [&]<class S>(S s) -> training::Schedule {
            if constexpr (requires { s.type; }) {
              if (type_name == "epoch")
                s.type = training::ScheduleType::epoch;
              else if (type != nullptr && type_name != "iteration")
                throw Error(ErrorCode::invalid_argument,
                            what + " " + name +
                                ": type must be \"iteration\" or \"epoch\", not \"" + type_name +
                                "\"");
            } else if (type != nullptr) {
              throw Error(ErrorCode::invalid_argument,
                          what + " " + name + " has no type (\"" + type_name + "\" given)");
            }
            s = scalars.set(std::move(s));
            if constexpr (std::is_same_v<S, training::MapSchedule>) {
              if (starts.size() != values.size())
                throw Error(ErrorCode::invalid_argument,
                            what + " " + name + ": step starts and values differ in number");
              for (std::size_t i = 0; i < starts.size(); ++i)
                s.steps.push_back({.start = starts[i], .value = values[i]});
            } else if (!starts.empty()) {
              throw Error(ErrorCode::invalid_argument, what + " " + name + " has no steps");
            }
            if constexpr (std::is_same_v<S, training::RampSchedule>) {
              if (base == nullptr)
                throw Error(ErrorCode::invalid_argument, what + " " + name + " needs a base");
              return training::ramp(
                  schedule_from_java(env, base, what + " " + name + " base", depth + 1),
                  s.num_iterations);
            } else if (base != nullptr) {
              throw Error(ErrorCode::invalid_argument, what + " " + name + " has no base");
            }
            return s;
          },
          names);
  if (!out)
    throw Error(ErrorCode::invalid_argument,
                what + " must be one of " + names + ", not \"" + name + "\"");
  return std::move(*out);
}

// The configuration the parts describe, checked (validate_training_config).
training::TrainingConfig training_config_from_java(JNIEnv* env, jobjectArray parts) {
  const LocalFrame frame(env, 32);
  training::TrainingConfig c;
  const std::string updater_type = to_string(env, static_cast<jbyteArray>(part(env, parts, 0)));
  const std::vector<std::string> updater_keys =
      to_strings(env, static_cast<jobjectArray>(part(env, parts, 1)));
  const JavaScalars updater("training config updater " + updater_type, updater_keys,
                            to_doubles(env, static_cast<jdoubleArray>(part(env, parts, 2))),
                            std::vector<std::int64_t>(updater_keys.size()),
                            std::vector<std::int64_t>(updater_keys.size()));
  std::string names;
  std::optional<training::Updater> u = alternative_named<training::Updater, training::Updater>(
      updater_type, [](const training::Updater& v) { return training::updater_name(v); },
      [&](auto alternative) { return training::Updater(updater.set(alternative)); }, names);
  if (!u)
    throw Error(ErrorCode::invalid_argument, "training config updater must be one of " + names +
                                                 ", not \"" + updater_type + "\"");
  c.updater = *u;
  if (const auto schedule = static_cast<jobjectArray>(part(env, parts, 3)))
    c.learning_rate_schedule =
        schedule_from_java(env, schedule, "training config learning rate schedule", 0);
  const auto terms = static_cast<jobjectArray>(part(env, parts, 4));
  const jsize term_count = terms ? env->GetArrayLength(terms) : 0;
  for (jsize i = 0; i < term_count; ++i) {
    const LocalFrame term_frame(env, 8);
    const auto term = static_cast<jobjectArray>(part(env, terms, i));
    const std::string what = "training config regularization " + std::to_string(i);
    training::Regularization r;
    const std::string type = to_string(env, static_cast<jbyteArray>(part(env, term, 0)));
    if (type == "l1")
      r.type = training::RegularizationType::l1;
    else if (type == "l2")
      r.type = training::RegularizationType::l2;
    else if (type == "weight_decay")
      r.type = training::RegularizationType::weight_decay;
    else
      throw Error(ErrorCode::invalid_argument,
                  what + ": type must be \"l1\", \"l2\" or \"weight_decay\", not \"" + type + "\"");
    r.coefficient = schedule_from_java(env, static_cast<jobjectArray>(part(env, term, 1)), what, 0);
    const std::vector<std::int64_t> apply =
        to_longs(env, static_cast<jlongArray>(part(env, term, 2)));
    r.apply_learning_rate = apply.empty() || apply[0] != 0;
    c.regularization.push_back(std::move(r));
  }
  const std::vector<std::int64_t> counts =
      to_longs(env, static_cast<jlongArray>(part(env, parts, 5)));
  if (counts.size() != 3)
    throw Error(ErrorCode::invalid_argument, "training config: counts must be 3");
  c.minimize = counts[0] != 0;
  c.iteration_count = counts[1];
  c.epoch_count = counts[2];
  c.feature_mapping = to_strings(env, static_cast<jobjectArray>(part(env, parts, 6)));
  c.label_mapping = to_strings(env, static_cast<jobjectArray>(part(env, parts, 7)));
  c.feature_mask_mapping = to_strings(env, static_cast<jobjectArray>(part(env, parts, 8)));
  c.label_mask_mapping = to_strings(env, static_cast<jobjectArray>(part(env, parts, 9)));
  c.loss_variables = to_strings(env, static_cast<jobjectArray>(part(env, parts, 10)));
  const std::vector<std::string> keys =
      to_strings(env, static_cast<jobjectArray>(part(env, parts, 11)));
  const std::vector<std::string> values =
      to_strings(env, static_cast<jobjectArray>(part(env, parts, 12)));
  if (keys.size() != values.size())
    throw Error(ErrorCode::invalid_argument,
                "training config: property keys and values differ in number");
  for (std::size_t i = 0; i < keys.size(); ++i) c.properties[keys[i]] = values[i];
  training::validate_training_config(c);
  return c;
}

// The parts of the configuration `parts` describe, as the library holds it
// (every field, defaults filled in, in schema order): what a read of it
// saved gives.
jobjectArray training_config_normalize(JNIEnv* env, jclass, jobjectArray parts) {
  return guarded(
      env, [&] { return to_java_training_config(env, training_config_from_java(env, parts)); });
}

// {format_version (decimal), model_name, model_version, quantization,
// description, writer}; an unset optional field stays null.
jobjectArray to_java_metadata(JNIEnv* env, const Metadata& m) {
  const std::optional<std::string> fields[] = {std::to_string(m.format_version),
                                               m.model_name,
                                               m.model_version,
                                               m.quantization,
                                               m.description,
                                               m.writer};
  jobjectArray out =
      env->NewObjectArray(static_cast<jsize>(std::size(fields)), java_types().byte_array, nullptr);
  check(env);
  for (std::size_t i = 0; i < std::size(fields); ++i) {
    if (!fields[i]) continue;  // stays null: not set
    jbyteArray item = to_java_bytes(env, *fields[i]);
    env->SetObjectArrayElement(out, static_cast<jsize>(i), item);
    env->DeleteLocalRef(item);
  }
  return out;
}

jobjectArray archive_metadata(JNIEnv* env, jclass, jlong archive) {
  return guarded(env, [&] { return to_java_metadata(env, archive_of(archive).metadata()); });
}

// The fields of org.modelzip.Metadata.Field, in its order.
constexpr std::optional<std::string> Metadata::*kMetadataFields[] = {
    &Metadata::model_name, &Metadata::model_version, &Metadata::quantization,
    &Metadata::description};

// The edit for Writer::update_metadata that a MetadataUpdate describes: bit
// i of `changed` sets field i to values[i], or clears it where that is null.
// Read here, before anything is written; the edit itself cannot throw.
std::function<void(Metadata&)> metadata_edit(JNIEnv* env, jint changed, jobjectArray values) {
  constexpr jint kFieldCount = static_cast<jint>(std::size(kMetadataFields));
  if (changed < 0 || changed >= (jint{1} << kFieldCount))
    throw Error(ErrorCode::invalid_argument,
                "metadata change mask " + std::to_string(changed) + " names no field");
  if (values == nullptr || env->GetArrayLength(values) != kFieldCount)
    throw Error(ErrorCode::invalid_argument,
                "metadata values must be " + std::to_string(kFieldCount) + ", one per field");
  std::vector<std::pair<std::optional<std::string> Metadata::*, std::optional<std::string>>>
      changes;
  for (jint i = 0; i < kFieldCount; ++i) {
    if ((changed & (jint{1} << i)) == 0) continue;
    const LocalFrame frame(env, 1);
    auto value = static_cast<jbyteArray>(env->GetObjectArrayElement(values, i));
    check(env);
    changes.emplace_back(kMetadataFields[i],
                         value ? std::optional(to_string(env, value)) : std::nullopt);
  }
  return [changes = std::move(changes)](Metadata& m) {
    for (const auto& [member, value] : changes) m.*member = value;
  };
}

// keep_last: 0 keeps every tag (Java refuses other values below 1 before
// calling).
// `metadata_changed` and `metadata_values`: see metadata_edit; `replace_hint`
// replaces the C++ hint of an existing tag's error. `state_share_*[i]`:
// NewTag::share_updater_state; `training`: the parts of the tag's
// trainingConfig.fb (training_config_from_java), null for none.
void archive_save(JNIEnv* env, jclass, jbyteArray path, jbyteArray tag, jobjectArray names,
                  jlongArray tensors, jobjectArray updater_variables, jobjectArray updater_states,
                  jlongArray updater_tensors, jobjectArray share_names, jobjectArray share_tags,
                  jobjectArray share_params, jobjectArray state_share_variables,
                  jobjectArray state_share_states, jobjectArray state_share_tags,
                  jobjectArray embedding_names, jlongArray embeddings, jobjectArray training,
                  jboolean replace, jint keep_last, jboolean durable, jboolean compress,
                  jboolean dedup, jint metadata_changed, jobjectArray metadata_values,
                  jbyteArray replace_hint) {
  guarded(env, [&] {
    if (keep_last < 0)
      throw Error(ErrorCode::invalid_argument,
                  "keep_last must be at least 1, not " + std::to_string(keep_last));
    const std::vector<std::string> param_names = to_strings(env, names);
    const std::vector<std::int64_t> handles = to_longs(env, tensors);
    if (param_names.size() != handles.size())
      throw Error(ErrorCode::invalid_argument, "names and tensors differ in number");
    const std::vector<std::string> variables = to_strings(env, updater_variables);
    const std::vector<std::string> states = to_strings(env, updater_states);
    const std::vector<std::int64_t> state_handles = to_longs(env, updater_tensors);
    if (variables.size() != states.size() || states.size() != state_handles.size())
      throw Error(ErrorCode::invalid_argument,
                  "updater variables, states and tensors differ in number");
    const std::vector<std::string> shared = to_strings(env, share_names);
    const std::vector<std::string> shared_tags = to_strings(env, share_tags);
    const std::vector<std::string> shared_params = to_strings(env, share_params);
    if (shared.size() != shared_tags.size() || shared_tags.size() != shared_params.size())
      throw Error(ErrorCode::invalid_argument,
                  "shared names, tags and parameters differ in number");
    const std::vector<std::string> shared_variables = to_strings(env, state_share_variables);
    const std::vector<std::string> shared_states = to_strings(env, state_share_states);
    const std::vector<std::string> shared_state_tags = to_strings(env, state_share_tags);
    if (shared_variables.size() != shared_states.size() ||
        shared_states.size() != shared_state_tags.size())
      throw Error(ErrorCode::invalid_argument,
                  "shared updater variables, states and tags differ in number");
    const std::vector<std::string> embedding_params = to_strings(env, embedding_names);
    const std::vector<std::int64_t> embedding_handles = to_longs(env, embeddings);
    if (embedding_params.size() != embedding_handles.size())
      throw Error(ErrorCode::invalid_argument, "embedding names and embeddings differ in number");
    const std::string archive_path = to_string(env, path);
    const std::string tag_name = to_string(env, tag);
    const std::string hint = to_string(env, replace_hint);
    std::function<void(Metadata&)> metadata =
        metadata_changed != 0 ? metadata_edit(env, metadata_changed, metadata_values) : nullptr;
    // Errors name the archive and the tag, also those of checks that know
    // neither (a parameter name, the tag's spelling).
    try {
      // The Java caller holds every tensor open until this returns, so the
      // tensors (copies sharing their bytes) stay valid through commit().
      const ParamOptions param_options{.compression =
                                           compress ? Compression::deflate : Compression::store};
      NewTag contents;
      for (std::size_t i = 0; i < handles.size(); ++i)
        contents.add(param_names[i], from_handle<Tensor>(handles[i]), param_options);
      for (std::size_t i = 0; i < embedding_handles.size(); ++i)
        contents.add_embedding(embedding_params[i],
                               from_handle<JavaEmbeddings>(embedding_handles[i]).file_bytes());
      for (std::size_t i = 0; i < shared.size(); ++i)
        contents.share(shared[i], shared_tags[i], shared_params[i]);
      for (std::size_t i = 0; i < state_handles.size(); ++i)
        contents.add_updater_state(variables[i], states[i], from_handle<Tensor>(state_handles[i]),
                                   param_options);
      for (std::size_t i = 0; i < shared_variables.size(); ++i)
        contents.share_updater_state(shared_variables[i], shared_states[i], shared_state_tags[i]);
      if (training != nullptr)
        contents.set_entry(
            std::string(kTrainingConfigEntryName),
            training::encode_training_config(training_config_from_java(env, training)));
      Writer writer = Writer::open(archive_path, WriterOptions{.dedup = dedup != JNI_FALSE,
                                                               .durable = durable != JNI_FALSE});
      if (replace)
        writer.replace_tag(tag_name, std::move(contents));
      else
        writer.add_tag(tag_name, std::move(contents));
      if (keep_last > 0) writer.keep_last(static_cast<std::size_t>(keep_last));
      if (metadata) writer.update_metadata(std::move(metadata));
      writer.commit();
    } catch (const Error& e) {
      throw format::with_replace_hint(e.with_context({.archive = archive_path, .tag = tag_name}),
                                      hint);
    }
  });
}

void archive_remove_tag(JNIEnv* env, jclass, jbyteArray path, jbyteArray tag) {
  guarded(env, [&] {
    Writer writer = Writer::open(to_string(env, path));
    writer.remove_tag(to_string(env, tag));
    writer.commit();
  });
}

// Changes the metadata of an archive in one commit: tags and tensors are
// copied as they are, and a failed commit leaves the archive unchanged
// (Writer::commit). A missing archive is created with no tags, as
// Writer::open and Python's update_metadata do.
jobjectArray archive_update_metadata(JNIEnv* env, jclass, jbyteArray path, jint changed,
                                     jobjectArray values) {
  return guarded(env, [&] {
    const std::string archive_path = to_string(env, path);
    std::function<void(Metadata&)> edit = metadata_edit(env, changed, values);
    try {
      Writer writer = Writer::open(archive_path);
      writer.update_metadata(std::move(edit));
      writer.commit();
      return to_java_metadata(env, Archive::open(archive_path).metadata());
    } catch (const Error& e) {
      throw e.with_context({.archive = archive_path});
    }
  });
}

const JNINativeMethod kMethods[] = {
    native_method("archiveOpen", "([B)J", archive_open),
    native_method("archiveFree", "(J)V", archive_free),
    native_method("archiveTags", "(J)[[B", archive_tags),
    native_method("archiveChangedSinceOpen", "(J)Z", archive_changed_since_open),
    native_method("archiveReopen", "(J)J", archive_reopen),
    native_method("archiveParams", "(J[B)[Lorg/modelzip/Param;", archive_params),
    native_method("archiveTensor", "(J[B[BZ)Lorg/modelzip/Tensor;", archive_tensor),
    native_method("archiveUpdaterStates", "(J[B)[Lorg/modelzip/Param;", archive_updater_states),
    native_method("archiveUpdaterState", "(J[B[B[BZ)Lorg/modelzip/Tensor;", archive_updater_state),
    native_method("archiveLoad", "(J[BZ)[Ljava/lang/Object;", archive_load),
    native_method("archiveParam", "(J[B[B)Lorg/modelzip/Param;", archive_param),
    native_method("archiveEntryNames", "(J)[[B", archive_entry_names),
    native_method("archiveHasEntry", "(J[B)Z", archive_has_entry),
    native_method("archiveEntry", "(J[B)[B", archive_entry),
    native_method("archiveEntrySize", "(J[B)J", archive_entry_size),
    native_method("archiveEntryPart", "(J[BJI)[B", archive_entry_part),
    native_method("archiveEntryStream", "(J[B)J", archive_entry_stream),
    native_method("entryStreamFree", "(J)V", entry_stream_free),
    native_method("entryStreamRead", "(J[BII)I", entry_stream_read),
    native_method("archiveVerify", "(J)[Ljava/lang/Object;", archive_verify),
    native_method("archiveSave",
                  "([B[B[[B[J[[B[[B[J[[B[[B[[B[[B[[B[[B[[B[J[Ljava/lang/Object;ZIZZZI[[B[B)V",
                  archive_save),
    native_method("archiveTrainingConfig", "(J[B)[Ljava/lang/Object;", archive_training_config),
    native_method("trainingConfigNormalize", "([Ljava/lang/Object;)[Ljava/lang/Object;",
                  training_config_normalize),
    native_method("archiveMetadata", "(J)[[B", archive_metadata),
    native_method("archiveUpdateMetadata", "([BI[[B)[[B", archive_update_metadata),
    native_method("archiveRemoveTag", "([B[B)V", archive_remove_tag),
};

}  // namespace

bool register_archive_natives(JNIEnv* env, jclass native_class) {
  return register_natives(env, native_class, kMethods);
}

}  // namespace modelzip::jni
