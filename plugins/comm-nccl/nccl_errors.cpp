// The ncclResult_t and cudaError_t sentences (see nccl_errors.hpp). Every value of the
// ncclResult_t enum up to ncclNumResults has an entry; the test walks them all so a new NCCL
// result code cannot slip through unexplained.
#include "nccl_errors.hpp"

#include <fmt/format.h>

namespace kiln::nccl {

ErrorText nccl_error_text(ncclResult_t result) noexcept {
  switch (result) {
    case ncclSuccess:
      return {"ncclSuccess", "no error", "nothing to do"};
    case ncclUnhandledCudaError:
      return {"ncclUnhandledCudaError", "a CUDA call inside NCCL failed",
              "check the device with nvidia-smi and rerun with NCCL_DEBUG=INFO to see the CUDA error; "
              "a kernel that faulted earlier on this device (illegal address) also surfaces here"};
    case ncclSystemError:
      return {"ncclSystemError", "a system call failed",
              "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see which (often a socket, "
              "shared memory in /dev/shm, or a network interface: set NCCL_SOCKET_IFNAME)"};
    case ncclInternalError:
      return {"ncclInternalError", "NCCL hit an internal error",
              "rerun with NCCL_DEBUG=INFO; a peer process that died or a mismatched NCCL version "
              "between ranks are the usual causes"};
    case ncclInvalidArgument:
      return {"ncclInvalidArgument", "an argument passed to NCCL is invalid",
              "check the buffer is device memory on this rank's GPU and that count, dtype and root "
              "are valid; NCCL_DEBUG=WARN prints which argument"};
    case ncclInvalidUsage:
      return {"ncclInvalidUsage", "NCCL was called in a way it does not allow",
              "every rank must call the same collectives in the same order with the same counts and "
              "dtypes, and two ranks must not share one GPU"};
    case ncclRemoteError:
      return {"ncclRemoteError", "a remote peer reported an error or the network connection broke",
              "look at the other ranks' logs for the first failure; rerun with NCCL_DEBUG=INFO "
              "NCCL_DEBUG_SUBSYS=NET"};
    case ncclInProgress:
      return {"ncclInProgress", "the operation is still in progress (non-blocking communicator)",
              "wait for it by polling ncclCommGetAsyncError; seen as an error only if it never completes"};
    case ncclNumResults:
      break;
  }
  return {"unknown", "NCCL returned a result code this build does not know",
          "check that the NCCL library loaded at run time matches the nccl.h Kiln was built with"};
}

std::string format_nccl_error(std::string_view call, ncclResult_t result, std::string_view detail) {
  const ErrorText t = nccl_error_text(result);
  std::string msg = fmt::format("{} failed: {} ({}): {}; {}", call, t.name, static_cast<int>(result), t.meaning, t.hint);
  if (!detail.empty()) msg += fmt::format(" [NCCL: {}]", detail);
  return msg;
}

std::string_view cuda_error_hint(cudaError_t error) noexcept {
  switch (error) {
    case cudaErrorInsufficientDriver:
      return "the NVIDIA driver is missing or older than this CUDA runtime; on a machine without a GPU "
             "use a CPU communicator such as gloo";
    case cudaErrorNoDevice:
      return "no CUDA device is visible; check nvidia-smi and CUDA_VISIBLE_DEVICES, or use gloo on the CPU";
    case cudaErrorInvalidDevice:
      return "the device ordinal does not exist; each process uses the backend's device (backend.device, "
             "by default device <local rank>), so start at most as many processes per node as there are "
             "visible GPUs";
    case cudaErrorDevicesUnavailable:
      return "the GPU is busy or in exclusive-process mode and taken by another process; check nvidia-smi";
    case cudaErrorMemoryAllocation:
      return "the GPU is out of memory; use a smaller size or free memory held by other processes";
    case cudaErrorInitializationError:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return "the CUDA driver could not initialise; check nvidia-smi and that the driver and kernel "
             "module versions match";
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorHardwareStackError:
      return "a kernel on this device faulted (possibly an earlier one); the CUDA context is unusable and "
             "the process must exit. Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel";
    case cudaErrorECCUncorrectable:
      return "the GPU reported an uncorrectable ECC error; report the node to its administrator";
    case cudaErrorInvalidResourceHandle:
      return "a stream or event belongs to another device or was destroyed; the backend and the "
             "communicator must use the same device";
    case cudaErrorInvalidValue:
      return "an argument is invalid (a host pointer where device memory is needed, or a size out of range)";
    default:
      return "see the CUDA runtime documentation for this error; rerun with CUDA_LAUNCH_BLOCKING=1 "
             "to locate it";
  }
}

std::string format_cuda_error(std::string_view call, cudaError_t error, std::string_view name,
                              std::string_view text) {
  return fmt::format("{} failed: {} ({}): {}; {}", call, name, static_cast<int>(error), text, cuda_error_hint(error));
}

}  // namespace kiln::nccl
