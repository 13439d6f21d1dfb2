// The natives of org.modelzip.Archive (declared in Native.java): reading
// (metadata too) through modelzip::Archive, saving, removing tags and
// changing the metadata through modelzip::Writer. A jlong archive is a heap
// modelzip::Archive owned by a Java NativeHandle; a jlong tensor a heap
// modelzip::Tensor.
#include "natives.hpp"

#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "format/tag_name.hpp"
#include "modelzip/archive.hpp"
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

jobject to_java_param(JNIEnv* env, const ParamInfo& p) {
  jobject out = env->NewObject(
      java_types().param, java_types().param_init, to_java_bytes(env, p.name),
      to_java_bytes(env, p.state), to_java_bytes(env, dtype_name(p.dtype)),
      to_java_longs(env, p.shape), static_cast<jlong>(p.nbytes), static_cast<jboolean>(p.shared),
      to_java_bytes(env, p.owner_tag), to_java_bytes(env, layout_name(p.layout)),
      static_cast<jboolean>(p.compressed), static_cast<jboolean>(p.kind == BlobKind::embedding));
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

jobject archive_tensor(JNIEnv* env, jclass, jlong archive, jbyteArray name, jbyteArray tag,
                       jboolean copy) {
  return guarded(env, [&] {
    return to_java_tensor(env, archive_of(archive).tensor(to_string(env, name), to_string(env, tag),
                                                          read_mode(copy)));
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
    NamedTensors tensors = a.load(tag_name, read_mode(copy));
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

jobjectArray archive_verify(JNIEnv* env, jclass, jlong archive) {
  return guarded(env, [&] {
    std::vector<std::string> lines;
    for (const Problem& p : archive_of(archive).verify())
      lines.push_back(p.entry.empty() ? p.message : p.entry + ": " + p.message);
    return to_java_byte_arrays(env, lines);
  });
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
// replaces the C++ hint of an existing tag's error.
void archive_save(JNIEnv* env, jclass, jbyteArray path, jbyteArray tag, jobjectArray names,
                  jlongArray tensors, jobjectArray updater_variables, jobjectArray updater_states,
                  jlongArray updater_tensors, jboolean replace, jint keep_last, jboolean durable,
                  jboolean compress, jboolean dedup, jint metadata_changed,
                  jobjectArray metadata_values, jbyteArray replace_hint) {
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
      for (std::size_t i = 0; i < state_handles.size(); ++i)
        contents.add_updater_state(variables[i], states[i], from_handle<Tensor>(state_handles[i]),
                                   param_options);
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
    native_method("archiveParams", "(J[B)[Lorg/modelzip/Param;", archive_params),
    native_method("archiveTensor", "(J[B[BZ)Lorg/modelzip/Tensor;", archive_tensor),
    native_method("archiveUpdaterStates", "(J[B)[Lorg/modelzip/Param;", archive_updater_states),
    native_method("archiveUpdaterState", "(J[B[B[BZ)Lorg/modelzip/Tensor;", archive_updater_state),
    native_method("archiveLoad", "(J[BZ)[Ljava/lang/Object;", archive_load),
    native_method("archiveVerify", "(J)[[B", archive_verify),
    native_method("archiveSave", "([B[B[[B[J[[B[[B[JZIZZZI[[B[B)V", archive_save),
    native_method("archiveMetadata", "(J)[[B", archive_metadata),
    native_method("archiveUpdateMetadata", "([BI[[B)[[B", archive_update_metadata),
    native_method("archiveRemoveTag", "([B[B)V", archive_remove_tag),
};

}  // namespace

bool register_archive_natives(JNIEnv* env, jclass native_class) {
  return register_natives(env, native_class, kMethods);
}

}  // namespace modelzip::jni
