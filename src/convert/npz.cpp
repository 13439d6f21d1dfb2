// NumPy .npz reading and writing: a zip archive of .npy members, read
// through modelzip's zip layer (bounds-checked directory parser; stored
// members as zero-copy slices; deflated members inflated by libzip up to
// their declared, ratio-checked size, CRC checked) and written with
// zip::StreamZipWriter (stored members, data 64-byte aligned), which streams
// tensors of any size in bounded memory.
#include <ostream>
#include <set>

#include "convert/npy_format.hpp"
#include "convert/tensor_bytes.hpp"
#include "core/printable.hpp"
#include "io/durable_file.hpp"
#include "io/sink_buf.hpp"
#include "modelzip/convert.hpp"
#include "zip/zip_directory.hpp"
#include "zip/zip_reader.hpp"
#include "zip/zip_stream_writer.hpp"

namespace modelzip::convert {
namespace {

constexpr std::string_view kSuffix = ".npy";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::vector<NamedTensor> read_npz_bytes(const Bytes& data, const Limits& limits) {
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

}  // namespace

std::vector<NamedTensor> read_npz(const Bytes& data, const Limits& limits,
                                  std::string_view source) {
  return detail::read_from(source, [&] { return read_npz_bytes(data, limits); });
}

namespace {

// One .npz member to write: its name, the .npy header, and its element
// bytes either in memory or streamed.
struct Member {
  std::string name;
  std::string header;
  Bytes data;  // when not streamed
  const detail::StreamedTensor* streamed = nullptr;
};

std::string member_name(const std::string& tensor_name) {
  std::string member = tensor_name + std::string(kSuffix);
  if (auto why = zip::unsafe_name_reason(member); !why.empty())
    throw Error(ErrorCode::invalid_argument, "tensor name " +
                                                 modelzip::detail::quote_name(tensor_name) +
                                                 " is not a safe .npz member name: " + why);
  return member;
}

// Writes the members, stored (data 64-byte aligned), through a temporary
// file renamed over `path`: memory stays bounded for streamed members.
void write_members(const std::filesystem::path& path, const std::vector<Member>& members) {
  io::TempFile temp = io::TempFile::beside(path);
  io::remove_stale_temp_files(temp.target());  // of writers killed before their rename
  io::OutputFile out(temp);
  zip::StreamZipWriter writer(out.fd(), path.string(), 0);
  for (const auto& m : members) {
    const Bytes header = Bytes::copy_of(m.header);
    if (!m.streamed) {
      writer.add_stored(m.name, {header, m.data});
      continue;
    }
    writer.add_stored_streamed(m.name, header.size() + m.streamed->nbytes,
                               [&](const zip::StreamZipWriter::PieceSink& sink) {
                                 sink(header.span());
                                 io::SinkBuf buf(sink);  // 1 MiB pieces
                                 std::ostream os(&buf);
                                 try {
                                   m.streamed->write(os);
                                   os.flush();
                                 } catch (const Error&) {
                                   buf.rethrow_error();  // the sink's reason first
                                   throw;
                                 }
                                 buf.rethrow_error();
                                 if (!os)
                                   throw Error(ErrorCode::io, "cannot write the member",
                                               {.entry = m.name});
                               });
  }
  writer.finish();
  out.close();
  temp.commit(true);
}

}  // namespace

void write_npz(const std::filesystem::path& path, std::span<const NamedTensor> tensors) {
  detail::check_unique_names(tensors, ".npz");
  std::vector<Member> members;
  members.reserve(tensors.size());
  for (const auto& t : tensors) {
    std::string name = member_name(t.name);
    try {
      detail::NpyParts parts = detail::npy_parts(t.tensor);
      members.push_back({std::move(name), std::move(parts.header), std::move(parts.data)});
    } catch (const Error& e) {
      throw detail::name_error(e, t.name);
    }
  }
  write_members(path, members);
}

namespace detail {

void write_npz_streamed(const std::filesystem::path& path,
                        std::span<const StreamedTensor> tensors) {
  std::vector<Member> members;
  members.reserve(tensors.size());
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    if (!seen.insert(t.name).second)
      throw Error(ErrorCode::invalid_argument,
                  ".npz: duplicate tensor name " + modelzip::detail::quote_name(t.name));
    std::string name = member_name(t.name);
    if (t.layout != Layout::dense)
      unsupported_tensor(".npz", t.name, "sparse COO tensors have no .npy form");
    try {
      members.push_back({std::move(name), npy_header(npy_descr(t.dtype), t.shape), {}, &t});
    } catch (const Error& e) {
      throw name_error(e, t.name);
    }
  }
  write_members(path, members);
}

}  // namespace detail

}  // namespace modelzip::convert
