// Choosing this rank's GPU and describing it for the run banner. choose_device() is the first
// CUDA call the backend makes: it only queries the device count, then makes the chosen device
// current, so no CUDA context is ever created on a device this rank does not use.
#pragma once

#include <string>

#include "kiln/backend.hpp"

namespace kiln::cuda {

/// `requested` >= 0: that device; -1: the local rank's. Makes it current (cudaSetDevice) and
/// returns its ordinal. Throws BackendError when there is no usable device ("backend 'cuda': no
/// usable CUDA device (cudaGetDeviceCount: ...)") or the ordinal does not exist on this node.
int choose_device(int requested, int local_rank);

/// Makes `device` current on the calling thread if it is not (DataLoader workers and other
/// threads that call allocate() or copy() never chose one). Throws BackendError.
void make_current(int device);

/// Banner data of the current device: "NVIDIA H200", memory, and in `detail` the compute
/// capability, SM count, PCI bus id and driver/runtime/cuDNN/cuBLAS versions.
DeviceInfo describe_device(int device);

/// "0000:19:00.0" for `device` (NVML finds the same GPU by it).
std::string pci_bus_id(int device);

}  // namespace kiln::cuda
