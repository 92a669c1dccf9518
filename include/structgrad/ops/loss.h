// Losses.
#pragma once

#include <structgrad/core/tensor.h>

namespace sg {

/// mean((pred − target)²), a 0-d tensor. Example: `auto l = sg::mse_loss(y, t);`
Tensor mse_loss(const Tensor& pred, const Tensor& target);

}  // namespace sg
