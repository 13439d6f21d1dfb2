// Drives remote::S3Multipart from the command line for the pytest suite
// (tests/remote/test_s3_multipart.py), against a real S3 test server.
//
//   s3_multipart_probe upload URL [--if-none-match | --if-match ETAG]
//                      [--abort-before-complete] PIECE...
//     PIECE: file:PATH:OFFSET:LENGTH (UploadPart of those bytes of a local
//     file) or copy:KEY:FIRST:LENGTH[:ETAG] (UploadPartCopy); parts are sent
//     from one thread each, then completed in order. Prints the upload id
//     and then the new ETag.
//   s3_multipart_probe sink URL [--part-size N] [--parallel N] [--old KEY]
//                      [--if-none-match | --if-match ETAG] [--no-commit] OP...
//     Drives an S3UploadSink (the old object KEY opened as readers do, its
//     pinned ETag used for copies); OP: write:OFFSET:PATH:FROM:LENGTH (bytes
//     of a local file), keep:OFFSET:FROM:LENGTH, reserve:OFFSET:LENGTH,
//     end:SIZE. Prints "uploaded U copied C etag E" (without --no-commit,
//     which destroys the sink after finish()).
//   s3_multipart_probe zip URL LOCAL [--part-size N] [--parallel N]
//                      ENTRIES BYTES
//     Writes an archive of ENTRIES stored entries of BYTES pseudo-random
//     bytes each through zip::StreamZipWriter, once into an S3UploadSink
//     (committed) and once into the local file LOCAL. Prints "peak P
//     uploaded U": the sink's peak_buffered_bytes() and bytes uploaded.
//   s3_multipart_probe create URL          prints the upload id
//   s3_multipart_probe abort URL ID
//   s3_multipart_probe list URL            one "KEY ID" line per upload
// Exit status 1 with the Error's text on stderr on failure.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "modelzip/error.hpp"
#include "remote/remote_source.hpp"
#include "remote/s3_multipart.hpp"
#include "remote/s3_upload_sink.hpp"
#include "zip/zip_stream_writer.hpp"

using modelzip::remote::S3Condition;
using modelzip::remote::S3Multipart;
using modelzip::remote::S3Part;

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t a = 0;
  for (std::size_t b; (b = s.find(sep, a)) != std::string::npos; a = b + 1)
    out.push_back(s.substr(a, b - a));
  out.push_back(s.substr(a));
  return out;
}

std::vector<std::byte> read_range(const std::string& path, std::uint64_t offset,
                                  std::uint64_t length) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<std::byte> bytes(length);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(length));
  if (static_cast<std::uint64_t>(in.gcount()) != length) {
    std::cerr << "cannot read " << length << " bytes at " << offset << " of " << path << "\n";
    std::exit(2);
  }
  return bytes;
}

int upload(const S3Multipart& s3, const std::vector<std::string>& args) {
  S3Condition condition;
  bool abort_first = false;
  std::vector<std::string> pieces;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--if-none-match")
      condition.if_none_match = true;
    else if (args[i] == "--if-match" && i + 1 < args.size())
      condition.if_match = args[++i];
    else if (args[i] == "--abort-before-complete")
      abort_first = true;
    else
      pieces.push_back(args[i]);
  }
  const std::string id = s3.create();
  std::cout << id << std::endl;
  std::vector<S3Part> parts(pieces.size());
  std::vector<std::exception_ptr> errors(pieces.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < pieces.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        auto f = split(pieces[i], ':');
        const int number = static_cast<int>(i + 1);
        if (f.at(0) == "file") {
          auto bytes = read_range(f.at(1), std::stoull(f.at(2)), std::stoull(f.at(3)));
          parts[i] = s3.upload_part(id, number, bytes);
        } else {
          parts[i] = s3.upload_part_copy(id, number, f.at(1), std::stoull(f.at(2)),
                                         std::stoull(f.at(3)), f.size() > 4 ? f[4] : "");
        }
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) {
      try {
        s3.abort(id);
      } catch (const modelzip::Error&) {
      }
      std::rethrow_exception(e);
    }
  if (abort_first) {
    s3.abort(id);
    return 0;
  }
  std::uint64_t size = 0;  // of the object: the pieces' lengths
  for (const auto& piece : pieces) size += std::stoull(split(piece, ':').at(3));
  std::cout << s3.complete(id, parts, condition, size) << std::endl;
  return 0;
}

// Takes "--part-size N" or "--parallel N" at args[i] into `options`
// (moving i past N); false for any other argument.
bool part_option(const std::vector<std::string>& args, std::size_t& i,
                 modelzip::remote::S3UploadOptions& options) {
  if (i + 1 >= args.size()) return false;
  if (args[i] == "--part-size")
    options.part_size = std::stoull(args[++i]);
  else if (args[i] == "--parallel")
    options.parallel = std::stoi(args[++i]);
  else
    return false;
  return true;
}

int sink(const std::string& url, const std::vector<std::string>& args) {
  namespace remote = modelzip::remote;
  remote::S3UploadOptions options;
  std::string old_key;
  bool commit = true;
  std::vector<std::string> ops;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (part_option(args, i, options)) continue;
    if (args[i] == "--old" && i + 1 < args.size())
      old_key = args[++i];
    else if (args[i] == "--if-none-match")
      options.condition.if_none_match = true;
    else if (args[i] == "--if-match" && i + 1 < args.size())
      options.condition.if_match = args[++i];
    else if (args[i] == "--no-commit")
      commit = false;
    else
      ops.push_back(args[i]);
  }
  auto client = std::make_shared<remote::S3Multipart>(url, modelzip::RemoteOptions{});
  if (!old_key.empty()) {
    auto old = remote::open("s3://" + client->endpoint().bucket + "/" + old_key, {});
    options.old_key = old_key;
    options.old_etag = old.etag;
    options.old_file = old.file;
    options.old_source = old.source;
  }
  const std::uint64_t options_part_size = options.part_size;
  remote::S3UploadSink out(client, std::move(options));
  for (const auto& op : ops) {
    auto f = split(op, ':');
    if (f.at(0) == "write") {
      auto bytes = read_range(f.at(2), std::stoull(f.at(3)), std::stoull(f.at(4)));
      out.write(std::stoull(f.at(1)), modelzip::Bytes::take(std::move(bytes)));
    } else if (f.at(0) == "keep") {
      out.keep(std::stoull(f.at(1)), {std::stoull(f.at(2)), std::stoull(f.at(3))});
    } else if (f.at(0) == "reserve") {
      out.reserve({std::stoull(f.at(1)), std::stoull(f.at(2))});
    } else if (f.at(0) == "end") {
      out.set_end(std::stoull(f.at(1)));
    } else if (f.at(0) == "skip") {  // skip:OFFSET:LENGTH:NEXT_NUMBER
      out.skip({std::stoull(f.at(1)), std::stoull(f.at(2))}, std::stoi(f.at(3)));
    } else if (f.at(0) == "join") {
      // join:OFFSET:LENGTH:FIRST_NUMBER:FILE:FROM: a second sink joins the
      // upload and uploads bytes [FROM, FROM + LENGTH) of FILE at OFFSET as
      // the parts numbered from FIRST_NUMBER on; its parts go to this one.
      const std::uint64_t at = std::stoull(f.at(1)), length = std::stoull(f.at(2));
      remote::S3UploadOptions joined;
      joined.part_size = options_part_size;
      joined.join_upload = out.upload_id();
      remote::S3UploadSink other(client, std::move(joined));
      other.skip({0, at}, std::stoi(f.at(3)));
      other.set_end(at + length);
      other.write(at, modelzip::Bytes::take(read_range(f.at(4), std::stoull(f.at(5)), length)));
      other.finish();
      out.add_parts(other.parts());
    } else {
      std::cerr << "unknown op " << op << "\n";
      return 2;
    }
  }
  out.finish();
  if (commit) out.commit();
  std::cout << "uploaded " << out.uploaded_bytes() << " copied " << out.copied_bytes() << " etag "
            << out.etag() << std::endl;
  return 0;
}

// The stored entries "t0", "t1", ... of `bytes` pseudo-random bytes each.
void write_entries(modelzip::zip::StreamZipWriter& zw, int entries, std::size_t bytes) {
  for (int i = 0; i < entries; ++i) {
    std::vector<std::byte> data(bytes);
    std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1);
    for (auto& b : data) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      b = static_cast<std::byte>(x);
    }
    zw.add_stored("t" + std::to_string(i), {modelzip::Bytes::take(std::move(data))});
  }
}

int zip_both(const std::string& url, const std::vector<std::string>& args) {
  namespace remote = modelzip::remote;
  remote::S3UploadOptions options;
  options.condition.if_none_match = true;
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!part_option(args, i, options)) rest.push_back(args[i]);
  }
  if (rest.size() != 3) {
    std::cerr << "usage: s3_multipart_probe zip URL LOCAL [options] ENTRIES BYTES\n";
    return 2;
  }
  const int entries = std::stoi(rest[1]);
  const std::size_t bytes = std::stoull(rest[2]);
  auto client = std::make_shared<remote::S3Multipart>(url, modelzip::RemoteOptions{});
  remote::S3UploadSink out(client, std::move(options));
  {
    modelzip::zip::StreamZipWriter zw(out, url, 0);
    write_entries(zw, entries, bytes);
    zw.finish();
  }
  out.commit();
  const int fd = ::open(rest[0].c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    std::cerr << "cannot create " << rest[0] << "\n";
    return 2;
  }
  {
    modelzip::zip::StreamZipWriter zw(fd, rest[0], 0);
    write_entries(zw, entries, bytes);
    zw.finish();
  }
  ::close(fd);
  std::cout << "peak " << out.peak_buffered_bytes() << " uploaded " << out.uploaded_bytes()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2) {
    std::cerr << "usage: s3_multipart_probe upload|create|abort|list URL ...\n";
    return 2;
  }
  try {
    S3Multipart s3(args[1], {});
    std::vector<std::string> rest(args.begin() + 2, args.end());
    if (args[0] == "upload") return upload(s3, rest);
    if (args[0] == "sink") return sink(args[1], rest);
    if (args[0] == "zip") return zip_both(args[1], rest);
    if (args[0] == "create") {
      std::cout << s3.create() << std::endl;
      return 0;
    }
    if (args[0] == "abort" && rest.size() == 1) {
      s3.abort(rest[0]);
      return 0;
    }
    if (args[0] == "list") {
      for (const auto& u : s3.list_uploads()) std::cout << u.key << " " << u.upload_id << "\n";
      return 0;
    }
    std::cerr << "unknown command\n";
    return 2;
  } catch (const modelzip::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
