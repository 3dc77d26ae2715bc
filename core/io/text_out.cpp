// Allocation-free text output (see text_out.hpp).
#include "kiln/io/text_out.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::io {

TextOut& TextOut::operator<<(const char* text) {
  put(std::string_view(text, std::strlen(text)));
  return *this;
}

TextOut& TextOut::operator<<(std::int64_t value) {
  char digits[24];
  std::size_t n = 0;
  const bool negative = value < 0;
  std::uint64_t u = negative ? 0 - static_cast<std::uint64_t>(value) : static_cast<std::uint64_t>(value);
  do {
    digits[sizeof(digits) - ++n] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (negative) digits[sizeof(digits) - ++n] = '-';
  put(std::string_view(digits + sizeof(digits) - n, n));
  return *this;
}

TextOut& TextOut::hex(std::uintptr_t value) {
  char digits[2 + 2 * sizeof(value)];
  std::size_t n = 0;
  do {
    digits[sizeof(digits) - ++n] = "0123456789abcdef"[value % 16];
    value /= 16;
  } while (value != 0);
  digits[sizeof(digits) - ++n] = 'x';
  digits[sizeof(digits) - ++n] = '0';
  put(std::string_view(digits + sizeof(digits) - n, n));
  return *this;
}

void StringOut::put(std::string_view text) { out_.append(text); }

void BufferOut::put(std::string_view text) noexcept {
  while (!text.empty() && ok_) {
    if (size_ == capacity_) {
      if (fd_ < 0) return;
      flush();
      continue;
    }
    const std::size_t n = text.size() < capacity_ - size_ ? text.size() : capacity_ - size_;
    std::memcpy(buffer_ + size_, text.data(), n);
    size_ += n;
    text.remove_prefix(n);
  }
}

void BufferOut::flush() noexcept {
  if (fd_ < 0) return;
  std::size_t done = 0;
  while (done < size_ && ok_) {
    const ssize_t n = ::write(fd_, buffer_ + done, size_ - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ok_ = false;
    else done += static_cast<std::size_t>(n);
  }
  size_ = 0;
}

}  // namespace kiln::io
