// error_text<E>(f): the message of the E that f throws, for tests that check what an error says.
// When f returns normally the text is "<no exception thrown>", so a check on the message fails
// and shows why; an exception of another type propagates to Boost.Test, which reports its type
// and message (the call threw, but not the error the test expects).
//
// Header-only, for any test area: #include "../support/error_text.hpp".
#pragma once

#include <functional>
#include <string>

namespace kiln::test {

/// Runs f, requires it to throw E, and returns its what(); "<no exception thrown>" otherwise.
template <class E>
std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no exception thrown>";
}

}  // namespace kiln::test
