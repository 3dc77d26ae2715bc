// Text written piece by piece without allocating, for code that may run in a fatal-signal
// handler (kiln/crash/fatal_signal_report.hpp) and for the same formats written normally.
//
// A format written through TextOut (the collective record's JSON, collective_trace.hpp) has one
// definition whether it ends in a std::string (StringOut, ordinary code) or in a file descriptor
// through a fixed buffer (BufferOut: write(2) only, async-signal-safe). Integers are formatted
// by hand: snprintf and fmt are not async-signal-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::io {

class TextOut {
 public:
  /// Throws only where the text ends in a std::string (StringOut: std::bad_alloc).
  virtual void put(std::string_view text) = 0;

  TextOut& operator<<(std::string_view text) {
    put(text);
    return *this;
  }
  TextOut& operator<<(const char* text);
  TextOut& operator<<(std::int64_t value);
  TextOut& operator<<(int value) { return *this << static_cast<std::int64_t>(value); }
  /// "0x" and lowercase hex digits.
  TextOut& hex(std::uintptr_t value);

 protected:
  ~TextOut() = default;
};

/// Appends to a std::string (allocates: not for signal handlers).
class StringOut final : public TextOut {
 public:
  explicit StringOut(std::string& out) : out_(out) {}
  void put(std::string_view text) override;

 private:
  std::string& out_;
};

/// Text in a caller's fixed buffer. With a file descriptor, a full buffer is written out and
/// filled again (flush() writes the rest); without one (fd < 0), text past the end is dropped.
/// Uses write(2) only. A failed write is remembered (ok()), later text is dropped.
class BufferOut final : public TextOut {
 public:
  BufferOut(char* buffer, std::size_t capacity, int fd = -1) noexcept : buffer_(buffer), capacity_(capacity), fd_(fd) {}
  void put(std::string_view text) noexcept override;
  /// Writes what the buffer holds to the descriptor (nothing without one).
  void flush() noexcept;
  /// What the buffer holds and has not written yet.
  std::string_view text() const noexcept { return {buffer_, size_}; }
  bool ok() const noexcept { return ok_; }

 private:
  char* buffer_;
  std::size_t capacity_;
  int fd_;
  std::size_t size_ = 0;
  bool ok_ = true;
};

}  // namespace kiln::io
