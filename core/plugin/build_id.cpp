// Build ids of loaded libraries (see kiln/plugin/build_id.hpp).
//
// dl_iterate_phdr walks the process's loaded objects; the build id is the descriptor of the
// NT_GNU_BUILD_ID note (type 3, owner "GNU") in one of the object's PT_NOTE segments. Notes are
// 4-byte aligned in both ELF classes as the GNU toolchain writes them.
#include "kiln/plugin/build_id.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/sdk/crc32c.hpp"

namespace kiln::plugin {
namespace {

struct Search {
  std::filesystem::path wanted;  // resolved path of the library
  std::optional<std::string> id;
};

constexpr std::size_t align4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

/// The build id in one PT_NOTE segment of `size` bytes at `notes`, if it holds one.
std::optional<std::string> build_id_in(const unsigned char* notes, std::size_t size) {
  std::size_t at = 0;
  while (at + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) header;
    std::memcpy(&header, notes + at, sizeof header);
    const std::size_t name_at = at + sizeof header;
    const std::size_t desc_at = name_at + align4(header.n_namesz);
    const std::size_t next = desc_at + align4(header.n_descsz);
    if (next > size || next <= at) return std::nullopt;  // damaged segment: stop rather than read past it
    if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 && std::memcmp(notes + name_at, "GNU", 4) == 0) {
      std::string hex;
      for (std::size_t i = 0; i < header.n_descsz; ++i) hex += fmt::format("{:02x}", notes[desc_at + i]);
      return hex;
    }
    at = next;
  }
  return std::nullopt;
}

int visit(struct dl_phdr_info* info, std::size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  // The main executable has an empty name; it is found through /proc/self/exe below.
  const std::filesystem::path name =
      info->dlpi_name && info->dlpi_name[0] ? resolved_path(info->dlpi_name) : resolved_path("/proc/self/exe");
  if (name != search->wanted) return 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* notes = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    if (auto id = build_id_in(notes, ph.p_memsz)) {
      search->id = std::move(id);
      return 1;
    }
  }
  return 1;  // found the object; it has no build id
}

std::string file_crc(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot read {} to tell which build it is", file.string()));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return fmt::format("crc32c:{:08x}", io::crc32c(bytes.data(), bytes.size()));
}

}  // namespace

std::filesystem::path resolved_path(const std::filesystem::path& library) {
  std::error_code ec;
  auto canonical = std::filesystem::canonical(library, ec);
  return ec ? library : canonical;
}

std::string build_id_of(const std::filesystem::path& library) {
  Search search{resolved_path(library), std::nullopt};
  dl_iterate_phdr(visit, &search);
  return search.id ? *search.id : file_crc(search.wanted);
}

std::string core_build_id() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&core_build_id), &info) == 0 || info.dli_fname == nullptr) {
    return build_id_of("/proc/self/exe");
  }
  return build_id_of(info.dli_fname);
}

}  // namespace kiln::plugin
