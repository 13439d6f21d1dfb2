#include "remote/remote_source.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/progress_tracker.hpp"
#include "modelzip/cancel.hpp"
#include "modelzip/error.hpp"
#include "remote/cache_file.hpp"
#include "remote/curl_request.hpp"
#include "remote/endpoint.hpp"
#include "remote/fetch_interrupt.hpp"
#include "remote/pin_check.hpp"
#include "remote/s3_refusal.hpp"
#include "remote/settings.hpp"

namespace modelzip::remote {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Objects larger than this are refused as implausible (sizes come from the
// server; nothing is allocated from them, the cache file is sparse).
constexpr std::uint64_t kMaxObjectSize = std::uint64_t{1} << 46;
// The body of an error answer (discarded) is read up to this size, then the
// transfer is ended and the answer judged by its status: a server streaming
// an endless error page cannot hold a read.
constexpr std::uint64_t kMaxErrorPage = std::uint64_t{64} << 10;
// Reads are cut into requests no larger than the bytes one request deadline
// is given for (remote.hpp documents request_timeout as the read request's).
static_assert(kMaxRequest <= kDeadlineUnit);
// Fetches at least this large report progress.
constexpr std::uint64_t kProgressFrom = std::uint64_t{8} << 20;

// The object as pinned at open.
struct Pin {
  std::uint64_t size = 0;
  std::string etag;           // as the server sent it (quotes included)
  std::string last_modified;  // used only without an ETag
  bool strong_etag() const { return !etag.empty() && !etag.starts_with("W/"); }
};

class HttpSource;

// One request: a HEAD or one explicit range, with what its answer said.
struct Transfer {
  HttpSource* owner = nullptr;
  bool head = false;
  std::uint64_t offset = 0, length = 0;
  int attempt = 0;
  Clock::time_point not_before{};
  // Per attempt:
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  long status = 0;
  std::string etag, last_modified, content_range;
  std::optional<std::uint64_t> content_length;
  std::optional<std::uint64_t> retry_after;  // seconds
  bool body_checked = false;
  bool whole = false;  // a 200 accepted: the whole object from offset 0
  std::uint64_t received = 0;
  std::string failure;  // permanent failure found by a callback
  ErrorCode failure_code = ErrorCode::io;
  bool changed = false;          // ... because the object changed
  std::uint64_t error_page = 0;  // body bytes of an answer other than 200 / 206
  bool error_page_cut = false;   // ... stopped at kMaxErrorPage
  char errbuf[CURL_ERROR_SIZE] = {};
  long os_errno = 0;
  long deadline_ms = 0;                    // CURLOPT_TIMEOUT_MS
  const char* deadline_setting = nullptr;  // what sets it, if not MODELZIP_REQUEST_TIMEOUT
  long elapsed_ms = 0;                     // until the attempt ended

  void reset_attempt() {
    status = 0;
    etag.clear();
    last_modified.clear();
    content_range.clear();
    content_length.reset();
    retry_after.reset();
    body_checked = false;
    whole = false;
    received = 0;
    failure.clear();
    failure_code = ErrorCode::io;
    changed = false;
    error_page = 0;
    error_page_cut = false;
    errbuf[0] = '\0';
    os_errno = 0;
    deadline_ms = 0;
    deadline_setting = nullptr;
    elapsed_ms = 0;
  }
  std::string what() const {
    if (head) return "HEAD";
    return "bytes " + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
  }
};

class HttpSource final : public io::ByteSource {
 public:
  HttpSource(Endpoint endpoint, Settings settings, MissingObject missing)
      : ep_(std::move(endpoint)), settings_(std::move(settings)), missing_(missing) {
    global_init();
    multi_ = curl_multi_init();
    if (!multi_) fail(ErrorCode::io, ep_.url, "cannot start libcurl");
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(kParallelSmall));
    try {
      pin();
    } catch (...) {
      curl_multi_cleanup(multi_);
      throw;
    }
  }
  ~HttpSource() override {
    cache_.reset();
    curl_multi_cleanup(multi_);
  }

  Bytes file() const { return cache_->mapping(); }
  const std::string& etag() const noexcept { return pin_.etag; }

  void ensure(std::span<const io::ByteRange> ranges) const override {
    std::lock_guard lock(mutex_);
    auto* self = const_cast<HttpSource*>(this);
    std::vector<io::ByteRange> plan =
        plan_requests(cache_->present(), ranges, pin_.size, kMaxGap, kMaxRequest);
    if (plan.empty()) return;
    std::deque<Transfer> transfers;
    for (const auto& r : plan) transfers.push_back(Transfer{self, false, r.offset, r.length});
    // What was fetched is recorded now, not only when the source closes: a
    // process killed later keeps it (cache_file.hpp).
    try {
      self->run(transfers);
    } catch (...) {
      cache_->record();
      throw;
    }
    cache_->record();
  }

  // remote::changed_on_server (remote/pin_check.hpp).
  bool changed() const {
    std::lock_guard lock(mutex_);
    auto* self = const_cast<HttpSource*>(this);
    std::deque<Transfer> head;
    head.push_back(Transfer{self, true});
    try {
      self->run(head);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::not_found) return true;
      throw;
    }
    const Transfer& h = head.front();
    if (!h.content_length || *h.content_length != pin_.size || h.etag != pin_.etag) return true;
    return pin_.etag.empty() && h.last_modified != pin_.last_modified;
  }

  // Requests and bytes sent so far (benchmarks, tests).
  std::uint64_t requests() const noexcept { return requests_; }

 private:
  void pin() {
    std::deque<Transfer> head;
    head.push_back(Transfer{this, true});
    try {
      run(head);
    } catch (const Error&) {
      if (const long status = head.front().status;
          status == 403 || (status == 404 && missing_ == MissingObject::explain))
        if (auto explained = explain_s3_refusal(ep_, settings_, status)) throw *explained;
      throw;
    }
    const Transfer& h = head.front();
    if (!h.content_length)
      fail(ErrorCode::unsupported, ep_.url,
           "the server does not say the object's size (no Content-Length in its answer to HEAD)");
    pin_.size = *h.content_length;
    if (pin_.size > kMaxObjectSize)
      fail(ErrorCode::corrupt, ep_.url,
           "the server says the object has " + std::to_string(pin_.size) +
               " bytes, more than modelzip accepts");
    pin_.etag = h.etag;
    pin_.last_modified = h.last_modified;
    // Without a version to check, bytes from an earlier run cannot be
    // trusted: keep them in memory only.
    fs::path folder =
        pin_.etag.empty() && pin_.last_modified.empty() ? fs::path() : settings_.cache_dir;
    cache_ = std::make_unique<CacheFile>(folder, settings_.cache_limit,
                                         ep_.url + "\n" + ep_.http + "\n" + pin_.etag + "\n" +
                                             pin_.last_modified + "\n" + std::to_string(pin_.size),
                                         pin_.size, ep_.url);
  }

  static size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    auto line = parse_header_line(std::string_view(data, n));
    if (!line) return n;
    if (line->status_line) {
      t->status = line->status;
      t->etag.clear();
      t->last_modified.clear();
      t->content_range.clear();
      t->content_length.reset();
      t->retry_after.reset();
      return n;
    }
    const std::string& name = line->name;
    std::string& value = line->value;
    if (name == "etag")
      t->etag = value;
    else if (name == "last-modified")
      t->last_modified = value;
    else if (name == "content-range")
      t->content_range = value;
    else if (name == "content-length")
      t->content_length = parse_u64(value);
    else if (name == "retry-after")
      t->retry_after = parse_u64(value);
    return n;
  }

  // Checks the answer before its first body byte is stored; false: abort.
  bool check_answer(Transfer& t) {
    t.body_checked = true;
    if (t.status != 200 && t.status != 206) return true;  // body discarded, status judged at end
    // The version pinned: its ETag or, without one, its Last-Modified (a
    // server may ignore If-Match / If-Unmodified-Since).
    if ((!pin_.etag.empty() && !t.etag.empty() && t.etag != pin_.etag) ||
        (pin_.etag.empty() && !pin_.last_modified.empty() && !t.last_modified.empty() &&
         t.last_modified != pin_.last_modified)) {
      t.failure = kChangedWhileReading;
      t.changed = true;
      return false;
    }
    if (t.status == 200) {
      if (pin_.size > settings_.max_unranged) {
        t.failure_code = ErrorCode::unsupported;
        t.failure = "the server does not support range requests (it answered " + t.what() +
                    " with the whole object, 200 instead of 206); remote archives are read by "
                    "ranges: download it first (curl -o FILE URL) and open the local file";
        return false;
      }
      if (t.content_length && *t.content_length != pin_.size) {
        t.failure = kChangedWhileReading;
        t.changed = true;
        return false;
      }
      t.whole = true;
      return true;
    }
    // 206: "bytes FIRST-LAST/TOTAL" must be exactly what was asked.
    const auto range = parse_content_range(t.content_range);
    if (!range) {
      t.failure = "the server answered a request for " + t.what() +
                  (t.content_range.empty()
                       ? std::string(" with 206 but no Content-Range")
                       : " with a malformed Content-Range '" + printable(t.content_range) + "'");
      return false;
    }
    if (range->total && *range->total != pin_.size) {
      t.failure = kChangedWhileReading;
      t.changed = true;
      return false;
    }
    if (range->first != t.offset || range->last != t.offset + t.length - 1) {
      t.failure = "the server answered a request for " + t.what() + " with Content-Range '" +
                  printable(t.content_range) + "'";
      return false;
    }
    ranged_ = true;
    return true;
  }

  static size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    HttpSource& s = *t->owner;
    if (!t->body_checked && !s.check_answer(*t)) return 0;
    if (t->status != 200 && t->status != 206) {  // an error page: judged by its status
      t->error_page += n;
      if (t->error_page > kMaxErrorPage) {
        t->error_page_cut = true;
        return 0;
      }
      return n;
    }
    const std::uint64_t base = t->whole ? 0 : t->offset;
    const std::uint64_t limit = t->whole ? s.pin_.size : t->length;
    if (n > limit - t->received) {
      t->failure = "the server sent more bytes than asked for " + t->what();
      return 0;
    }
    try {
      s.cache_->write(base + t->received, data, n);
    } catch (const Error& e) {
      t->failure = e.message();
      return 0;
    }
    t->received += n;
    s.fetched_now_ += n;
    return n;
  }

  void start(Transfer& t) {
    t.reset_attempt();
    ++t.attempt;
    CURL* e = curl_easy_init();
    if (!e) fail(ErrorCode::io, ep_.url, "cannot start a libcurl transfer");
    t.easy = e;
    configure(e, ep_.http, ep_, settings_, t.errbuf, t.headers);
    t.deadline_ms = settings_.request_timeout_ms;
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &HttpSource::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &HttpSource::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    auto add = [&](const std::string& h) { add_header(t.headers, h); };
    if (t.head) {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
      // A HEAD is headers only: bounded by a connection and one low-speed
      // period where that is shorter than the request deadline.
      const long head_ms = settings_.connect_timeout_ms + 1000 * settings_.low_speed_time_s;
      if (head_ms < t.deadline_ms) {
        t.deadline_ms = head_ms;
        t.deadline_setting =
            "MODELZIP_CONNECT_TIMEOUT plus MODELZIP_LOW_SPEED_TIME, a HEAD's bound: raise them "
            "for a slower link";
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, head_ms);
      }
    } else {
      // The whole object if a server that ignores Range may answer with it.
      t.deadline_ms = set_deadline(
          e, settings_,
          ranged_ || pin_.size > settings_.max_unranged ? t.length : std::max(t.length, pin_.size));
      // Large answers in large pieces: fewer callbacks and cache writes.
      if (t.length > kSmallRequest) curl_easy_setopt(e, CURLOPT_BUFFERSIZE, kReceiveBuffer);
      add("Range: bytes=" + std::to_string(t.offset) + "-" +
          std::to_string(t.offset + t.length - 1));
      if (pin_.strong_etag())
        add("If-Match: " + pin_.etag);
      else if (pin_.etag.empty() && !pin_.last_modified.empty())
        add("If-Unmodified-Since: " + pin_.last_modified);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
    if (curl_multi_add_handle(multi_, e) != CURLM_OK) {
      finish(t);
      fail(ErrorCode::io, ep_.url, "cannot start a libcurl transfer");
    }
    ++requests_;
  }

  void finish(Transfer& t) {
    if (t.easy) {
      curl_multi_remove_handle(multi_, t.easy);
      curl_easy_cleanup(t.easy);
      t.easy = nullptr;
    }
    if (t.headers) {
      curl_slist_free_all(t.headers);
      t.headers = nullptr;
    }
  }

  // Judges a finished attempt: true if done, false to retry; throws when it
  // failed for good.
  bool judge(Transfer& t, CURLcode code) {
    if (t.changed) fail(ErrorCode::io, ep_.url, kChangedWhileReading);
    if (!t.failure.empty()) fail(t.failure_code, ep_.url, t.failure);
    bool retry = attempt_left(t);
    if (code == CURLE_WRITE_ERROR && t.error_page_cut) code = CURLE_OK;
    if (code != CURLE_OK) {
      std::string detail = describe(code, t.errbuf, t.os_errno);
      if (code == CURLE_OPERATION_TIMEDOUT)
        fail(ErrorCode::io, ep_.url,
             timed_out(settings_, t.deadline_ms, t.elapsed_ms, t.what(),
                       t.head
                           ? std::string("no complete answer")
                           : std::to_string(t.received) + " of " +
                                 std::to_string(t.whole ? pin_.size : t.length) + " bytes received",
                       detail, t.deadline_setting));
      if (transient(code) && retry) return false;
      fail(ErrorCode::io, ep_.url,
           std::string(code == CURLE_PARTIAL_FILE ? "truncated response" : "cannot fetch") +
               " for " + t.what() + ": " + detail +
               (t.attempt > 1 ? " (after " + std::to_string(t.attempt) + " attempts)" : ""));
    }
    if (t.status == 412 || t.status == 416) fail(ErrorCode::io, ep_.url, kChangedWhileReading);
    if (t.status >= 500 || t.status == 429) {
      if (retry) return false;
      fail(ErrorCode::io, ep_.url,
           "HTTP " + std::to_string(t.status) + " for " + t.what() + " (after " +
               std::to_string(t.attempt) + " attempts)");
    }
    if (t.head) {
      if (t.status != 200)
        fail(t.status == 404 ? ErrorCode::not_found : ErrorCode::io, ep_.url,
             "HTTP " + std::to_string(t.status) + status_text(t.status));
      return true;
    }
    if (t.status != 206 && t.status != 200)
      fail(t.status == 404 ? ErrorCode::not_found : ErrorCode::io, ep_.url,
           "HTTP " + std::to_string(t.status) + status_text(t.status) + " for " + t.what());
    if (!t.body_checked && !check_answer(t)) {  // an empty body
      if (t.changed) fail(ErrorCode::io, ep_.url, kChangedWhileReading);
      fail(t.failure_code, ep_.url, t.failure);
    }
    const std::uint64_t expected = t.whole ? pin_.size : t.length;
    if (t.received != expected) {
      if (retry) return false;
      fail(ErrorCode::io, ep_.url,
           "truncated response for " + t.what() + ": " + std::to_string(t.received) + " of " +
               std::to_string(expected) + " bytes (after " + std::to_string(t.attempt) +
               " attempts)");
    }
    if (t.whole)
      cache_->mark_present(0, pin_.size);
    else
      cache_->mark_present(t.offset, t.length);
    return true;
  }

  static bool attempt_left(const Transfer& t) { return t.attempt < kMaxAttempts; }

  // Runs every transfer to completion (kParallel at a time), retrying
  // transient failures with backoff. Throws on the first permanent failure,
  // leaving no transfer running; throws Error(cancelled) within a poll
  // interval (100 ms) of modelzip::request_cancel() or of an interrupt the
  // program watches for (remote/fetch_interrupt.hpp), whatever the
  // transfers wait for.
  void run(std::deque<Transfer>& transfers) {
    const std::unique_ptr<FetchInterrupt> interrupt = start_fetch_interrupt();
    std::vector<Transfer*> queue;
    std::uint64_t total = 0, longest = 0;
    for (auto& t : transfers) {
      queue.push_back(&t);
      total += t.length;
      longest = std::max(longest, t.length);
    }
    // Small requests (local headers, blob headers) are latency, not bandwidth.
    const std::size_t parallel = longest <= kSmallRequest ? kParallelSmall : kParallel;
    fetched_now_ = 0;
    detail::ProgressTracker tracker(
        total >= kProgressFrom ? settings_.progress : ProgressCallback{}, "fetch",
        ErrorContext{.archive = ep_.url});
    tracker.set_total(total);
    std::uint64_t reported = 0;
    std::vector<Transfer*> active;
    struct Cleanup {
      HttpSource& s;
      std::vector<Transfer*>& active;
      ~Cleanup() {
        for (Transfer* t : active) s.finish(*t);
      }
    } cleanup{*this, active};
    std::size_t next = 0;
    std::vector<Transfer*> waiting;  // retries not yet due
    while (next < queue.size() || !active.empty() || !waiting.empty()) {
      const char* why = interrupt ? interrupt->interrupted() : nullptr;
      if (why || cancel_requested())
        fail(ErrorCode::cancelled, ep_.url,
             std::string("read cancelled (") + (why ? why : "interrupted") + ")" +
                 (total == 0 ? std::string()
                             : ": " + std::to_string(fetched_now_) + " of " +
                                   std::to_string(total) + " bytes fetched"));
      const auto now = Clock::now();
      for (auto it = waiting.begin(); it != waiting.end();) {
        if ((*it)->not_before <= now && active.size() < parallel) {
          active.push_back(*it);
          start(**it);
          it = waiting.erase(it);
        } else {
          ++it;
        }
      }
      while (next < queue.size() && active.size() < parallel) {
        active.push_back(queue[next]);
        start(*queue[next++]);
      }
      int running = 0;
      curl_multi_perform(multi_, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        Transfer* t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
        const CURLcode code = msg->data.result;
        curl_easy_getinfo(t->easy, CURLINFO_OS_ERRNO, &t->os_errno);
        curl_off_t elapsed_us = 0;
        curl_easy_getinfo(t->easy, CURLINFO_TOTAL_TIME_T, &elapsed_us);
        t->elapsed_ms = static_cast<long>(elapsed_us / 1000);
        finish(*t);
        active.erase(std::find(active.begin(), active.end(), t));
        if (!judge(*t, code)) {
          t->not_before = Clock::now() + retry_pause(t->attempt, t->retry_after);
          waiting.push_back(t);
        }
      }
      if (tracker.enabled() && fetched_now_ > reported) {
        tracker.advance(std::min(fetched_now_, total) - reported);
        reported = std::min(fetched_now_, total);
      }
      if (!active.empty())
        curl_multi_poll(multi_, nullptr, 0, 100, nullptr);
      else if (!waiting.empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    tracker.finish();
  }

  Endpoint ep_;
  Settings settings_;
  MissingObject missing_;
  CURLM* multi_ = nullptr;
  Pin pin_;
  std::unique_ptr<CacheFile> cache_;
  mutable std::mutex mutex_;
  std::uint64_t requests_ = 0;
  std::uint64_t fetched_now_ = 0;
  // A range was answered with 206: later requests need no time for the
  // whole object.
  bool ranged_ = false;
};

}  // namespace

bool changed_on_server(const io::ByteSource& source) {
  const auto* http = dynamic_cast<const HttpSource*>(&source);
  return http && http->changed();
}

Opened open(const std::string& url, const RemoteOptions& options, MissingObject missing) {
  auto source = std::make_shared<HttpSource>(resolve(url), settings_from(options, url), missing);
  Bytes file = source->file();
  std::string etag = source->etag();
  return Opened{std::move(file), std::move(source), std::move(etag)};
}

}  // namespace modelzip::remote
