"""structgrad.torch's linear algebra against torch.linalg: values and gradients on batches (broadcast,
empty), the triangle each op reads, cholesky_ex's info codes, errors, gradcheck in float64 on inputs
parametrized inside their structure, torch.compile, and on CUDA torch's current stream."""
import math

import pytest
import torch

import structgrad.torch as st

CUDA = torch.cuda.is_available() and st.built_with_cuda()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
SIZES = [1, 2, 17, 33]
F64 = dict(rtol=1e-10, atol=1e-10)


def generator(seed):
    return torch.Generator().manual_seed(seed)


def spd(batch, n, device, dtype=torch.float64, seed=0):
    """Symmetric positive definite matrices [*batch, n, n], X·Xᵀ/n + I, exactly symmetric."""
    x = torch.randn(*batch, n, n, generator=generator(seed), dtype=torch.float64)
    a = x @ x.mT / n + torch.eye(n, dtype=torch.float64)
    return ((a + a.mT) / 2).to(device=device, dtype=dtype)


def with_garbage(a, keep_lower, seed=1):
    """a with random values in the triangle an op must not read (above the diagonal when it reads the
    lower triangle, below it otherwise), so that a read of the wrong triangle shows."""
    g = torch.randn(a.shape, generator=generator(seed), dtype=torch.float64).to(a.device, a.dtype)
    return torch.tril(a) + torch.triu(g, 1) if keep_lower else torch.triu(a) + torch.tril(g, -1)


def triangular(batch, n, device, upper, dtype=torch.float64, seed=2):
    """Well-conditioned triangular matrices [*batch, n, n] with garbage in the other triangle."""
    x = torch.randn(*batch, n, n, generator=generator(seed), dtype=torch.float64) / math.sqrt(n)
    x = x + torch.diag_embed(2 + torch.rand(*batch, n, generator=generator(seed + 1), dtype=torch.float64))
    return x.to(device=device, dtype=dtype)


def rhs_shape(batch, n, k, left):
    return (*batch, n, k) if left else (*batch, k, n)


# ---- cholesky and cholesky_ex ---------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_values_read_one_triangle(device, batch, n, upper):
    A = with_garbage(spd(batch, n, device, seed=n), keep_lower=not upper)
    L = st.cholesky(A, upper=upper)
    assert L.shape == A.shape and L.dtype == A.dtype and L.device == A.device and L.is_contiguous()
    torch.testing.assert_close(L, torch.linalg.cholesky(A, upper=upper), **F64)
    L_ex, info = st.cholesky_ex(A, upper=upper)
    torch.testing.assert_close(L_ex, L, rtol=0, atol=0)
    assert info.dtype == torch.int64 and info.shape == batch and info.device == A.device
    assert not info.any()


@pytest.mark.parametrize("device", DEVICES)
def test_cholesky_float32(device):
    A = spd((4,), 100, device, torch.float32, seed=3)
    torch.testing.assert_close(st.cholesky(A).double(), torch.linalg.cholesky(A.double()), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_gradient_is_torchs_symmetric_one(device, upper):
    A0 = with_garbage(spd((3,), 5, device, seed=4), keep_lower=not upper)
    W = torch.randn(3, 5, 5, generator=generator(5), dtype=torch.float64).to(device)
    A = A0.clone().requires_grad_()
    (st.cholesky(A, upper=upper) * W).sum().backward()
    Ar = A0.clone().requires_grad_()
    (torch.linalg.cholesky(Ar, upper=upper) * W).sum().backward()
    torch.testing.assert_close(A.grad, Ar.grad, **F64)
    torch.testing.assert_close(A.grad, A.grad.mT, rtol=0, atol=1e-12)  # symmetric, as torch's
    A.grad = None
    (st.cholesky_ex(A, upper=upper).L * W).sum().backward()
    torch.testing.assert_close(A.grad, Ar.grad, **F64)


@pytest.mark.parametrize("device", DEVICES)
def test_cholesky_ex_flags_indefinite_and_nan_matrices(device):
    A = spd((2, 3), 4, device, seed=6)
    A[0, 1] = torch.diag(torch.tensor([1.0, 1.0, -1.0, 1.0], dtype=torch.float64, device=device))
    A[1, 2, 3, 1] = math.nan  # in the lower triangle, which is read
    L, info = st.cholesky_ex(A)
    assert info.shape == (2, 3) and info.dtype == torch.int64 and info.device == A.device
    assert info[0, 1].item() == 3  # the leading minor of order 3 is the first that is not positive definite
    assert info[1, 2].item() != 0
    good = torch.ones(2, 3, dtype=torch.bool, device=device)
    good[0, 1] = good[1, 2] = False
    assert not info[good].any()
    torch.testing.assert_close(L[good], torch.linalg.cholesky(A[good]), **F64)


@pytest.mark.parametrize("device", DEVICES)
def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_an_error(device):
    A = spd((3,), 4, device, seed=7)
    A[1, 2, 2] = -5.0
    with pytest.raises(RuntimeError, match=r"cholesky: .*not positive definite"):
        st.cholesky(A)
    with pytest.raises(RuntimeError, match=r"cholesky_ex: .*not positive definite"):
        st.cholesky_ex(A, check_errors=True)
    A[1, 2, 2] = math.nan
    with pytest.raises(RuntimeError, match=r"cholesky: .*NaN"):
        st.cholesky(A)
    with pytest.raises(RuntimeError, match=r"logdet: .*(not positive definite|NaN)"):
        st.logdet(A)
    with pytest.raises(RuntimeError, match=r"cholesky: expected A to be a square matrix or a batch of them, "
                                           r"got shape \[3, 4\]"):
        st.cholesky(torch.randn(3, 4, dtype=torch.float64, device=device))
    with pytest.raises(RuntimeError, match=r"cholesky: expected float32 or float64 tensors, got Int"):
        st.cholesky(torch.eye(3, dtype=torch.int32, device=device))


# ---- solve_triangular -----------------------------------------------------------------------------

SOLVES = [(upper, left, unit) for upper in (False, True) for left in (True, False) for unit in (False, True)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("upper,left,unit", SOLVES)
@pytest.mark.parametrize("n", SIZES)
def test_solve_triangular_values_and_gradients(device, upper, left, unit, n):
    A0 = triangular((3,), n, device, upper, seed=n)
    B0 = torch.randn(rhs_shape((3,), n, 2, left), generator=generator(8), dtype=torch.float64).to(device)
    A, B = A0.clone().requires_grad_(), B0.clone().requires_grad_()
    X = st.solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)
    Ar, Br = A0.clone().requires_grad_(), B0.clone().requires_grad_()
    Xr = torch.linalg.solve_triangular(Ar, Br, upper=upper, left=left, unitriangular=unit)
    torch.testing.assert_close(X, Xr.detach(), **F64)
    W = torch.randn(Xr.shape, generator=generator(9), dtype=torch.float64).to(device)
    (X * W).sum().backward()
    (Xr * W).sum().backward()
    torch.testing.assert_close(A.grad, Ar.grad, **F64)  # torch's, in the triangle read
    torch.testing.assert_close(B.grad, Br.grad, **F64)
    outside = torch.tril(A.grad, -1) if upper else torch.triu(A.grad, 1)
    assert not outside.any()
    if unit:
        assert not torch.diagonal(A.grad, dim1=-2, dim2=-1).any()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_batches_broadcast(device, left):
    A0 = triangular((2, 1), 4, device, upper=False, seed=10)
    B0 = torch.randn(rhs_shape((3,), 4, 2, left), generator=generator(11), dtype=torch.float64).to(device)
    A, B = A0.clone().requires_grad_(), B0.clone().requires_grad_()
    X = st.solve_triangular(A, B, upper=False, left=left)
    Ar, Br = A0.clone().requires_grad_(), B0.clone().requires_grad_()
    Xr = torch.linalg.solve_triangular(Ar, Br, upper=False, left=left)
    assert X.shape == Xr.shape == rhs_shape((2, 3), 4, 2, left)
    torch.testing.assert_close(X, Xr.detach(), **F64)
    W = torch.randn(Xr.shape, generator=generator(12), dtype=torch.float64).to(device)
    (X * W).sum().backward()
    (Xr * W).sum().backward()
    assert A.grad.shape == A.shape and B.grad.shape == B.shape
    torch.testing.assert_close(A.grad, Ar.grad, **F64)
    torch.testing.assert_close(B.grad, Br.grad, **F64)
    # One matrix for a batch of right-hand sides.
    X1 = st.solve_triangular(A0[0, 0], B0, upper=False, left=left)
    torch.testing.assert_close(X1, torch.linalg.solve_triangular(A0[0, 0], B0, upper=False, left=left), **F64)


@pytest.mark.parametrize("device", DEVICES)
def test_batches_read_through_strided_views(device):
    """Every other matrix of a batch, and permuted batch dimensions: values and gradients as torch's."""
    S0 = spd((6,), 5, device, seed=20)
    W = torch.randn(3, 5, 5, generator=generator(21), dtype=torch.float64).to(device)
    S, Sr = S0.clone().requires_grad_(), S0.clone().requires_grad_()
    assert not S[::2].is_contiguous()
    L, Lr = st.cholesky(S[::2]), torch.linalg.cholesky(Sr[::2])
    torch.testing.assert_close(L, Lr.detach(), **F64)
    (L * W).sum().backward()
    (Lr * W).sum().backward()
    torch.testing.assert_close(S.grad, Sr.grad, **F64)
    A0 = triangular((3, 2), 5, device, upper=True, seed=22)
    B0 = torch.randn(2, 5, 3, 4, generator=generator(23), dtype=torch.float64).to(device)
    A, Ar = A0.clone().requires_grad_(), A0.clone().requires_grad_()
    B, Br = B0.clone().requires_grad_(), B0.clone().requires_grad_()
    # [2, 3, 5, 5] and [2, 3, 5, 4], neither contiguous.
    X = st.solve_triangular(A.transpose(0, 1), B.permute(0, 2, 1, 3), upper=True)
    Xr = torch.linalg.solve_triangular(Ar.transpose(0, 1), Br.permute(0, 2, 1, 3), upper=True)
    torch.testing.assert_close(X, Xr.detach(), **F64)
    V = torch.randn(Xr.shape, generator=generator(24), dtype=torch.float64).to(device)
    (X * V).sum().backward()
    (Xr * V).sum().backward()
    torch.testing.assert_close(A.grad, Ar.grad, **F64)
    torch.testing.assert_close(B.grad, Br.grad, **F64)


@pytest.mark.parametrize("device", DEVICES)
def test_solve_triangular_float32(device):
    A = triangular((2,), 100, device, upper=True, dtype=torch.float32, seed=13)
    B = torch.randn(2, 100, 7, generator=generator(14)).to(device)
    want = torch.linalg.solve_triangular(A.double(), B.double(), upper=True)
    torch.testing.assert_close(st.solve_triangular(A, B, upper=True).double(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_solve_triangular_bad_input(device):
    A = triangular((), 4, device, upper=True)
    with pytest.raises(RuntimeError, match=r"solve_triangular: expected A to be a square matrix or a batch of them"):
        st.solve_triangular(A[:3], A, upper=True)
    with pytest.raises(RuntimeError, match=r"solve_triangular: .*"):
        st.solve_triangular(A, torch.randn(3, 2, dtype=torch.float64, device=device), upper=True)
    singular = A.clone()
    singular[2, 2] = 0
    with pytest.raises(RuntimeError, match=r"solve_triangular: .*zero on its diagonal"):
        st.solve_triangular(singular, A, upper=True)
    # The diagonal a unit-triangular solve does not read may hold anything.
    torch.testing.assert_close(st.solve_triangular(singular, A, upper=True, unitriangular=True),
                               torch.linalg.solve_triangular(singular, A, upper=True, unitriangular=True), **F64)


# ---- cholesky_solve and logdet -------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_is_torchs_with_the_factor_gradient_masked(device, upper):
    F0 = torch.linalg.cholesky(spd((3,), 6, device, seed=15), upper=upper)
    B0 = torch.randn(3, 6, 2, generator=generator(17), dtype=torch.float64).to(device)
    # Only the factor's triangle is read, as torch reads it.
    garbage = with_garbage(F0, keep_lower=not upper, seed=16)
    torch.testing.assert_close(st.cholesky_solve(B0, garbage, upper=upper),
                               torch.cholesky_solve(B0, garbage, upper=upper), **F64)
    F, B = F0.clone().requires_grad_(), B0.clone().requires_grad_()
    X = st.cholesky_solve(B, F, upper=upper)
    Fr, Br = F0.clone().requires_grad_(), B0.clone().requires_grad_()
    Xr = torch.cholesky_solve(Br, Fr, upper=upper)
    torch.testing.assert_close(X, Xr.detach(), **F64)
    W = torch.randn(Xr.shape, generator=generator(18), dtype=torch.float64).to(device)
    (X * W).sum().backward()
    (Xr * W).sum().backward()
    torch.testing.assert_close(B.grad, Br.grad, **F64)
    # torch's gradient for the factor fills both triangles though only one is read; ours is its mask.
    torch.testing.assert_close(F.grad, torch.triu(Fr.grad) if upper else torch.tril(Fr.grad), **F64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_logdet_values_and_gradient(device, batch):
    A0 = spd(batch, 7, device, seed=19)
    A = A0.clone().requires_grad_()
    ld = st.logdet(A)
    Ar = A0.clone().requires_grad_()
    ldr = torch.logdet(Ar)
    assert ld.shape == batch
    torch.testing.assert_close(ld, ldr.detach(), **F64)
    w = torch.randn(batch, generator=generator(20), dtype=torch.float64).to(device)
    (ld * w).sum().backward()
    (ldr * w).sum().backward()
    torch.testing.assert_close(A.grad, Ar.grad, **F64)  # w·A⁻¹, symmetric
    with torch.no_grad():
        torch.testing.assert_close(st.logdet(A0), ldr.detach(), **F64)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batches(device):
    A = spd((0,), 4, device).requires_grad_()
    L, info = st.cholesky_ex(A)
    assert L.shape == (0, 4, 4) and info.shape == (0,) and info.dtype == torch.int64
    assert st.cholesky(A).shape == (0, 4, 4)
    ld = st.logdet(A)
    assert ld.shape == (0,)
    B = torch.randn(0, 4, 2, dtype=torch.float64, device=device, requires_grad=True)
    X = st.solve_triangular(A, B, upper=False)
    assert X.shape == (0, 4, 2)
    (L.sum() + ld.sum() + X.sum()).backward()
    assert A.grad.shape == A.shape and B.grad.shape == B.shape
    assert st.cholesky_solve(B, L).shape == (0, 4, 2)


# ---- gradcheck inside the structure ---------------------------------------------------------------

def test_gradcheck():
    """Each input is a function of unconstrained ones that stays inside the structure the op reads: a
    symmetric S = X·Xᵀ + n·I, a triangular T = tril(X) + c·I, so that every perturbation is one the op
    sees (docs/pytorch.md)."""
    torch.manual_seed(0)
    n = 4
    eye = torch.eye(n, dtype=torch.float64)
    X = torch.randn(2, n, n, dtype=torch.float64, requires_grad=True)
    B = torch.randn(2, n, 3, dtype=torch.float64, requires_grad=True)

    def spd_of(X):
        return X @ X.mT + n * eye

    checks = [
        (lambda X: st.cholesky(spd_of(X)), (X,)),
        (lambda X: st.cholesky(spd_of(X), upper=True), (X,)),
        (lambda X: st.cholesky_ex(spd_of(X)).L, (X,)),
        (lambda X: st.logdet(spd_of(X)), (X,)),
        (lambda X, B: st.solve_triangular(torch.tril(X) + 3 * eye, B, upper=False), (X, B)),
        (lambda X, B: st.solve_triangular(torch.triu(X) + 3 * eye, B.mT, upper=True, left=False), (X, B)),
        (lambda X, B: st.solve_triangular(torch.tril(X), B, upper=False, unitriangular=True), (X, B)),
        (lambda X, B: st.cholesky_solve(B, torch.tril(X) + 4 * eye), (X, B)),
        (lambda X, B: st.cholesky_solve(B, torch.triu(X) + 4 * eye, upper=True), (X, B)),
        # Broadcast batches: A [2, 1, n, n] against B [3, n, 3].
        (lambda X, B: st.solve_triangular(torch.tril(X) + 3 * eye, B, upper=False),
         (X[:, None].detach().requires_grad_(), torch.randn(3, n, 3, dtype=torch.float64, requires_grad=True))),
    ]
    for f, inputs in checks:
        assert torch.autograd.gradcheck(f, inputs)


@pytest.mark.parametrize("device", DEVICES)
def test_second_order_gradients_are_refused(device):
    A = spd((), 3, device).requires_grad_()
    with pytest.raises(RuntimeError, match=r"cholesky: second-order gradients"):
        torch.autograd.grad(st.cholesky(A).sum(), A, create_graph=True)
    with pytest.raises(RuntimeError, match=r"logdet: second-order gradients"):
        torch.autograd.grad(st.logdet(A), A, create_graph=True)


# ---- torch.compile and meta tensors ---------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_traces_through_the_linalg(device):
    X = torch.randn(2, 5, 5, generator=generator(21), dtype=torch.float64).to(device).requires_grad_()
    Y = torch.randn(2, 5, 3, generator=generator(22), dtype=torch.float64).to(device).requires_grad_()

    def loss(X, Y):
        S = X @ X.mT + 5 * torch.eye(5, dtype=X.dtype, device=X.device)
        L, info = st.cholesky_ex(S)
        alpha = st.cholesky_solve(Y, L)
        return (Y * alpha).sum() + st.logdet(S).sum() + st.solve_triangular(L, Y, upper=False).square().sum() + info.sum()

    compiled = torch.compile(loss, backend="aot_eager", fullgraph=True)
    value = compiled(X, Y)
    value.backward()
    dX, dY = X.grad.clone(), Y.grad.clone()
    X.grad = Y.grad = None
    eager = loss(X, Y)
    eager.backward()
    torch.testing.assert_close(value, eager)
    torch.testing.assert_close(dX, X.grad)
    torch.testing.assert_close(dY, Y.grad)


def test_meta_tensors_give_shapes():
    A = torch.empty(2, 1, 4, 4, device="meta")
    B = torch.empty(3, 4, 5, device="meta")
    assert st.cholesky(A).shape == (2, 1, 4, 4)
    L, info = st.cholesky_ex(A)
    assert L.shape == (2, 1, 4, 4) and info.shape == (2, 1) and info.dtype == torch.int64
    assert st.solve_triangular(A, B, upper=True).shape == (2, 3, 4, 5)
    assert st.solve_triangular(A, B.mT, upper=True, left=False).shape == (2, 3, 5, 4)
    assert st.logdet(A).shape == (2, 1)


# ---- CUDA: torch's stream ------------------------------------------------------------------------

@pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a CUDA build of structgrad")
def test_cuda_linalg_runs_on_torchs_current_stream():
    A = spd((64,), 64, "cuda", torch.float32, seed=23)
    want = torch.linalg.cholesky(2 * A)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # holds the side stream for tens of milliseconds
        A2 = A * 2                     # written only after the sleep, on the side stream
        L, info = st.cholesky_ex(A2)   # must wait for A2
        X = st.solve_triangular(L, A2, upper=False)
    side.synchronize()
    torch.testing.assert_close(L, want, rtol=1e-4, atol=1e-4)
    assert not info.any()
    torch.testing.assert_close(X, want.mT, rtol=1e-3, atol=1e-3)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a CUDA build of structgrad")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_two_streams_at_once_give_the_results_of_one(dtype):
    """Products of one shape and of several, factorizations, solves and their gradients, queued on two
    streams with nothing ordering them (no wait_stream between them), equal one stream's bit for bit."""
    g = generator(31)
    U1 = torch.triu(torch.randn(768, 768, generator=g, dtype=torch.float64)).to("cuda", dtype)
    U2 = torch.triu(torch.randn(768, 768, generator=g, dtype=torch.float64)).to("cuda", dtype)
    W = torch.randn(96, 8192, generator=g, dtype=torch.float64).to("cuda", dtype)
    S = spd((), 700, "cuda", dtype, seed=32)
    Sb = spd((256,), 32, "cuda", dtype, seed=33)
    B = torch.randn(700, 128, generator=g, dtype=torch.float64).to("cuda", dtype)

    def run():
        leaves = [t.detach().clone().requires_grad_() for t in (U1, U2, W, S, Sb, B)]
        u1, u2, w, s, sb, b = leaves
        c = st.triu_matmul(u1, u2)
        d = st.structured_matmul(w, w.mT)
        L = st.cholesky(s)
        X = st.solve_triangular(L, b, upper=False)
        Lb, _ = st.cholesky_ex(sb)
        loss = c.square().sum() + d.square().sum() + X.square().sum() + st.logdet(s) + Lb.square().sum()
        loss.backward()
        return [c, d, L, X, Lb] + [t.grad for t in leaves]

    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        two_streams_match_one(run)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32


def two_streams_match_one(run):
    torch.cuda.synchronize()
    want = [t.detach().clone() for t in run()]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())  # the inputs are ready; nothing orders a and b
    got = [None, None]
    for _ in range(3):
        for i, s in enumerate(streams):
            with torch.cuda.stream(s):
                got[i] = run()
    for s in streams:
        s.synchronize()
    for i in range(2):
        for k, (a, b) in enumerate(zip(got[i], want)):
            assert torch.equal(a, b), f"stream {i}, result {k}"
