// ScopedEnv: sets an environment variable for a scope and puts the previous value (or its
// absence) back afterwards. The NCCL plugins use it to pin NCCL_ALGO for exactly one
// communicator's creation, since NCCL reads NCCL_ALGO when a communicator is created.
// The environment is process-wide: callers serialise (see algo_env_mutex()).
#pragma once

#include <mutex>
#include <optional>
#include <string>

namespace kiln::nccl {

class ScopedEnv {
 public:
  /// Sets `name` to `value`; remembers what was there.
  ScopedEnv(std::string name, const std::string& value);
  /// Restores the previous value, or unsets `name` if it was not set.
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  /// The value before this scope, if any (for the log line).
  const std::optional<std::string>& previous() const noexcept { return previous_; }

 private:
  std::string name_;
  std::optional<std::string> previous_;
};

/// Sets `name` to `value` only if the user has not set it. Returns true if it set it.
bool set_env_default(const std::string& name, const std::string& value);

/// Held from setting NCCL_ALGO until the communicator's initialisation has finished, so two
/// communicators created at once in one process (ring and tree) never see each other's value.
std::mutex& algo_env_mutex();

}  // namespace kiln::nccl
