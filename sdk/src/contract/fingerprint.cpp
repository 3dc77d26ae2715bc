// The host's side of the contract fingerprint: the value CMake computed over this tree's
// interfaces/ and sdk/include/ headers when libkiln_sdk was configured.
#include "kiln/sdk_internal/fingerprint.hpp"

#ifndef KILN_CONTRACT_FINGERPRINT
#error "KILN_CONTRACT_FINGERPRINT must be defined by the build (sdk/CMakeLists.txt)"
#endif

namespace kiln::sdk {

const char* host_contract_fingerprint() noexcept { return KILN_CONTRACT_FINGERPRINT; }

}  // namespace kiln::sdk
