// A std::streambuf that hands what an std::ostream writes to a sink
// function in pieces: bytes collect in a buffer (1 MiB by default) that is
// handed over when full and on flush; writes of at least half the buffer go
// straight to the sink.
//
// Errors: an exception thrown by the sink does not cross the stream (an
// std::ostream would swallow it and only set badbit); the buffer keeps the
// first one, fails every later write, and rethrow_error() rethrows it, so
// the caller reports the sink's reason (e.g. errno and offset) instead of a
// bare "stream failed". Ownership: `sink` must outlive the buffer. Thread
// safety: none (one stream, one thread).
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <span>
#include <streambuf>
#include <vector>

namespace modelzip::io {

class SinkBuf : public std::streambuf {
 public:
  using Sink = std::function<void(std::span<const std::byte>)>;

  explicit SinkBuf(const Sink& sink, std::size_t buffer_size = std::size_t{1} << 20)
      : sink_(sink), buf_(buffer_size) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }

  // Whether the sink failed; rethrow_error() rethrows what it threw (no-op
  // when it did not).
  bool failed() const noexcept { return static_cast<bool>(error_); }
  void rethrow_error() const {
    if (error_) std::rethrow_exception(error_);
  }

 protected:
  int sync() override { return drain() ? 0 : -1; }

  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n < static_cast<std::streamsize>(buf_.size() / 2)) return std::streambuf::xsputn(s, n);
    if (!drain() || !put(s, static_cast<std::size_t>(n))) return 0;
    return n;
  }

 private:
  // Hands the buffered bytes to the sink and empties the buffer.
  bool drain() {
    const auto n = static_cast<std::size_t>(pptr() - pbase());
    setp(buf_.data(), buf_.data() + buf_.size());
    return n == 0 || put(buf_.data(), n);
  }

  bool put(const char* p, std::size_t n) {
    if (error_) return false;
    try {
      sink_(std::as_bytes(std::span(p, n)));
      return true;
    } catch (...) {
      error_ = std::current_exception();
      return false;
    }
  }

  const Sink& sink_;
  std::vector<char> buf_;
  std::exception_ptr error_;
};

}  // namespace modelzip::io
