// structgrad: the one header users include. Example:
//   #include <structgrad/structgrad.h>
//   auto U = sg::UpperTriangular::randn(64).requires_grad_();
//   auto loss = sg::sum(sg::square(sg::matmul(U, U)));
//   loss.backward();            // U.grad() is upper triangular
#pragma once

#include <structgrad/core/cuda_graph.h>
#include <structgrad/core/cuda_runtime_api.h>
#include <structgrad/core/error.h>
#include <structgrad/core/tensor.h>
#include <structgrad/core/types.h>
#include <structgrad/autograd/grad_mode.h>
#include <structgrad/autograd/node.h>
#include <structgrad/ops/compare.h>
#include <structgrad/ops/elementwise.h>
#include <structgrad/ops/factories.h>
#include <structgrad/ops/index.h>
#include <structgrad/ops/loss.h>
#include <structgrad/ops/linalg.h>
#include <structgrad/ops/matmul.h>
#include <structgrad/ops/reduce.h>
#include <structgrad/ops/shape.h>
#include <structgrad/ops/structure.h>
#include <structgrad/autograd/gradcheck.h>
#include <structgrad/ops/eigen.h>
#include <structgrad/distributions/distributions.h>
#include <structgrad/optim/optim.h>
#include <structgrad/nn/progress.h>
#include <structgrad/nn/module.h>
#include <structgrad/data/dataloader.h>
#include <structgrad/nn/sequential.h>
#include <structgrad/io/npy.h>
#include <structgrad/io/checkpoint.h>
#include <structgrad/distributed/distributed.h>
