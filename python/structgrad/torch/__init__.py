"""structgrad's structured products as PyTorch operators, with autograd and fake implementations.

Each function takes torch tensors and returns a torch tensor, differentiable (first order); the work runs in structgrad's
kernels (CPU: Eigen and the blocked structured GEMM; CUDA: the structured GEMM on torch's current
stream, memory from torch's caching allocator). An operand is read through its structure:

* ``"upper"`` reads only the entries on and above the diagonal (what lies below is ignored);
* ``"lower"`` reads only the entries on and below the diagonal;
* ``"symmetric"`` reads only the upper triangle, mirrored;
* ``"dense"`` reads every entry.

Gradients are projections onto each operand's structure: an ``"upper"`` (``"lower"``) operand's
gradient is upper (lower) triangular, a ``"symmetric"`` one's is ``(G + G.T) / 2`` of the unstructured gradient ``G``.
docs/pytorch.md has the conventions, a gradcheck recipe and the measured speed.
"""
from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["structured_matmul", "triu_matmul", "sym_matmul", "gram", "built_with_cuda", "STRUCTURES"]

STRUCTURES = ("dense", "upper", "lower", "symmetric")


def _load_library() -> None:
    here = Path(__file__).resolve().parent
    found = sorted(here.glob("_structgrad_ops*.so"))
    if not found:
        raise ImportError(f"structgrad.torch: the compiled operator library is missing from {here}; "
                          "install the package with `pip install --no-build-isolation ./python`")
    torch.ops.load_library(str(found[0]))


_load_library()
_ops = torch.ops.structgrad
# The overloads themselves: calling them skips the packet's overload resolution.
_matmul = _ops.structured_matmul.default
_gram = _ops.gram.default


def _check_structure(op: str, name: str, value: str) -> None:
    if value not in STRUCTURES:
        raise ValueError(f"{op}: unknown structure {value!r} for {name} (expected one of {', '.join(STRUCTURES)})")


def structured_matmul(A: torch.Tensor, B: torch.Tensor, *, a: str = "dense", b: str = "dense") -> torch.Tensor:
    """A @ B with A read as structure ``a`` and B as ``b`` ("dense", "upper", "lower" or "symmetric").

    Two "upper" operands give an upper-triangular result (exact zeros below the diagonal), two
    "lower" operands a lower-triangular one; every other pair gives the full product.
    Example: ``C = structured_matmul(A, B, a="upper", b="upper")``.
    """
    _check_structure("structured_matmul", "a", a)
    _check_structure("structured_matmul", "b", b)
    return _matmul(A, B, a, b)


def triu_matmul(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``torch.triu(torch.triu(A) @ torch.triu(B))``, computing only the upper triangle's work."""
    return _matmul(A, B, "upper", "upper")


def sym_matmul(S: torch.Tensor, T: torch.Tensor) -> torch.Tensor:
    """S @ T for symmetric S and T, each read from its upper triangle."""
    return _matmul(S, T, "symmetric", "symmetric")


def gram(A: torch.Tensor, *, a: str = "dense") -> torch.Tensor:
    """A @ A.T, computing one triangle and mirroring it. Example: ``K = gram(X)``."""
    _check_structure("gram", "a", a)
    return _gram(A, a)


def built_with_cuda() -> bool:
    """True when the operators were built with CUDA support (structgrad's CUDA backend and torch's)."""
    return bool(_ops.built_with_cuda())


# ---- fake implementations: shapes and dtypes only, for torch.compile and meta tensors ----------

def _check_matrix(op: str, what: str, t: torch.Tensor) -> None:
    torch._check(t.dim() == 2, lambda: f"{op}: expected {what} to be a matrix, got shape {list(t.shape)}")


@torch.library.register_fake("structgrad::structured_matmul")
def _structured_matmul_fake(a, b, a_structure, b_structure):
    _check_matrix("structured_matmul", "a", a)
    _check_matrix("structured_matmul", "b", b)
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"structured_matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied")
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.register_fake("structgrad::structured_matmul_backward")
def _structured_matmul_backward_fake(grad, a, b, a_structure, b_structure, output_mask):
    da = a.new_empty(a.shape) if output_mask[0] else a.new_empty((0,))
    db = b.new_empty(b.shape) if output_mask[1] else b.new_empty((0,))
    return da, db


@torch.library.register_fake("structgrad::gram")
def _gram_fake(a, a_structure):
    _check_matrix("gram", "a", a)
    return a.new_empty((a.shape[0], a.shape[0]))


@torch.library.register_fake("structgrad::gram_backward")
def _gram_backward_fake(grad, a, a_structure):
    return a.new_empty(a.shape)
