// The whole contract in one include, for plugin authors who prefer it.
#pragma once

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/data_source.hpp"
#include "kiln/errors.hpp"
#include "kiln/model.hpp"
#include "kiln/ops.hpp"
#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/plugin_args.hpp"
#include "kiln/precision_policy.hpp"
#include "kiln/rng.hpp"
#include "kiln/store.hpp"
#include "kiln/tensor.hpp"
#include "kiln/version.hpp"
