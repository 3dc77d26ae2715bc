// Loads libkiln_mpi_rendezvous.so and calls its broadcast (see mpi_broadcast.hpp and
// core/dist_mpi/kiln_mpi_rendezvous.h).
#include "mpi_broadcast.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include <filesystem>
#include <mutex>

#include "../dist_mpi/kiln_mpi_rendezvous.h"
#include "kiln/errors.hpp"

namespace kiln::dist::detail {
namespace {

constexpr const char* kLibrary = "libkiln_mpi_rendezvous.so";

/// libkiln_core's directory: the build tree's lib/ or the install's libdir, where the MPI
/// library sits too.
std::filesystem::path core_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&mpi_broadcast_from_rank0), &info) == 0 || !info.dli_fname) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

kiln_mpi_broadcast_fn load() {
  static std::mutex mutex;
  static kiln_mpi_broadcast_fn fn = nullptr;
  std::lock_guard lock(mutex);
  if (fn) return fn;
  const std::filesystem::path path = core_directory() / kLibrary;
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    throw CommError(fmt::format("the mpi rendezvous needs {}: {}; it is built when CMake finds MPI "
                                "(libopenmpi-dev, see scripts/setup.sh), or use tcp://host:port or file:<dir>",
                                path.string(), ::dlerror()));
  }
  fn = reinterpret_cast<kiln_mpi_broadcast_fn>(::dlsym(handle, KILN_MPI_BROADCAST_SYMBOL));
  if (!fn) throw CommError(fmt::format("{} has no symbol {}", path.string(), KILN_MPI_BROADCAST_SYMBOL));
  return fn;  // never dlclose()d: MPI stays initialised until exit
}

}  // namespace

std::string mpi_broadcast_from_rank0(const std::string& text, const RankInfo& ranks) {
  const kiln_mpi_broadcast_fn fn = load();
  std::string out(64 * 1024, '\0');
  std::size_t size = 0;
  char error[1024] = {};
  if (fn(text.data(), text.size(), ranks.rank, ranks.world_size, out.data(), out.size(), &size, error, sizeof error) != 0) {
    throw CommError(fmt::format("rank {} of {}: the mpi rendezvous failed: {}", ranks.rank, ranks.world_size, error));
  }
  out.resize(size);
  return out;
}

}  // namespace kiln::dist::detail
