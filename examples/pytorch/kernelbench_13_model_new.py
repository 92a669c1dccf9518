"""KernelBench level 1, problem 13 (`torch.matmul(A, B)` for symmetric A and B) as a drop-in
ModelNew: structgrad's Symmetric·Symmetric product, forward and backward.

Each operand is read from its upper triangle. Gradients are symmetric, (G + Gᵀ)/2 of torch's
gradient G: the projection onto the symmetric matrices (docs/pytorch.md).
"""
import torch
import torch.nn as nn

import structgrad.torch as sgt


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return sgt.sym_matmul(A, B)
