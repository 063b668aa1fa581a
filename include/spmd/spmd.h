// The whole public API of spmd.
#pragma once

#include <spmd/array.h>
#include <spmd/config.h>
#include <spmd/data.h>
#include <spmd/debug.h>
#include <spmd/device.h>
#include <spmd/distributed.h>
#include <spmd/dtype.h>
#include <spmd/error.h>
#include <spmd/global_arrays.h>
#include <spmd/io.h>
#include <spmd/nn.h>
#include <spmd/lax.h>
#include <spmd/ops.h>
#include <spmd/optim.h>
#include <spmd/parallel.h>
#include <spmd/random.h>
#include <spmd/placement.h>
#include <spmd/shape.h>
#include <spmd/shard_map.h>
#include <spmd/sharding.h>
#include <spmd/sharding_tree.h>
#include <spmd/tree.h>
#include <spmd/transforms.h>
#include <spmd/control_flow.h>
