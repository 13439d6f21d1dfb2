#include <cstdio>
#include <iostream>

#include "cli/command.hpp"
#include "cli/terminal.hpp"
#include "modelzip/error.hpp"

namespace modelzip::cli {

extern const Command kTagsCommand, kLsCommand, kCatCommand, kImportCommand, kExportCommand,
    kRmTagCommand, kVerifyCommand, kDiffCommand, kExtractCommand, kGcCommand, kEmbedCommand,
    kSimilarCommand, kAnalogyCommand, kGraphCommand, kInfoCommand, kMetaCommand, kQuantizeCommand;

const std::vector<const Command*>& all_commands() {
  static const std::vector<const Command*> commands = {
      &kTagsCommand,    &kLsCommand,      &kInfoCommand,    &kMetaCommand,  &kGraphCommand,
      &kCatCommand,     &kImportCommand,  &kExportCommand,  &kRmTagCommand, &kQuantizeCommand,
      &kDiffCommand,    &kVerifyCommand,  &kExtractCommand, &kGcCommand,    &kEmbedCommand,
      &kSimilarCommand, &kAnalogyCommand,
  };
  return commands;
}

const std::string_view kTagline = "tagged machine-learning checkpoints in one zip archive";
const std::string_view kExitStatus =
    "0 on success; 1 on error, with one line on standard error that names the archive,\n"
    "entry and line or offset; 2 for wrong usage, with the command's usage; 130 or\n"
    "143 when SIGINT (Ctrl-C) or SIGTERM stopped the command (a change it was making\n"
    "is rolled back; extract keeps the files it finished). verify exits 1 when it\n"
    "finds a problem; diff exits 1 when the tags differ and 2 on errors, like diff(1).\n";
const std::string_view kDoubleDash =
    "Options may come anywhere; put -- before tags, words or names that start with -\n"
    "(e.g. modelzip similar model.zip words -- -Mozilla).\n";
const std::string_view kEnvironment =
    "Colour and progress bars are written only to a terminal. NO_COLOR, when set and\n"
    "not empty, turns colour off; so does TERM=dumb.\n"
    "\n"
    "The read-only commands (tags, ls, info, meta, graph, cat, export, diff, verify,\n"
    "extract, embed, similar, analogy) accept an http://, https:// or s3://BUCKET/KEY\n"
    "URL as ARCHIVE and fetch only the byte ranges they need. Fetched bytes are cached in\n"
    "MODELZIP_CACHE_DIR (default $XDG_CACHE_HOME/modelzip or ~/.cache/modelzip), at most\n"
    "MODELZIP_CACHE_LIMIT bytes (e.g. 10G, the default); MODELZIP_NO_CACHE=1 keeps them\n"
    "in memory only. MODELZIP_CA_FILE names trusted CA certificates (PEM) for https;\n"
    "MODELZIP_CONNECT_TIMEOUT and MODELZIP_LOW_SPEED_TIME (seconds, default 10 and 30)\n"
    "bound waiting for a connection and for a transfer slower than 1 KiB/s;\n"
    "MODELZIP_REQUEST_TIMEOUT (seconds, default 600) bounds one request, per 8 MiB it\n"
    "moves (reads are cut into requests of 8 MiB), and is not retried. S3 reads\n"
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION and\n"
    "AWS_ENDPOINT_URL (S3-compatible stores, path-style). import, rm-tag, gc, meta and\n"
    "quantize also write s3:// archives (one object, by multipart upload; unchanged\n"
    "bytes are copied server-side; MODELZIP_S3_PART_SIZE, default 8M, and\n"
    "MODELZIP_S3_PARTS_IN_FLIGHT, default 4, 1 to 64); a writer aborts\n"
    "its key's incomplete uploads older than MODELZIP_S3_STALE_UPLOAD_AGE seconds\n"
    "(default 86400).\n";

std::size_t report_damage(const Archive& archive) {
  std::size_t n = 0;
  for (const auto& tag : archive.tags())
    if (auto damage = archive.tag_damage(tag)) {
      ++n;
      std::cerr << "modelzip: tag " << quoted_name(tag)
                << " is damaged: " << printable_message(damage->what())
                << " (the other tags are readable; modelzip rm-tag removes this one)\n";
    }
  return n;
}

void require_tensor(const Archive& archive, const std::string& name, const std::string& tag) {
  if (archive.param(name, tag).kind != BlobKind::embedding) return;
  throw Error(ErrorCode::invalid_argument,
              "parameter " + quoted_name(name) +
                  " is an embedding, not a tensor: write it with modelzip export ARCHIVE " + name +
                  " OUT.fifu (or .vec, .txt, .bin), or query it with modelzip embed, " +
                  "similar or analogy",
              ErrorContext{.archive = archive.name(), .tag = tag});
}

std::string human_bytes(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace modelzip::cli
