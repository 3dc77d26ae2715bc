// What `kiln plugins test FILE` checks of a backend plugin, beyond loading:
//   device   device() names the device; activation_layout() is row_major or nhwc in every dtype
//   ops      every op of the contract supported in f32 (models refuse to build without one);
//            which bf16 and f16 ops it supports
//   memory   allocate() in host, pinned and device memory; copy() both ways and device to
//            device keeps every byte; fill(); to_device() (f32, bf16, u8, i32; 1 and 1,000,003
//            elements)
//   events   record_event() on both streams gives an event whose synchronize() returns after
//            the work before it; wait_event() between the streams
//   threads  allocate(), copy() into host memory, supports() and Event::synchronize() from 4
//            threads at once while the trainer thread runs matmuls (what the loader's workers do)
// then one line per case group of the op suite (core/cli/backend_suite/), each op's outputs
// against float64 references in f32, bf16 and f16 and both image layouts, where supports()
// says the backend takes them.
#pragma once

#include <vector>

#include "conformance.hpp"
#include "kiln/backend.hpp"

namespace kiln::cli {

/// Runs the backend checks and the op suite on `backend`.
std::vector<CheckLine> check_backend(Backend& backend);

}  // namespace kiln::cli
