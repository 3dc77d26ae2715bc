// What a collective is for, as the collective record (collective_recorder.hpp) shows it.
//
// A communicator sees only tensors; "all_reduce f32 x 101770" does not say whether it carried
// gradients or the epoch's metrics. The core code that issues a collective names its purpose
// for the length of a scope, on its own thread, and the recorder copies the name into each
// collective issued inside it:
//   CollectivePurpose purpose("gradients, bucket", index);   // -> "gradients, bucket 3"
// The text must be a string literal (it is kept as a pointer). Scopes nest; the innermost wins.
#pragma once

#include <cstdint>

namespace kiln::train {

class CollectivePurpose {
 public:
  /// `number` >= 0 is printed after the text ("gradients, bucket 3"); -1 prints none.
  explicit CollectivePurpose(const char* text, std::int64_t number = -1) noexcept
      : outer_text_(current_text()), outer_number_(current_number()) {
    current_text() = text;
    current_number() = number;
  }
  ~CollectivePurpose() {
    current_text() = outer_text_;
    current_number() = outer_number_;
  }
  CollectivePurpose(const CollectivePurpose&) = delete;
  CollectivePurpose& operator=(const CollectivePurpose&) = delete;

  /// This thread's innermost purpose, or null outside every scope.
  static const char* text() noexcept { return current_text(); }
  static std::int64_t number() noexcept { return current_number(); }

 private:
  static const char*& current_text() noexcept {
    thread_local const char* text = nullptr;
    return text;
  }
  static std::int64_t& current_number() noexcept {
    thread_local std::int64_t number = -1;
    return number;
  }
  const char* outer_text_;
  std::int64_t outer_number_;
};

}  // namespace kiln::train
