// The whole public API of ddl in one include: #include <ddl/ddl.hpp>.
#pragma once

#include <ddl/build_config.hpp>
#include <ddl/core/allocator.hpp>
#include <ddl/core/autograd.hpp>
#include <ddl/core/config.hpp>
#include <ddl/core/device.hpp>
#include <ddl/core/dtype.hpp>
#include <ddl/core/error.hpp>
#include <ddl/core/ops.hpp>
#include <ddl/core/random.hpp>
#include <ddl/core/shape.hpp>
#include <ddl/core/tensor.hpp>
