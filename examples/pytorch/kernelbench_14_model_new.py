"""KernelBench level 1, problem 14 (`torch.triu(torch.matmul(A, B))` for upper-triangular A and B)
as a drop-in ModelNew: structgrad's Upper·Upper kernels, forward and backward.

Only the upper triangles of A and B are read, and only the upper triangle of the product is
computed (about a sixth of a dense product's multiply-adds). Gradients are upper triangular: the
projections of torch's gradients onto the upper-triangular matrices.
"""
import torch
import torch.nn as nn

import structgrad.torch as sgt


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return sgt.triu_matmul(A, B)
