// The noting terminate handler (see kiln/crash/terminate_note.hpp).
#include "kiln/crash/terminate_note.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "kiln/io/text_out.hpp"

namespace kiln::crash {
namespace {

std::terminate_handler g_previous = nullptr;
char g_note[1024];
std::atomic<std::size_t> g_note_size{0};  // published once the note is complete
std::atomic<bool> g_noting{false};         // the first thread to terminate writes the note

/// `text` with line breaks as spaces: the note ends up inside one report line.
void put_one_line(io::TextOut& out, std::string_view text) {
  for (std::size_t from = 0; from < text.size();) {
    const std::size_t end = std::min(text.find_first_of("\r\n", from), text.size());
    out << text.substr(from, end - from);
    if (end < text.size()) out << " ";
    from = end + 1;
  }
}

void write_note(io::TextOut& note) {
  const std::exception_ptr in_flight = std::current_exception();
  if (!in_flight) {
    note << "with no exception in flight: std::terminate() called, or a joinable std::thread destroyed";
    return;
  }
  const std::type_info* type = abi::__cxa_current_exception_type();
  int status = 0;
  char* readable = type ? abi::__cxa_demangle(type->name(), nullptr, nullptr, &status) : nullptr;
  note << "after an uncaught " << (readable ? readable : type ? type->name() : "exception");
  std::free(readable);
  try {
    std::rethrow_exception(in_flight);
  } catch (const std::exception& e) {
    note << ": ";
    put_one_line(note, e.what());
  } catch (...) {  // not a std::exception: its type is all there is to say
  }
}

[[noreturn]] void note_and_terminate() {
  if (!g_noting.exchange(true)) {
    try {
      io::BufferOut note(g_note, sizeof(g_note));
      write_note(note);
      g_note_size.store(note.text().size());
    } catch (...) {  // out of memory demangling, say: the signal report still says SIGABRT
    }
  }
  if (g_previous != nullptr) g_previous();
  std::abort();
}

}  // namespace

void install_terminate_note() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  g_previous = std::set_terminate(note_and_terminate);
}

std::string_view terminate_note() noexcept { return {g_note, g_note_size.load()}; }

}  // namespace kiln::crash
