// What each ncclResult_t and the CUDA errors this plugin meets mean, in a sentence with a hint.
//
// Plain C++ over the enum values in nccl.h/driver_types.h (no call into NCCL or the CUDA
// runtime), so the whole mapping is tested in CI on machines without a GPU. The communicator
// adds NCCL's own last-error text (ncclGetLastError) as `detail` when it has one.
#pragma once

#include <nccl.h>
#include <driver_types.h>

#include <string>
#include <string_view>

namespace kiln::nccl {

/// The meaning of one result code and what to try.
struct ErrorText {
  std::string_view name;     ///< "ncclSystemError"
  std::string_view meaning;  ///< "a system call failed"
  std::string_view hint;     ///< "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see which"
};

/// Text for `result`; codes this build does not know get a generic sentence naming the number.
ErrorText nccl_error_text(ncclResult_t result) noexcept;

/// "ncclCommInitRank failed: ncclSystemError (2): a system call failed; rerun with ...
/// [NCCL: <detail>]". `call` names the function and, where useful, its arguments.
std::string format_nccl_error(std::string_view call, ncclResult_t result, std::string_view detail = {});

/// Hint for the CUDA errors a communicator runs into (no driver, bad device, illegal address...);
/// a generic one for the rest.
std::string_view cuda_error_hint(cudaError_t error) noexcept;

/// "cudaSetDevice(3) failed: cudaErrorInvalidDevice (101): invalid device ordinal; <hint>".
/// `name` and `text` are cudaGetErrorName/cudaGetErrorString of `error` (the caller has the
/// runtime; this file does not call it).
std::string format_cuda_error(std::string_view call, cudaError_t error, std::string_view name,
                              std::string_view text);

}  // namespace kiln::nccl
