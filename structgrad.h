// structgrad: the one header users include. Example:
//   #include <structgrad/structgrad.h>
//   auto U = sg::UpperTriangular::randn(64).requires_grad_();
//   auto loss = sg::sum(sg::square(sg::matmul(U, U)));
//   loss.backward();            // U.grad() is upper triangular
#pragma once

#include "core/cuda_runtime_api.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/types.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "ops/elementwise.h"
#include "ops/factories.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/structure.h"
#include "autograd/gradcheck.h"
#include "core/eigen.h"
#include "autograd/optim.h"
#include "nn/progress.h"
#include "nn/module.h"
#include "io/npy.h"
#include "io/checkpoint.h"
#include "distributed/distributed.h"
