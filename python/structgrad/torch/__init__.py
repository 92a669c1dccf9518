"""structgrad's structured products and linear algebra as PyTorch operators, with autograd and fake
implementations.

Each function takes torch tensors and returns torch tensors, differentiable (first order); the work runs
in structgrad's kernels (CPU: Eigen and the blocked structured GEMM; CUDA: structgrad's kernels on
torch's current stream, memory from torch's caching allocator). Every function takes a matrix or a batch
of matrices [..., m, n], the batch dimensions broadcasting as in torch.matmul and torch.linalg.

The products read each operand through its structure:

* ``"upper"`` reads only the entries on and above the diagonal (what lies below is ignored);
* ``"lower"`` reads only the entries on and below the diagonal;
* ``"symmetric"`` reads only the upper triangle, mirrored;
* ``"dense"`` reads every entry.

Gradients are projections onto each operand's structure: an ``"upper"`` (``"lower"``) operand's
gradient is upper (lower) triangular, a ``"symmetric"`` one's is ``(G + G.T) / 2`` of the unstructured gradient ``G``.

The linear algebra has torch.linalg's names and conventions (``cholesky``, ``cholesky_ex``,
``solve_triangular``, ``cholesky_solve``, ``logdet``): it reads the triangle torch reads, and its
gradients are torch's, a triangular input's masked to the triangle that is read.
docs/pytorch.md has the conventions, a gradcheck recipe and the measured speed.
"""
from __future__ import annotations

import collections
from pathlib import Path

import torch

__all__ = ["structured_matmul", "triu_matmul", "sym_matmul", "gram", "cholesky", "cholesky_ex", "solve_triangular",
           "cholesky_solve", "logdet", "built_with_cuda", "STRUCTURES"]

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
_cholesky = _ops.cholesky.default
_cholesky_ex = _ops.cholesky_ex.default
_solve_triangular = _ops.solve_triangular.default
_logdet = _ops.logdet.default


def _check_structure(op: str, name: str, value: str) -> None:
    if value not in STRUCTURES:
        raise ValueError(f"{op}: unknown structure {value!r} for {name} (expected one of {', '.join(STRUCTURES)})")


def structured_matmul(A: torch.Tensor, B: torch.Tensor, *, a: str = "dense", b: str = "dense") -> torch.Tensor:
    """A @ B with A read as structure ``a`` and B as ``b`` ("dense", "upper", "lower" or "symmetric").

    Two "upper" operands give an upper-triangular result (exact zeros below the diagonal), two
    "lower" operands a lower-triangular one; every other pair gives the full product. A and B are
    matrices or batches [..., m, k] and [..., k, n] whose batch dimensions broadcast as in torch.matmul.
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
    """A @ A.mT, computing one triangle of each matrix and mirroring it. Example: ``K = gram(X)``."""
    _check_structure("gram", "a", a)
    return _gram(A, a)


CholeskyEx = collections.namedtuple("CholeskyEx", ["L", "info"])
CholeskyEx.__doc__ = "cholesky_ex's result: the factor L and the int64 info codes of the batch shape."


def cholesky(A: torch.Tensor, *, upper: bool = False) -> torch.Tensor:
    """torch.linalg.cholesky: the lower factor L of each symmetric positive definite matrix of A [..., n, n]
    (L @ L.mT = A), reading only A's lower triangle; with ``upper`` the upper factor U = L.mT (U.mT @ U = A),
    reading only A's upper triangle, as torch does. A matrix that is not positive definite is a RuntimeError
    naming it and its first pivot that is not positive (this reads the factorization's codes back, as
    torch does). A's gradient is torch's, symmetric. Example: ``L = cholesky(K)``.
    """
    return _cholesky(A, upper=upper)


def cholesky_ex(A: torch.Tensor, *, upper: bool = False, check_errors: bool = False) -> CholeskyEx:
    """torch.linalg.cholesky_ex: ``(L, info)`` without reading anything back. ``info`` is int64 of A's batch
    shape [...]: 0 where the matrix is positive definite, else k ≥ 1 where its leading minor of order k is
    not (a NaN counts as not positive), L then holding no meaningful values there. With ``check_errors``
    such a matrix is a RuntimeError, as in cholesky. Example: ``L, info = cholesky_ex(K)``.
    """
    L, info = _cholesky_ex(A, upper=upper, check_errors=check_errors)
    return CholeskyEx(L, info)


def solve_triangular(A: torch.Tensor, B: torch.Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> torch.Tensor:
    """torch.linalg.solve_triangular: X with A @ X = B (``left``; B [..., n, k]) or X @ A = B (B [..., k, n]),
    for A [..., n, n] read through its upper (``upper``) or lower triangle, its diagonal taken as ones
    with ``unitriangular``; the batch dimensions of A and B broadcast. An exact zero on a diagonal that is
    read is a RuntimeError (this reads the diagonals back). A's gradient is torch's, masked to the
    triangle read (without the diagonal when unitriangular). Example:
    ``X = solve_triangular(L, B, upper=False)``.
    """
    return _solve_triangular(A, B, upper=upper, left=left, unitriangular=unitriangular)


def cholesky_solve(B: torch.Tensor, L: torch.Tensor, upper: bool = False) -> torch.Tensor:
    """torch.cholesky_solve (B first): X with A @ X = B for A = L @ L.mT given its lower factor L
    [..., n, n] (or A = U.mT @ U given U, with ``upper``), as two triangular solves, reading only the
    factor's triangle. Its gradient for the factor is torch's masked to that triangle.
    Example: ``alpha = cholesky_solve(y, cholesky(K))``.
    """
    if upper:
        return solve_triangular(L, solve_triangular(L.mT, B, upper=False), upper=True)
    return solve_triangular(L.mT, solve_triangular(L, B, upper=False), upper=True)


def logdet(A: torch.Tensor) -> torch.Tensor:
    """log det A of [..., n, n], shape [...], for symmetric positive definite A, through its Cholesky factor
    (A's lower triangle is read). A matrix that is not positive definite is a RuntimeError. A's gradient
    is torch.logdet's, A⁻¹ (symmetric). Example: ``ld = logdet(K)``.
    """
    return _logdet(A)


def built_with_cuda() -> bool:
    """True when the operators were built with CUDA support (structgrad's CUDA backend and torch's)."""
    return bool(_ops.built_with_cuda())


# ---- fake implementations: shapes and dtypes only, for torch.compile and meta tensors ----------
# Each output has the shape, dtype and (contiguous) layout of the one the kernel returns.

def _check_matrices(op: str, what: str, t: torch.Tensor) -> None:
    torch._check(t.dim() >= 2,
                 lambda: f"{op}: expected {what} to be a matrix or a batch of matrices, got shape {list(t.shape)}")


def _check_square(op: str, what: str, t: torch.Tensor) -> None:
    _check_matrices(op, what, t)
    torch._check(t.shape[-1] == t.shape[-2],
                 lambda: f"{op}: expected {what} to be a square matrix or a batch of them, got shape {list(t.shape)}")


@torch.library.register_fake("structgrad::structured_matmul")
def _structured_matmul_fake(a, b, a_structure, b_structure):
    _check_matrices("structured_matmul", "a", a)
    _check_matrices("structured_matmul", "b", b)
    torch._check(a.shape[-1] == b.shape[-2],
                 lambda: f"structured_matmul: shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied")
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return a.new_empty((*batch, a.shape[-2], b.shape[-1]))


@torch.library.register_fake("structgrad::structured_matmul_backward")
def _structured_matmul_backward_fake(grad, a, b, a_structure, b_structure, output_mask):
    da = a.new_empty(a.shape) if output_mask[0] else a.new_empty((0,))
    db = b.new_empty(b.shape) if output_mask[1] else b.new_empty((0,))
    return da, db


@torch.library.register_fake("structgrad::gram")
def _gram_fake(a, a_structure):
    _check_matrices("gram", "a", a)
    return a.new_empty((*a.shape[:-1], a.shape[-2]))


@torch.library.register_fake("structgrad::gram_backward")
def _gram_backward_fake(grad, a, a_structure):
    return a.new_empty(a.shape)


@torch.library.register_fake("structgrad::cholesky")
def _cholesky_fake(A, upper=False):
    _check_square("cholesky", "A", A)
    return A.new_empty(A.shape)


@torch.library.register_fake("structgrad::cholesky_ex")
def _cholesky_ex_fake(A, upper=False, check_errors=False):
    _check_square("cholesky_ex", "A", A)
    return A.new_empty(A.shape), A.new_empty(A.shape[:-2], dtype=torch.int64)


@torch.library.register_fake("structgrad::cholesky_backward")
def _cholesky_backward_fake(grad, L, upper):
    return L.new_empty(L.shape)


@torch.library.register_fake("structgrad::solve_triangular")
def _solve_triangular_fake(A, B, upper, left=True, unitriangular=False):
    _check_square("solve_triangular", "A", A)
    _check_matrices("solve_triangular", "B", B)
    n = A.shape[-1]
    torch._check((B.shape[-2] if left else B.shape[-1]) == n,
                 lambda: f"solve_triangular: A of shape {list(A.shape)} does not fit B of shape {list(B.shape)}")
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return B.new_empty((*batch, B.shape[-2], B.shape[-1]))


@torch.library.register_fake("structgrad::solve_triangular_backward")
def _solve_triangular_backward_fake(grad, A, X, upper, left, unitriangular, output_mask):
    dA = A.new_empty(A.shape) if output_mask[0] else A.new_empty((0,))
    dB = X.new_empty(X.shape) if output_mask[1] else X.new_empty((0,))
    return dA, dB


@torch.library.register_fake("structgrad::logdet")
def _logdet_fake(A):
    _check_square("logdet", "A", A)
    return A.new_empty(A.shape[:-2])


@torch.library.register_fake("structgrad::logdet_and_factor")
def _logdet_and_factor_fake(A):
    _check_square("logdet", "A", A)
    return A.new_empty(A.shape[:-2]), A.new_empty(A.shape)


@torch.library.register_fake("structgrad::logdet_backward")
def _logdet_backward_fake(grad, L):
    return L.new_empty(L.shape)
