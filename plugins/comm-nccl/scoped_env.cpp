// ScopedEnv and set_env_default (see scoped_env.hpp). setenv/unsetenv are POSIX; the value is
// copied by setenv, so nothing here has to outlive the call.
#include "scoped_env.hpp"

#include <cstdlib>

namespace kiln::nccl {

ScopedEnv::ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) previous_ = std::string(old);
  ::setenv(name_.c_str(), value.c_str(), /*overwrite=*/1);
}

ScopedEnv::~ScopedEnv() {
  if (previous_) {
    ::setenv(name_.c_str(), previous_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

bool set_env_default(const std::string& name, const std::string& value) {
  if (std::getenv(name.c_str()) != nullptr) return false;
  ::setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
  return true;
}

std::mutex& algo_env_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace kiln::nccl
