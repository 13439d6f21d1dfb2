// NumPy .npz reading and writing: a zip archive of .npy members, read
// through modelzip's zip layer (bounds-checked directory parser; stored
// members as zero-copy slices; deflated members inflated by libzip up to
// their declared, ratio-checked size, CRC checked) and written with
// ZipWriter (stored members, data 64-byte aligned).
#include <fstream>

#include "convert/tensor_bytes.hpp"
#include "convert/npy_format.hpp"
#include "io/durable_file.hpp"
#include "modelzip/convert.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"
#include "zip/zip_writer.hpp"

namespace modelzip::convert {
namespace {

constexpr std::string_view kSuffix = ".npy";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// An archive with no entries (what Python's zipfile writes for np.savez()
// without arrays): the 22-byte end-of-central-directory record alone.
constexpr unsigned char kEmptyZip[22] = {0x50, 0x4b, 0x05, 0x06};

}  // namespace

std::vector<NamedTensor> read_npz(const Bytes& data, const Limits& limits) {
  const zip::Directory dir = zip::parse_directory(data.span(), limits);
  const zip::EntryReader reader(data, limits);
  std::vector<NamedTensor> out;
  out.reserve(dir.entries.size());
  for (const auto& entry : dir.entries) {
    if (!entry.name.empty() && entry.name.back() == '/') continue;  // a folder
    try {
      if (!ends_with(entry.name, kSuffix))
        throw Error(ErrorCode::unsupported, ".npz member is not a .npy file");
      Bytes member = reader.read(entry, /*check_crc=*/true);
      out.push_back({entry.name.substr(0, entry.name.size() - kSuffix.size()),
                     detail::parse_npy(member, limits)});
    } catch (const Error& e) {
      throw e.with_context({.entry = entry.name});
    }
  }
  return out;
}

void write_npz(const std::filesystem::path& path, std::span<const NamedTensor> tensors) {
  detail::check_unique_names(tensors, ".npz");
  std::vector<std::pair<std::string, detail::NpyParts>> members;
  members.reserve(tensors.size());
  for (const auto& t : tensors) {
    std::string member = t.name + std::string(kSuffix);
    if (auto why = zip::unsafe_name_reason(member); !why.empty())
      throw Error(ErrorCode::invalid_argument,
                  ".npz: tensor name '" + t.name + "' is not a safe member name: " + why);
    try {
      members.emplace_back(std::move(member), detail::npy_parts(t.tensor));
    } catch (const Error& e) {
      throw detail::name_error(e, t.name);
    }
  }
  io::TempFile temp = io::TempFile::beside(path);
  try {
    if (members.empty()) {
      std::ofstream out(temp.path(), std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(kEmptyZip), sizeof kEmptyZip);
      out.close();
      if (!out) throw Error(ErrorCode::io, "cannot write the file");
    } else {
      zip::ZipWriter writer(temp.path());
      for (auto& [member, parts] : members)
        writer.add_stored(member, {Bytes::copy_of(parts.header), parts.data});
      writer.close([](std::uint64_t, std::uint64_t) { return true; });
    }
    temp.commit(true);
  } catch (const Error& e) {
    throw Error(e.code(), e.message(), ErrorContext{.archive = path.string()});
  }
}

}  // namespace modelzip::convert
