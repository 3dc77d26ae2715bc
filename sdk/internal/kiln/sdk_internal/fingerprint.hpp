// The contract fingerprint this libkiln_sdk was built with (sdk/cmake/KilnContractFingerprint.cmake).
// The loader compares every plugin's descriptor against it. Not installed.
#pragma once

namespace kiln::sdk {

/// 16 hex digits identifying the exact contract and SDK headers of this build.
const char* host_contract_fingerprint() noexcept;

}  // namespace kiln::sdk
