// Drives remote::S3Multipart from the command line for the pytest suite
// (tests/remote/test_s3_multipart.py), against a real S3 test server.
//
//   s3_multipart_probe upload URL [--if-none-match | --if-match ETAG]
//                      [--abort-before-complete] PIECE...
//     PIECE: file:PATH:OFFSET:LENGTH (UploadPart of those bytes of a local
//     file) or copy:KEY:FIRST:LENGTH[:ETAG] (UploadPartCopy); parts are sent
//     from one thread each, then completed in order. Prints the upload id
//     and then the new ETag.
//   s3_multipart_probe create URL          prints the upload id
//   s3_multipart_probe abort URL ID
//   s3_multipart_probe list URL            one "KEY ID" line per upload
// Exit status 1 with the Error's text on stderr on failure.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "modelzip/error.hpp"
#include "remote/s3_multipart.hpp"

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
  std::cout << s3.complete(id, parts, condition) << std::endl;
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
