"""structgrad.torch against torch: values in float64, projected gradients, bad input, layouts,
torch.compile, and on CUDA the stream, allocator and TF32 behaviour."""
import math

import pytest
import torch

import structgrad.torch as st

CUDA = torch.cuda.is_available() and st.built_with_cuda()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
SIZES = [1, 2, 3, 31, 64, 65, 127]
PAIRS = [(a, b) for a in st.STRUCTURES for b in st.STRUCTURES]


def read_as(x, structure):
    """The matrix an operand stands for when read through `structure`."""
    if structure == "upper":
        return torch.triu(x)
    if structure == "lower":
        return torch.tril(x)
    if structure == "symmetric":
        u = torch.triu(x)
        return u + torch.triu(x, 1).T
    return x


def project(g, structure):
    """The projection of an unstructured gradient onto `structure`."""
    if structure == "upper":
        return torch.triu(g)
    if structure == "lower":
        return torch.tril(g)
    if structure == "symmetric":
        return (g + g.T) / 2
    return g


def reference(A, B, a, b):
    C = read_as(A, a) @ read_as(B, b)
    return torch.triu(C) if (a, b) == ("upper", "upper") else C


def assert_projected_torch_gradients(A, B, W, a, b, tol):
    """A.grad and B.grad (of sum(W ⊙ product)) against torch's gradients of the same function of
    the matrices the operands stand for, projected onto each operand's structure."""
    Ar = read_as(A.detach(), a).requires_grad_()
    Br = read_as(B.detach(), b).requires_grad_()
    (reference(Ar, Br, a="dense", b="dense") if (a, b) != ("upper", "upper") else torch.triu(Ar @ Br)).mul(W).sum().backward()
    torch.testing.assert_close(A.grad, project(Ar.grad, a), rtol=tol, atol=tol)
    torch.testing.assert_close(B.grad, project(Br.grad, b), rtol=tol, atol=tol)


def garbage_like(n, device, dtype=torch.float64, seed=0):
    """A random matrix whose triangles disagree, so a read outside the structure shows."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=g, dtype=dtype).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("a,b", PAIRS)
@pytest.mark.parametrize("n", SIZES)
def test_values_against_float64_reference(device, a, b, n):
    A, B = garbage_like(n, device, seed=1), garbage_like(n, device, seed=2)
    C = st.structured_matmul(A, B, a=a, b=b)
    assert C.shape == (n, n) and C.dtype == torch.float64 and C.device.type == device
    torch.testing.assert_close(C, reference(A, B, a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("a,b", PAIRS)
def test_float32_values(device, a, b):
    A, B = garbage_like(100, device, torch.float32, 3), garbage_like(100, device, torch.float32, 4)
    with allow_tf32(False):
        C = st.structured_matmul(A, B, a=a, b=b)
    want = reference(A.double(), B.double(), a, b)
    assert C.dtype == torch.float32
    torch.testing.assert_close(C.double(), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_rectangular_dense_operands(device):
    A, B = torch.randn(7, 5, dtype=torch.float64, device=device), torch.randn(5, 9, dtype=torch.float64, device=device)
    torch.testing.assert_close(st.structured_matmul(A, B), A @ B, rtol=1e-12, atol=1e-12)
    U = torch.randn(5, 5, dtype=torch.float64, device=device)
    torch.testing.assert_close(st.structured_matmul(U, B, a="upper"), torch.triu(U) @ B, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(st.gram(A), A @ A.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_named_products(device):
    A, B = garbage_like(33, device, seed=5), garbage_like(33, device, seed=6)
    torch.testing.assert_close(st.triu_matmul(A, B), torch.triu(torch.triu(A) @ torch.triu(B)))
    S, T = read_as(A, "symmetric"), read_as(B, "symmetric")
    torch.testing.assert_close(st.sym_matmul(A, B), S @ T)
    assert torch.equal(torch.tril(st.triu_matmul(A, B), -1), torch.zeros(33, 33, dtype=torch.float64, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("a,b", PAIRS)
def test_gradients_are_torch_gradients_projected(device, a, b):
    n = 37
    A = garbage_like(n, device, seed=7).requires_grad_()
    B = garbage_like(n, device, seed=8).requires_grad_()
    W = garbage_like(n, device, seed=9)
    (st.structured_matmul(A, B, a=a, b=b) * W).sum().backward()
    assert_projected_torch_gradients(A, B, W, a, b, tol=1e-11)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("a", st.STRUCTURES)
def test_gram_values_and_gradient(device, a):
    n = 29
    A = garbage_like(n, device, seed=10).requires_grad_()
    W = garbage_like(n, device, seed=11)  # not symmetric: every entry of the output counts
    K = st.gram(A, a=a)
    Ar = read_as(A.detach(), a).requires_grad_()
    Kr = Ar @ Ar.T
    torch.testing.assert_close(K, Kr.detach(), rtol=1e-12, atol=1e-12)
    (K * W).sum().backward()
    (Kr * W).sum().backward()
    torch.testing.assert_close(A.grad, project(Ar.grad, a), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("device", DEVICES)
def test_only_needed_gradients(device):
    A = garbage_like(20, device, seed=12).requires_grad_()
    B = garbage_like(20, device, seed=13)
    st.triu_matmul(A, B).sum().backward()
    assert A.grad is not None and B.grad is None
    torch.testing.assert_close(A.grad, torch.triu(torch.triu(torch.ones_like(B)) @ torch.triu(B).T))


@pytest.mark.parametrize("device", DEVICES)
def test_strided_inputs_are_read_as_their_values(device):
    base = torch.randn(40, 60, dtype=torch.float64, device=device)
    A = base[:, :40].T           # transposed, non-contiguous
    B = base[::2, 10:50][:20].T  # sliced with a row step, then transposed: [40, 20]
    assert not A.is_contiguous() and not B.is_contiguous()
    torch.testing.assert_close(st.structured_matmul(A, B, a="upper"), torch.triu(A) @ B, rtol=1e-12, atol=1e-12)
    E = torch.randn(3, 50, 50, dtype=torch.float64, device=device)[1]  # storage offset
    torch.testing.assert_close(st.sym_matmul(E, E), read_as(E, "symmetric") @ read_as(E, "symmetric"))


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_is_a_clear_error(device):
    A = torch.randn(4, 4, device=device)
    with pytest.raises(RuntimeError, match=r"structured_matmul: expected a to be a matrix or a batch of matrices, "
                                           r"got shape \[4\]"):
        st.structured_matmul(A[0], A)
    with pytest.raises(RuntimeError, match=r"structured_matmul: shapes \[4, 4\] and \[3, 4\] cannot be multiplied"):
        st.structured_matmul(A, torch.randn(3, 4, device=device))
    with pytest.raises(RuntimeError, match=r"structured_matmul: shapes \[2, 4, 4\] and \[3, 4, 4\] cannot be "
                                           r"multiplied \(their batch dimensions do not broadcast\)"):
        st.structured_matmul(torch.randn(2, 4, 4, device=device), torch.randn(3, 4, 4, device=device))
    with pytest.raises(RuntimeError, match=r"structured_matmul: matmul_out: a read as UpperTriangular must be square"):
        st.structured_matmul(torch.randn(4, 3, device=device), torch.randn(3, 3, device=device), a="upper")
    with pytest.raises(RuntimeError, match=r"structured_matmul: matmul_out: expected every tensor of dtype float32, "
                                           r"got b of dtype float64"):
        st.structured_matmul(A, A.double())
    with pytest.raises(RuntimeError, match=r"structured_matmul: expected float32 or float64 tensors, got Int"):
        st.structured_matmul(A.int(), A.int())
    with pytest.raises(ValueError, match=r"unknown structure 'banded' for a"):
        st.structured_matmul(A, A, a="banded")
    with pytest.raises(RuntimeError, match=r"unknown structure 'upper ' \(expected 'dense', 'upper', 'lower' or 'symmetric'\)"):
        torch.ops.structgrad.structured_matmul(A, A, "upper ", "dense")
    with pytest.raises(ValueError, match=r"gram: unknown structure 'banded' for a"):
        st.gram(A, a="banded")
    with pytest.raises(RuntimeError, match=r"gram: expected a to be a matrix or a batch of matrices"):
        st.gram(torch.randn(2, device=device))
    grad = torch.randn(4, 5, device=device)
    with pytest.raises(RuntimeError, match=r"structured_matmul_backward: matmul_backward_out: expected grad of shape "
                                           r"\[4, 4\], got \[4, 5\]"):
        torch.ops.structgrad.structured_matmul_backward(grad, A, A, "dense", "dense", [True, True])


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a CUDA build of structgrad")
def test_mixed_devices_are_a_clear_error():
    A = torch.randn(4, 4, device="cuda")
    with pytest.raises(RuntimeError, match=r"structured_matmul: matmul_out: expected every tensor on cuda:0, got b on cpu"):
        st.structured_matmul(A, A.cpu())


@pytest.mark.parametrize("device", DEVICES)
def test_second_order_gradients_are_refused(device):
    A = garbage_like(5, device, seed=30).requires_grad_()
    B = garbage_like(5, device, seed=31)
    (dA,) = torch.autograd.grad(st.triu_matmul(A, B).sum(), A)  # first order: fine
    assert not dA.requires_grad
    with pytest.raises(RuntimeError, match=r"structured_matmul: second-order gradients"):
        torch.autograd.grad(st.triu_matmul(A, B).sum(), A, create_graph=True)
    with pytest.raises(RuntimeError, match=r"gram: second-order gradients"):
        torch.autograd.grad(st.gram(A).sum(), A, create_graph=True)


def test_gradcheck_inside_the_structure():
    """The recipe of docs/pytorch.md: perturb inside the structure by checking f(sym(X))."""
    torch.manual_seed(0)
    X = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)
    T = torch.randn(6, 6, dtype=torch.float64)
    T = (T + T.T) / 2
    f = lambda X: st.sym_matmul((X + X.T) / 2, T)  # noqa: E731
    assert torch.autograd.gradcheck(f, (X,))
    g = lambda X: st.triu_matmul(torch.triu(X), T)  # noqa: E731
    assert torch.autograd.gradcheck(g, (X,))


def test_plain_gradcheck_disagrees_for_symmetric_inputs():
    """Perturbing one entry of S leaves the symmetric subspace: the numerical gradient is then of the
    upper-triangle reading (s_ij counted twice), not the projection the op returns."""
    torch.manual_seed(0)
    S = torch.randn(5, 5, dtype=torch.float64)
    S = ((S + S.T) / 2).requires_grad_()
    T = torch.randn(5, 5, dtype=torch.float64)
    assert not torch.autograd.gradcheck(lambda S: st.sym_matmul(S, T), (S,), raise_exception=False)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_traces_through_the_ops(device):
    A = garbage_like(16, device, seed=14).requires_grad_()
    B = garbage_like(16, device, seed=15).requires_grad_()

    def loss(A, B):
        return (st.triu_matmul(A, B) + st.gram(A, a="upper")).square().sum()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    value = compiled(A, B)
    value.backward()
    dA, dB = A.grad.clone(), B.grad.clone()
    A.grad = B.grad = None
    eager = loss(A, B)
    eager.backward()
    torch.testing.assert_close(value, eager)
    torch.testing.assert_close(dA, A.grad)
    torch.testing.assert_close(dB, B.grad)


def test_meta_tensors_give_shapes():
    A = torch.empty(8, 5, device="meta")
    B = torch.empty(5, 3, device="meta")
    assert st.structured_matmul(A, B).shape == (8, 3)
    assert st.gram(A).shape == (8, 8)
    assert st.structured_matmul(torch.empty(2, 1, 8, 5, device="meta"), torch.empty(3, 5, 3, device="meta")).shape == (2, 3, 8, 3)
    assert st.gram(torch.empty(4, 8, 5, device="meta")).shape == (4, 8, 8)


# ---- batches: torch.matmul's broadcasting ---------------------------------------------------------

def batch_read_as(x, structure):
    """read_as for a batch [..., n, n]."""
    if structure == "upper":
        return torch.triu(x)
    if structure == "lower":
        return torch.tril(x)
    if structure == "symmetric":
        return torch.triu(x) + torch.triu(x, 1).mT
    return x


def batch_project(g, structure):
    """project for a batch [..., n, n]."""
    if structure == "upper":
        return torch.triu(g)
    if structure == "lower":
        return torch.tril(g)
    if structure == "symmetric":
        return (g + g.mT) / 2
    return g


# (a's shape, b's shape, a's structure, b's structure): one batch shape; a Dense batch against one
# matrix (folded into one product); a matrix against a batch and batches that broadcast (expanded).
BATCHED = [
    ((3, 5, 5), (3, 5, 5), a, b) for a in st.STRUCTURES for b in st.STRUCTURES
] + [
    ((2, 1, 4, 4), (3, 4, 2), "dense", "dense"),
    ((2, 1, 4, 4), (3, 4, 2), "upper", "dense"),
    ((3, 4, 5), (5, 5), "dense", "upper"),
    ((3, 4, 5), (1, 5, 5), "dense", "symmetric"),
    ((2, 3, 4, 5), (5, 2), "dense", "dense"),
    ((4, 4), (3, 4, 2), "lower", "dense"),
    ((5, 5), (2, 3, 5, 5), "symmetric", "upper"),
    ((0, 4, 4), (4, 3), "dense", "dense"),
    ((0, 4, 4), (0, 4, 4), "upper", "upper"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("a_shape,b_shape,a,b", BATCHED)
def test_batched_products_broadcast_like_matmul(device, a_shape, b_shape, a, b):
    g = torch.Generator().manual_seed(40)
    A = torch.randn(a_shape, generator=g, dtype=torch.float64).to(device).requires_grad_()
    B = torch.randn(b_shape, generator=g, dtype=torch.float64).to(device).requires_grad_()
    C = st.structured_matmul(A, B, a=a, b=b)
    Ar = batch_read_as(A.detach(), a).requires_grad_()
    Br = batch_read_as(B.detach(), b).requires_grad_()
    Cr = Ar @ Br
    if (a, b) == ("upper", "upper"):
        Cr = torch.triu(Cr)
    assert C.shape == Cr.shape
    torch.testing.assert_close(C, Cr.detach(), rtol=1e-12, atol=1e-12)
    W = torch.randn(Cr.shape, generator=g, dtype=torch.float64).to(device)
    (C * W).sum().backward()
    (Cr * W).sum().backward()
    assert A.grad.shape == A.shape and B.grad.shape == B.shape
    torch.testing.assert_close(A.grad, batch_project(Ar.grad, a), rtol=1e-11, atol=1e-11)
    torch.testing.assert_close(B.grad, batch_project(Br.grad, b), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("a", st.STRUCTURES)
def test_batched_gram(device, a):
    g = torch.Generator().manual_seed(41)
    shape = (5, 5) if a != "dense" else (4, 7)
    A = torch.randn((2, 3, *shape), generator=g, dtype=torch.float64).to(device).requires_grad_()
    K = st.gram(A, a=a)
    Ar = batch_read_as(A.detach(), a).requires_grad_()
    Kr = Ar @ Ar.mT
    torch.testing.assert_close(K, Kr.detach(), rtol=1e-12, atol=1e-12)
    W = torch.randn(Kr.shape, generator=g, dtype=torch.float64).to(device)
    (K * W).sum().backward()
    (Kr * W).sum().backward()
    torch.testing.assert_close(A.grad, batch_project(Ar.grad, a), rtol=1e-11, atol=1e-11)


class allow_tf32:
    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = self.on

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32 = self.before


def poison_cache(n, device):
    """Leaves NaN-filled blocks of n×n float32/float64 in torch's caching allocator, so that the
    next outputs of that size start as NaN."""
    for dtype in (torch.float32, torch.float64):
        for _ in range(4):
            torch.full((n, n), math.nan, dtype=dtype, device=device)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a CUDA build of structgrad")
@pytest.mark.parametrize("a,b", PAIRS)
@pytest.mark.parametrize("n", [17, 255, 1000])
def test_cuda_outputs_poisoned_before_the_kernels(a, b, n):
    A, B = garbage_like(n, "cuda", seed=16), garbage_like(n, "cuda", seed=17)
    poison_cache(n, "cuda")
    C = st.structured_matmul(A, B, a=a, b=b)
    torch.testing.assert_close(C, reference(A, B, a, b), rtol=1e-11, atol=1e-11)
    A.requires_grad_()
    B.requires_grad_()
    W = garbage_like(n, "cuda", seed=18)
    poison_cache(n, "cuda")
    (st.structured_matmul(A, B, a=a, b=b) * W).sum().backward()
    assert_projected_torch_gradients(A, B, W, a, b, tol=1e-9)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a CUDA build of structgrad")
def test_cuda_work_runs_on_torchs_current_stream():
    n = 1024
    A = garbage_like(n, "cuda", torch.float32, 19)
    B = garbage_like(n, "cuda", torch.float32, 20)
    want = reference(2 * A.double(), B.double(), "upper", "upper")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        poison_cache(n, "cuda")
        torch.cuda._sleep(50_000_000)  # holds the side stream for tens of milliseconds
        A2 = A * 2                     # written only after the sleep, on the side stream
        with allow_tf32(False):
            C = st.triu_matmul(A2, B)   # must wait for A2: it reads NaN if queued elsewhere
    side.synchronize()
    torch.testing.assert_close(C.double(), want, rtol=1e-5, atol=1e-3)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a CUDA build of structgrad")
def test_cuda_temporaries_come_from_torchs_allocator():
    n = 512
    S = garbage_like(n, "cuda", torch.float32, 21).requires_grad_()
    T = garbage_like(n, "cuda", torch.float32, 22)

    def allocations(structure):
        S.grad = None
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        st.structured_matmul(S, T, a=structure).sum().backward()
        return torch.cuda.memory_stats()["allocation.all.allocated"] - before

    # The same torch-side tensors either way; the symmetric product's mirrored copy and its
    # gradient's full product are structgrad's temporaries, taken from torch's allocator.
    assert allocations("symmetric") > allocations("dense")


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a CUDA build of structgrad")
def test_tf32_follows_torchs_setting():
    n = 512
    A = garbage_like(n, "cuda", torch.float32, 23)
    B = garbage_like(n, "cuda", torch.float32, 24)
    want = reference(A.double(), B.double(), "upper", "upper")
    scale = want.abs().max()
    with allow_tf32(False):
        exact = (st.triu_matmul(A, B).double() - want).abs().max() / scale
    with allow_tf32(True):
        tf32 = (st.triu_matmul(A, B).double() - want).abs().max() / scale
    assert exact < 1e-5
    assert 1e-5 < tf32 < 5e-3
