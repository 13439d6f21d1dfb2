// CollectiveWriter: the collective commit (FORMAT.md §8.4). Phases, each
// closed by Communicator::agree so that a failure anywhere is the same
// Error everywhere:
//   1. root: lock, recover, open the archive (CommitTarget); tag checks
//   2. all:  dedup comparisons against the newest tag; records -> root (in
//            rounds of bounded messages: dist::gather_in_rounds)
//   3. all:  texts the root lists compared byte for byte (sent in rounds by
//            the rank that writes each); verdicts -> root
//      root: validate the records, lay out the entries, journal; plan -> all
//   4. all:  blob headers and data into each rank's io::ByteSink onto the
//            file (dist/rank_share.hpp); CRCs per piece -> root
//   5. root: combine the CRCs, write the local headers with them
//            (zip::finish_entry), tags.txt, directory, end records (the
//            commit point); with a rotation, the removed entries' bytes
//            become free entries (on s3://, their headers are in the upload)
//   6. (a rotation that left the archive mostly free) all: let go of the
//            locks; root: rewrite the archive (a single-writer commit; on
//            s3://, a second upload of server-side copies)
// The phases are CommitRun's methods; the plan (dist/commit_plan.hpp), the
// dedup comparisons (dist/dedup.hpp), a rank's writes (dist/rank_share.hpp)
// and the messages (dist/commit_messages.hpp) have files of their own.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

#include "checkpoint/archive_state.hpp"
#include "checkpoint/new_tag_contents.hpp"
#include "core/crc32.hpp"
#include "core/error_wire.hpp"
#include "core/shape_text.hpp"
#include "dist/blocks.hpp"
#include "dist/commit_messages.hpp"
#include "dist/commit_plan.hpp"
#include "dist/commit_target.hpp"
#include "dist/dedup.hpp"
#include "dist/detached_commit.hpp"
#include "dist/rank_locks.hpp"
#include "dist/rank_share.hpp"
#include "dist/s3_commit.hpp"
#include "format/tag_name.hpp"
#include "format/tensor_blob.hpp"
#include "io/append_journal.hpp"
#include "io/durable_file.hpp"
#include "io/file_sink.hpp"
#include "io/shared_file_writer.hpp"
#include "modelzip/dist/distributed.hpp"
#include "modelzip/error.hpp"
#include "modelzip/metadata.hpp"
#include "modelzip/writer.hpp"
#include "remote/remote_source.hpp"
#include "remote/s3_multipart.hpp"
#include "zip/archive_layout.hpp"
#include "zip/entry_writer.hpp"

namespace modelzip {

using dist::decode_plan;
using dist::decode_records;
using dist::encode_plan;
using dist::encode_records;
using dist::Item;
using dist::Kind;
using dist::label_of;
using dist::Plan;
using dist::Record;
using dist::WireIn;
using dist::WireOut;
using format::TableKind;

class CollectiveWriter::Impl {
 public:
  std::filesystem::path path;
  Communicator* comm = nullptr;
  CollectiveOptions options;
  std::vector<Item> items;
  NewTag entries;  // set_entry(): its name rules, in staging order
  // Thrown by the commit's first agreed step (dist/detached_commit.hpp).
  std::exception_ptr fail_first_step;

  ErrorContext context(const std::string& tag = {}) const {
    return ErrorContext{.archive = path.string(), .tag = tag};
  }
  void check_new(const std::string& name, TableKind table = TableKind::params,
                 const std::string& state = {}) const {
    if (name.empty()) throw Error(ErrorCode::invalid_argument, "empty parameter name", context());
    if (table == TableKind::updater && state.empty())
      throw Error(ErrorCode::invalid_argument, "empty updater state name", context());
    for (const auto& i : items)
      if (i.name == name && i.table == table && i.state == state)
        throw Error(ErrorCode::invalid_argument,
                    label_of(table, name, state) + " is staged twice on rank " +
                        std::to_string(comm->rank()),
                    context());
  }
  void check_tensor(const std::string& label, const Tensor& t) const {
    if (t.layout() != Layout::dense || dtype_size(t.dtype()) == 0)
      throw Error(ErrorCode::unsupported,
                  label + ": distributed saves take dense tensors of fixed-size types, or text",
                  context());
  }
  void stage(Item item, std::optional<std::pair<Shape, Block>> placed);
};

namespace {

// ---- agreement --------------------------------------------------------------

// The communicator's operations, with its failures explained: from the write
// phase on, every rank holds its alive lock (dist/rank_locks.hpp), so when
// an operation fails (gloo's "Connection closed by peer", an MPI error or
// time-out, an mpi4py exception) and some rank's alive lock is gone, the
// failure becomes Error(io) "collective commit failed: rank R was lost
// ...", naming the ranks whose process ended. Otherwise a modelzip::Error
// of the engine (MpiCommunicator's time-out) gets the commit's context
// (archive, tag) and any other exception (a Python one) passes unchanged.
class Engine {
 public:
  Engine(Communicator& comm, const ErrorContext& ctx) : comm_(comm), ctx_(ctx) {}
  Communicator& comm() { return comm_; }
  // From now on, failures are checked against these locks (null: no more).
  void watch(const dist::RankLocks* locks) { locks_ = locks; }

  template <class F>
  auto operator()(F&& op) -> decltype(op()) {
    try {
      return op();
    } catch (const Error& e) {
      throw_if_lost(e);
      throw e.with_context(ctx_);
    } catch (const std::exception& e) {
      throw_if_lost(e);
      throw;
    }
  }

 private:
  // Throws "rank R was lost" when some rank's alive lock is gone.
  void throw_if_lost(const std::exception& e) {
    if (locks_ == nullptr) return;
    // A process that dies closes its descriptors one by one: its peers
    // may see its connections closed before its lock on the archive goes.
    std::vector<int> lost = locks_->lost(comm_.size());
    for (int i = 0; lost.empty() && i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      lost = locks_->lost(comm_.size());
    }
    if (lost.empty()) return;
    std::string what = e.what();  // its first line (Python adds a traceback)
    what = what.substr(0, what.find('\n'));
    // The other survivors see the same failure at about the same time and
    // look at the alive locks too: this rank keeps its own a moment
    // longer, so that they do not take it for lost.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    throw Error(ErrorCode::io,
                "collective commit failed: " + dist::ranks_text(lost) +
                    (lost.size() == 1 ? " was" : " were") +
                    " lost (the process ended during the commit; noticed by rank " +
                    std::to_string(comm_.rank()) + ", whose communication engine said: " + what +
                    ")",
                ctx_);
  }

  Communicator& comm_;
  ErrorContext ctx_;
  const dist::RankLocks* locks_ = nullptr;
};

// The root's entries and the ranks' are listed in the directory as a
// single writer lists them: in file order (the root writes text blobs among
// the ranks' blobs).
void in_file_order(std::vector<zip::EntryInfo>& entries) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const zip::EntryInfo& a, const zip::EntryInfo& b) {
                     return a.local_header_offset < b.local_header_offset;
                   });
}

// Runs `step` on this rank, then agrees with every rank: if any failed, all
// throw the lowest failing rank's error (its code, errno value and context
// kept: core/error_wire.hpp) naming that rank.
template <class F>
void agreed_step(Engine& engine, const ErrorContext& ctx, F&& step) {
  std::string error;
  try {
    step();
  } catch (const Error& e) {
    error = detail::encode_error(e);
  } catch (const std::exception& e) {
    error = detail::encode_error(Error(ErrorCode::io, e.what()));
  }
  if (auto failure = engine([&] { return engine.comm().agree(error); })) {
    const Error e = detail::decode_error(failure->message);
    throw e
        .reworded("collective commit failed on rank " + std::to_string(failure->rank) + ": " +
                      e.message(),
                  e.context())
        .with_context(ctx);
  }
}

}  // namespace

CollectiveWriter::CollectiveWriter(std::filesystem::path path, Communicator& comm,
                                   CollectiveOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!remote::can_upload(path.native())) remote::refuse_write(path.native());
  impl_->path = std::move(path);
  impl_->comm = &comm;
  impl_->options = options;
  if (options.root < 0 || options.root >= comm.size())
    throw Error(ErrorCode::invalid_argument,
                "root rank " + std::to_string(options.root) + " is not in the communicator of " +
                    std::to_string(comm.size()) + " ranks",
                impl_->context());
}
CollectiveWriter::~CollectiveWriter() = default;
CollectiveWriter::CollectiveWriter(CollectiveWriter&&) noexcept = default;
CollectiveWriter& CollectiveWriter::operator=(CollectiveWriter&&) noexcept = default;

// Checks and stages `item` (its name, table, state and tensor set): whole,
// or as the block `placed` (global shape, block) places.
void CollectiveWriter::Impl::stage(Item item, std::optional<std::pair<Shape, Block>> placed) {
  check_new(item.name, item.table, item.state);
  const std::string label = label_of(item.table, item.name, item.state);
  if (item.tensor.dtype() == DType::utf8 && item.tensor.layout() == Layout::dense) {
    if (placed)
      throw Error(ErrorCode::unsupported,
                  label + ": text is staged whole (add, add_updater_state), not in blocks",
                  context());
    item.kind = Kind::text;
    item.global = item.tensor.shape();
    item.block = Block{std::vector<std::int64_t>(item.global.size(), 0), item.global};
    const format::EncodedBlob blob = format::encode_tensor_blob(item.tensor);
    item.text.reserve(static_cast<std::size_t>(blob.size));
    for (const Bytes& piece : blob.pieces) item.text += piece.as_string_view();
    item.text_crc = detail::crc32_of(std::as_bytes(std::span(item.text)));
    item.tensor = Tensor();
    items.push_back(std::move(item));
    return;
  }
  check_tensor(label, item.tensor);
  if (!placed) {
    item.kind = Kind::whole;
    item.global = item.tensor.shape();
    item.block = Block{std::vector<std::int64_t>(item.global.size(), 0), item.global};
  } else {
    item.kind = Kind::shard;
    item.global = std::move(placed->first);
    item.block = std::move(placed->second);
    if (item.block.shape != item.tensor.shape())
      throw Error(ErrorCode::invalid_argument,
                  label + ": the data has shape " + detail::shape_text(item.tensor.shape()) +
                      ", the block " + detail::shape_text(item.block.shape),
                  context());
    try {
      dist::check_block(item.global, item.block, label);
    } catch (const Error& e) {
      throw e.with_context(context());
    }
  }
  items.push_back(std::move(item));
}

void CollectiveWriter::add(std::string name, Tensor tensor) {
  impl_->stage(Item{std::move(name), Kind::whole, std::move(tensor)}, std::nullopt);
}

void CollectiveWriter::add_shard(std::string name, Tensor data, Shape global_shape, Block block) {
  impl_->stage(Item{std::move(name), Kind::shard, std::move(data)},
               std::pair{std::move(global_shape), std::move(block)});
}

void CollectiveWriter::add_updater_state(std::string variable, std::string state, Tensor tensor) {
  Item item{std::move(variable), Kind::whole, std::move(tensor)};
  item.table = TableKind::updater;
  item.state = std::move(state);
  impl_->stage(std::move(item), std::nullopt);
}

void CollectiveWriter::add_updater_shard(std::string variable, std::string state, Tensor data,
                                         Shape global_shape, Block block) {
  Item item{std::move(variable), Kind::shard, std::move(data)};
  item.table = TableKind::updater;
  item.state = std::move(state);
  impl_->stage(std::move(item), std::pair{std::move(global_shape), std::move(block)});
}

void CollectiveWriter::set_entry(std::string relative_name, Bytes contents) {
  try {
    impl_->entries.set_entry(std::move(relative_name), std::move(contents));
  } catch (const Error& e) {
    throw e.with_context(impl_->context());
  }
}

void CollectiveWriter::share(std::string name, std::string from_tag, std::string from_param) {
  impl_->check_new(name);
  Item item{std::move(name), Kind::shared};
  item.from_tag = std::move(from_tag);
  item.from_param = std::move(from_param);
  impl_->items.push_back(std::move(item));
}

namespace {

// One run of CollectiveWriter::commit: its phases, in order.
class CommitRun {
 public:
  CommitRun(CollectiveWriter::Impl& m, const std::string& tag,
            const CollectiveCommitOptions& rotate)
      : m_(m),
        comm_(*m.comm),
        tag_(tag),
        rotate_(rotate),
        root_(m.options.root),
        is_root_(comm_.rank() == root_),
        ctx_(m.context(tag)),
        engine_(comm_, ctx_) {}

  CollectiveStats run() {
    lock();
    const std::vector<std::string> records = gather_records();
    const std::vector<std::string> verdicts = check_texts(records);
    const Plan plan = make_plan(verdicts);
    const std::vector<std::string> shares = write_shares(plan);
    const std::string stats = finish(plan, shares);
    committed_ = true;
    out_.reset();
    target_.reset();  // unlocks
    s3_target_.reset();
    CollectiveStats result = final_stats(engine_([&] { return comm_.broadcast(stats, root_); }));
    if (compact_) compact();
    return result;
  }

  // Whether the failure `e` of run() is an S3 commit's refusal because
  // another writer's commit came first, before this one took effect, so
  // that planning it again against the object as it is now is safe
  // (remote::refused_for_another_writer). The same on every rank: such a
  // refusal is a step's agreed error, and every step before the commit
  // point is agreed.
  bool may_plan_again(const Error& e) const {
    return s3_ && !committed_ && remote::refused_for_another_writer(e);
  }

  // The root tells its caller that the commit refused with `e` is planned
  // again, for the `replans`-th time.
  void tell_planned_again(const Error& e, int replans) const {
    if (!is_root_ || !m_.options.on_notice) return;
    m_.options.on_notice(remote::planned_again_notice(e, replans));
  }

 private:
  // 1. The root locks the archive and checks the tag; every rank learns
  // whether the archive exists.
  void lock() {
    agreed_step(engine_, ctx_, [&] {
      if (m_.fail_first_step) std::rethrow_exception(m_.fail_first_step);
      format::check_tag(tag_);
      if (rotate_.keep_last) format::check_keep_last(*rotate_.keep_last, ctx_);
      if (!is_root_) return;
      if (s3_)
        s3_target_ = std::make_unique<dist::S3CommitTarget>(m_.path.string());
      else
        target_ = std::make_unique<dist::CommitTarget>(
            m_.path, m_.options.durable, m_.options.on_notice,
            dist::writers_timeout(m_.options.rank_lock_timeout));
      if (old() && !rotate_.replace)
        if (auto existing = old()->find_tag(tag_))
          throw Error(ErrorCode::already_exists,
                      "tag '" + *existing + "' exists already (tags ignore case); " +
                          std::string(format::kCollectiveReplaceHint),
                      ctx_);
    });
    // Whether the archive exists, and the root's rotation (checked against
    // every rank's in the next step).
    std::string root_says;
    if (is_root_) {
      WireOut w;
      w.u64(old() ? 1 : 0);
      w.u64(rotate_.replace ? 1 : 0);
      w.u64(rotate_.keep_last ? *rotate_.keep_last : 0);
      w.str(tag_);
      root_says = std::move(w.s);
    }
    root_says = engine_([&] { return comm_.broadcast(root_says, root_); });
    WireIn in(root_says, root_);
    exists_ = in.u64() != 0;
    root_replace_ = in.u64() != 0;
    root_keep_last_ = in.u64();
    root_tag_ = in.str();
  }

  // Every rank must commit the tag the root commits (the root's would be
  // written, the other ranks' errors and stats would name theirs), with the
  // rotation the root plans.
  void check_same_request() const {
    if (tag_ != root_tag_)
      throw Error(ErrorCode::invalid_argument,
                  "rank " + std::to_string(comm_.rank()) + " commits tag '" + tag_ +
                      "', the root rank " + std::to_string(root_) + " tag '" + root_tag_ +
                      "' (every rank passes the same)",
                  ctx_);
    const std::uint64_t keep_last = rotate_.keep_last ? *rotate_.keep_last : 0;
    auto text = [](bool replace, std::uint64_t keep) {
      return std::string("replace=") + (replace ? "true" : "false") +
             ", keep_last=" + (keep == 0 ? std::string("none") : std::to_string(keep));
    };
    if (rotate_.replace != root_replace_ || keep_last != root_keep_last_)
      throw Error(ErrorCode::invalid_argument,
                  "rank " + std::to_string(comm_.rank()) + " commits with " +
                      text(rotate_.replace, keep_last) + ", the root rank " +
                      std::to_string(root_) + " with " + text(root_replace_, root_keep_last_) +
                      " (every rank passes the same)",
                  ctx_);
  }

  // 2. Records (with dedup verdicts) to the root. From here on every rank
  // holds its alive lock on the archive (on a new archive's temporary file
  // from step 4), so that a failure of the engine can name a rank that died.
  std::vector<std::string> gather_records() {
    std::string records;
    agreed_step(engine_, ctx_, [&] {
      check_same_request();
      if (exists_ && !s3_) {
        locks_.emplace(m_.path, comm_.rank());
        engine_.watch(&*locks_);
      }
      std::optional<Archive> old;
      if (exists_ && m_.options.dedup && !m_.items.empty()) {
        if (is_root_)
          old = *this->old();
        else
          old = Archive::open(m_.path);
      }
      try {
        records = encode_records(
            dist::records_with_dedup(m_.items, m_.entries, comm_.rank(), old ? &*old : nullptr));
      } catch (const Error& e) {
        // Dedup read old blobs from the server and an interrupt stopped the
        // read: say what became of the save, as the single writer does.
        if (e.code() != ErrorCode::cancelled || !s3_) throw;
        throw remote::save_cancelled(e, remote::kComparingOldBlobs, "the archive is unchanged");
      }
    });
    // In rounds: set_entry's contents are in them, of any size.
    return engine_([&] { return dist::gather_in_rounds(comm_, records, root_); });
  }

  // 2b. Texts that the ranks compare byte for byte (dist::text_checks):
  // the root lists them; each goes from the rank that writes it to every
  // rank in rounds, and the ranks that staged a text it is compared with
  // compare theirs with it. Returns every rank's verdicts at the root: a
  // byte per claim of that rank, in order ('1': equal).
  std::vector<std::string> check_texts(const std::vector<std::string>& gathered) {
    std::string checks_bytes;
    agreed_step(engine_, ctx_, [&] {
      if (!is_root_) return;
      for (std::size_t r = 0; r < gathered.size(); ++r)
        all_.push_back(decode_records(gathered[r], static_cast<int>(r)));
      checks_ =
          dist::text_checks(all_, m_.options.dedup, root_, dist::message_chunk_bytes(comm_.size()));
      checks_bytes = dist::encode_text_checks(checks_);
    });
    const dist::TextChecks checks = dist::decode_text_checks(
        engine_([&] { return comm_.broadcast(checks_bytes, root_); }), root_);
    if (checks.checks.empty()) return {};
    // This rank's texts by key (the first of a key, as staged).
    std::unordered_map<std::string, const Item*> texts;
    for (const Item& item : m_.items)
      if (item.kind == Kind::text)
        texts.try_emplace(dist::key_of(item.table, item.name, item.state), &item);
    auto text_of = [&](const std::string& key) -> const Item* {
      const auto it = texts.find(key);
      return it == texts.end() ? nullptr : it->second;
    };
    std::string verdicts;
    for (const dist::TextCheck& check : checks.checks) {
      // This rank's claims: its texts, each still equal to the bytes so far.
      std::vector<std::pair<const Item*, bool>> mine;
      bool remote = false;
      for (const dist::TextCheck::Claim& claim : check.claims) {
        remote = remote || claim.rank != check.source;
        if (claim.rank != comm_.rank()) continue;
        const Item* item = text_of(claim.key);
        mine.emplace_back(item, item && item->text.size() == check.size);
      }
      const bool is_source = comm_.rank() == check.source;
      std::string missing;  // a source without the text (a malformed plan) sends zeros
      const Item* source = is_source ? text_of(check.key) : nullptr;
      if (is_source && (!source || source->text.size() != check.size))
        missing.assign(static_cast<std::size_t>(check.size), '\0');
      const std::string_view bytes = !is_source        ? std::string_view()
                                     : missing.empty() ? std::string_view(source->text)
                                                       : std::string_view(missing);
      if (!remote) {  // every claim is the source's own
        for (auto& [item, equal] : mine) equal = equal && item->text == bytes;
      } else {
        std::uint64_t at = 0;
        engine_([&] {
          dist::broadcast_in_rounds(
              comm_, bytes, check.size, check.source, checks.chunk, [&](std::string_view piece) {
                for (auto& [item, equal] : mine)
                  equal =
                      equal && std::string_view(item->text)
                                       .substr(static_cast<std::size_t>(at), piece.size()) == piece;
                at += piece.size();
              });
        });
      }
      for (const auto& [item, equal] : mine) verdicts += equal ? '1' : '0';
    }
    return engine_([&] { return comm_.gather(verdicts, root_); });
  }

  // The ranks' verdicts (check_texts) into checks_ (root).
  void take_verdicts(const std::vector<std::string>& verdicts) {
    std::vector<std::size_t> next(verdicts.size(), 0);
    for (dist::TextCheck& check : checks_.checks)
      for (dist::TextCheck::Claim& claim : check.claims) {
        const auto r = static_cast<std::size_t>(claim.rank);
        if (r >= verdicts.size() || next[r] >= verdicts[r].size())
          throw Error(ErrorCode::corrupt,
                      "malformed collective message from rank " + std::to_string(claim.rank), ctx_);
        claim.equal = verdicts[r][next[r]++] == '1';
      }
  }

  // 3. The root validates and plans; every rank gets the plan.
  Plan make_plan(const std::vector<std::string>& verdicts) {
    std::string plan_bytes;
    agreed_step(engine_, ctx_, [&] {
      if (!is_root_) return;
      if (!checks_.checks.empty()) take_verdicts(verdicts);
      planned_ = dist::plan_commit(
          all_, tag_, old(),
          [&](const std::set<const zip::EntryInfo*>* kept) {
            return s3_ ? s3_target_->begin(tag_, kept) : target_->begin(tag_, kept);
          },
          m_.options.dedup, root_, checks_,
          dist::RotateRequest{.replace = rotate_.replace, .keep_last = rotate_.keep_last});
      if (!s3_) dist::prepare_file(*target_, planned_, tag_);
      stats_.blobs_written = planned_.blobs_written;
      stats_.blobs_deduplicated = planned_.blobs_deduplicated;
      plan_bytes = encode_plan(planned_.plan);
    });
    return decode_plan(engine_([&] { return comm_.broadcast(plan_bytes, root_); }), root_);
  }

  // 4. Every rank writes its bytes, holding its writing lock meanwhile (the
  // root undoes a failed commit only once no rank holds one) and its alive
  // lock until the commit ends (dist/rank_locks.hpp); the root also writes
  // its own entries. Every rank's share -> root.
  std::vector<std::string> write_shares(const Plan& plan) {
    if (s3_) return upload_shares(plan);
    std::string share_bytes;
    agreed_step(engine_, ctx_, [&] {
      if (!locks_) {
        locks_.emplace(plan.file, comm_.rank());
        engine_.watch(&*locks_);
      }
      locks_->begin_writes();
      struct EndWrites {
        dist::RankLocks& locks;
        ~EndWrites() { locks.end_writes(); }
      } end_writes{*locks_};
      // Locked while the commit is still on: its journal is there (once the
      // root has undone the commit, a later writer may own the file).
      if (plan.nonce != 0) {
        const io::JournalState journal = io::read_append_journal(plan.file);
        if (journal.kind != io::JournalState::Kind::valid || journal.journal.nonce != plan.nonce)
          throw Error(ErrorCode::io, "the commit was undone before rank " +
                                         std::to_string(comm_.rank()) + " began to write");
      }
      out_.emplace(plan.file);
      // Everything goes out through io::SharedFileWriter: the middle of
      // long runs directly, the rest through the page cache (see there for
      // why the ranks' writes run in parallel so).
      io::FileSink sink(out_->fd(), ErrorContext{.archive = plan.file}, m_.options.durable);
      sink.route_through(
          std::make_unique<io::SharedFileWriter>(plan.file, ErrorContext{.archive = plan.file}),
          true);
      dist::RankShare share = dist::write_rank_share(plan, m_.items, comm_.rank(), sink);
      if (is_root_)
        for (const dist::RootEntry& r : planned_.root_entries) {
          const dist::PlannedEntry& e = r.entry;
          const auto bytes = r.content.span();
          root_infos_.push_back(zip::write_entry(sink, e.zip_plan(),
                                                 r.crc ? *r.crc : detail::crc32_of(bytes), bytes));
          share.written += e.data_offset + e.size - e.local_offset;
        }
      sink.finish();
      if (share.written > 0) sink.commit();  // fsync when durable
      stats_.bytes_written = share.written;
      share_bytes = dist::encode_share(share, plan);
    });
    return engine_([&] { return comm_.gather(share_bytes, root_); });
  }

  // 5. The root checks that the ranks' pieces cover every entry, gets its
  // CRC from their shares, writes its local header with it and commits.
  // Returns the stats for every rank (root; empty elsewhere).
  std::string finish(const Plan& plan, const std::vector<std::string>& shares) {
    if (s3_) return finish_upload(plan, shares);
    std::string stats_bytes;
    bool visible = false;
    agreed_step(engine_, ctx_, [&] {
      if (!is_root_) return;
      const dist::EntryCrcs crcs = dist::combine_shares(shares, plan, ctx_);
      std::uint64_t total = crcs.written;
      std::vector<zip::EntryInfo> written = root_infos_;
      std::uint64_t end = 0;
      for (const zip::EntryInfo& e : root_infos_)
        end = std::max(end, e.data_offset + e.compressed_size);
      io::FileSink headers(out_->fd(), ErrorContext{.archive = plan.file}, false);
      for (std::size_t i = 0; i < plan.entries.size(); ++i) {
        const zip::EntryPlan entry = plan.entries[i].zip_plan();
        written.push_back(zip::finish_entry(headers, entry, crcs.crcs[i]));
        total += entry.header_size();
        end = std::max(end, entry.end());
      }
      headers.finish();
      in_file_order(written);
      const std::uint64_t before = end;
      try {
        target_->finish(written, planned_.tags, end, &visible);
      } catch (const Error& e) {
        if (!visible) throw;
        throw e.reworded(
            "the new tag is visible, but finishing the commit failed (it may not survive "
            "a power loss): " +
                e.message(),
            e.context());
      }
      total += std::filesystem::file_size(m_.path) - before;
      compact_ = planned_.kept && mostly_free();
      stats_bytes = stats_message(total);
    });
    return stats_bytes;
  }

  std::string stats_message(std::uint64_t total) const {
    WireOut w;
    w.u64(total);
    w.u64(stats_.blobs_written);
    w.u64(stats_.blobs_deduplicated);
    w.u64(exists_ ? 1 : 0);
    w.u64(compact_ ? 1 : 0);
    return w.s;
  }

  // Root, after a commit that freed entries: whether the archive now holds
  // more free bytes than live ones (Writer's rule for rewriting instead of
  // committing in place).
  // The tag is committed by then: an archive that cannot be read back here
  // fails no save, it is left as it is (the next rotating commit checks
  // again).
  bool mostly_free() const noexcept {
    try {
      const Archive now = Archive::open(m_.path);
      const checkpoint::ArchiveState state(now);
      const std::span<const std::byte> file = state.reader().file().span();
      const std::uint64_t unused = zip::unused_bytes(state.directory(), file);
      return unused > file.size() - unused;
    } catch (const std::exception&) {
      return false;
    }
  }

  // 6. After a commit that left the archive mostly free (every rank knows
  // from the stats): every rank lets go of its locks, and the root rewrites
  // the archive with every tag kept (a single-writer commit: the old archive
  // or the compact one), so that it shrinks to its live data. On s3:// that
  // commit is the Writer's rewrite of an object (docs/s3-writes.md): a
  // second multipart upload, each entry copied server-side, completed
  // If-Match the ETag that the rewrite read at its open.
  void compact() {
    engine_.watch(nullptr);
    locks_.reset();
    agreed_step(engine_, ctx_, [&] {
      if (!is_root_) return;
      try {
        // append = false: the commit rewrites the file whatever it changes;
        // the empty metadata edit is the change (a commit with nothing
        // staged leaves the archive as it is).
        Writer w = Writer::open(m_.path, WriterOptions{.durable = m_.options.durable,
                                                       .append = false,
                                                       .on_notice = m_.options.on_notice});
        w.update_metadata([](Metadata&) {});
        w.commit();
      } catch (const Error& e) {
        throw e.reworded(
            "the tag is committed, but rewriting the archive to drop its free "
            "entries failed (the next save that removes tags tries again): " +
                e.message(),
            e.context());
      }
    });
  }

  const Archive* old() const {
    return s3_target_ ? s3_target_->old() : target_ ? target_->old() : nullptr;
  }

  // 4 (s3://, dist/s3_commit.hpp). Every rank surveys its share (CRCs, its
  // long runs) -> root; the root lays out the parts -> all; every rank
  // uploads its runs as parts of the root's upload and writes its local
  // headers; its parts' ETags and the bytes it holds for the root -> root.
  // The ranks share no file on S3: their alive locks are on a lock file of
  // their host (dist/rank_locks.hpp), so that a rank that dies while the
  // others upload or wait is named by the survivors of its host when their
  // engine fails (gloo's "Connection closed by peer" names no rank).
  std::vector<std::string> upload_shares(const Plan& plan) {
    std::string survey;
    agreed_step(engine_, ctx_, [&] {
      locks_.emplace(dist::RankLocks::OnThisHost{m_.path.string() + "\n" + plan.file, is_root_},
                     comm_.rank());
      engine_.watch(&*locks_);
      survey = dist::s3_survey(plan, m_.items, comm_.rank());
    });
    const std::vector<std::string> surveys = engine_([&] { return comm_.gather(survey, root_); });
    std::string layout_bytes;
    agreed_step(engine_, ctx_, [&] {
      if (!is_root_) return;
      layout_bytes = encode_layout(
          s3_target_->lay_out(surveys, plan, planned_.end, root_, ctx_, planned_.root_entries));
    });
    layout_ =
        dist::decode_layout(engine_([&] { return comm_.broadcast(layout_bytes, root_); }), root_);
    std::string result;
    agreed_step(engine_, ctx_, [&] {
      io::ByteSink* root_sink = is_root_ ? &s3_target_->sink() : nullptr;
      dist::S3RankResult r =
          dist::s3_upload_share(m_.path.string(), plan, layout_, m_.items, comm_.rank(), root_sink);
      if (is_root_)
        for (const dist::RootEntry& entry : planned_.root_entries)
          root_infos_.push_back(s3_target_->write_root_entry(entry));
      stats_.bytes_written = r.uploaded;
      result = std::move(r.message);
    });
    return engine_([&] { return comm_.gather(result, root_); });
  }

  // 5 (s3://): the root writes the bytes the ranks sent it and the tail,
  // and completes the upload.
  std::string finish_upload(const Plan& plan, const std::vector<std::string>& results) {
    std::string stats_bytes;
    bool visible = false;
    agreed_step(engine_, ctx_, [&] {
      if (!is_root_) return;
      s3_target_->take_results(results, root_);
      std::vector<zip::EntryInfo> written = root_infos_;
      for (const zip::EntryInfo& e : dist::s3_entry_infos(plan, layout_)) written.push_back(e);
      in_file_order(written);
      s3_target_->finish(written, planned_.tags, planned_.end, &visible);
      stats_.bytes_written = s3_target_->uploaded() - s3_target_->uploaded_by_others();
      compact_ = planned_.kept && s3_target_->mostly_free();
      stats_bytes = stats_message(s3_target_->uploaded());
    });
    return stats_bytes;
  }

  CollectiveStats final_stats(const std::string& bytes) {
    WireIn in(bytes, root_);
    stats_.archive_bytes_written = in.u64();
    stats_.blobs_written = in.u64();
    stats_.blobs_deduplicated = in.u64();
    stats_.appended = in.u64() != 0;
    compact_ = in.u64() != 0;
    return stats_;
  }

  CollectiveWriter::Impl& m_;
  Communicator& comm_;
  const std::string& tag_;
  const CollectiveCommitOptions& rotate_;
  bool root_replace_ = false;         // the root's rotate_ (lock)
  std::uint64_t root_keep_last_ = 0;  // 0: none
  std::string root_tag_;              // the root's tag_ (lock)
  bool compact_ = false;              // the commit is followed by compact()
  bool committed_ = false;            // finish() returned: the tag is committed
  const int root_;
  const bool is_root_;
  const ErrorContext ctx_;
  Engine engine_;
  CollectiveStats stats_;
  // Destroyed in reverse: the file, the rank's locks, then the target
  // (whose abort waits for the ranks' writing locks).
  std::unique_ptr<dist::CommitTarget> target_;
  std::unique_ptr<dist::S3CommitTarget> s3_target_;  // root, s3://
  const bool s3_ = remote::can_upload(m_.path.native());
  dist::S3Layout layout_;  // s3://
  bool exists_ = false;
  std::optional<dist::RankLocks> locks_;
  std::vector<std::vector<Record>> all_;    // root: every rank's records
  dist::TextChecks checks_;                 // root: with the ranks' verdicts
  dist::CommitPlan planned_;                // root
  std::vector<zip::EntryInfo> root_infos_;  // root: its own entries, written
  std::optional<io::AppendFile> out_;
};

// The commit. One on s3:// that another writer's commit refused before it
// took effect (CommitRun::may_plan_again) is run again from its first step,
// against the object as it is now, at most remote::s3_replans() times (after
// a random pause: remote::pause_before_new_plan), as the
// single writer's is (docs/s3-writes.md): the staged tensors name tags and
// parameters, not the version they were staged on. Every rank sees the
// same agreed refusal, so all run again or all fail.
CollectiveStats run_commit(CollectiveWriter::Impl& m, const std::string& tag,
                           const CollectiveCommitOptions& options) {
  for (int replans = 1;; ++replans) {
    const auto attempt = std::chrono::steady_clock::now();
    {
      CommitRun run(m, tag, options);
      try {
        return run.run();
      } catch (const Error& e) {
        if (replans > remote::s3_replans() || !run.may_plan_again(e)) throw;
        run.tell_planned_again(e, replans);
      }
    }  // the refused upload aborted
    remote::pause_before_new_plan(replans, std::chrono::steady_clock::now() - attempt);
  }
}

}  // namespace

CollectiveStats CollectiveWriter::commit(const std::string& tag) {
  return commit(tag, CollectiveCommitOptions{});
}

CollectiveStats CollectiveWriter::commit(const std::string& tag,
                                         const CollectiveCommitOptions& options) {
  CollectiveStats stats = run_commit(*impl_, tag, options);
  impl_->items.clear();
  impl_->entries = NewTag();
  return stats;
}

// ---- dist::DetachedCommit ----------------------------------------------------

namespace dist {

DetachedCommit::DetachedCommit(CollectiveWriter::Impl& writer)
    : impl_(std::make_unique<CollectiveWriter::Impl>()) {
  impl_->path = writer.path;
  impl_->comm = writer.comm;
  impl_->options = writer.options;
  impl_->items = std::move(writer.items);
  impl_->entries = std::move(writer.entries);
  writer.items.clear();
  writer.entries = NewTag();
}
DetachedCommit::~DetachedCommit() = default;
DetachedCommit::DetachedCommit(DetachedCommit&&) noexcept = default;
DetachedCommit& DetachedCommit::operator=(DetachedCommit&&) noexcept = default;

std::vector<const Bytes*> DetachedCommit::buffers() const {
  std::vector<const Bytes*> out;
  for (const Item& item : impl_->items)
    if (item.kind != Kind::shared && item.kind != Kind::text) out.push_back(&item.tensor.values());
  for (const auto& e : NewTag::Contents::of(impl_->entries).entries) out.push_back(&e.contents);
  return out;
}

void DetachedCommit::replace_buffers(std::vector<Bytes> copies) {
  std::size_t next = 0;
  for (Item& item : impl_->items)
    if (item.kind != Kind::shared && item.kind != Kind::text) {
      const Tensor& t = item.tensor;
      item.tensor = Tensor::dense(t.dtype(), t.shape(), std::move(copies.at(next++)));
    }
  NewTag entries;
  for (const auto& e : NewTag::Contents::of(impl_->entries).entries)
    entries.set_entry(e.relative_name, std::move(copies.at(next++)), e.compression);
  impl_->entries = std::move(entries);
}

void DetachedCommit::fail_first_step(std::exception_ptr error) {
  impl_->fail_first_step = std::move(error);
}

CollectiveStats DetachedCommit::run(const std::string& tag,
                                    const CollectiveCommitOptions& options) {
  return run_commit(*impl_, tag, options);
}

ErrorContext DetachedCommit::context() const {
  return impl_->context();
}

}  // namespace dist

}  // namespace modelzip
