"""Torch references for the GPU tests of collgen.torch, and the data they use.

Exact where collgen promises bits (sums in f32 in group-rank order, the
gathered rows, residual_out), within the kernels' error bound where it
computes an RMSNorm (one output ulp against a float64 reference for
bf16/f16, 64 ulps for f32; one e4m3 code for FP8), as
src/support/reference.h states for the C tests.
"""

import hashlib

import torch

# Relative spacing of one ulp of each dtype (and the f32 bound of 64 ulps).
_REL_TOL = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10, torch.float32: 64 * 2.0 ** -23}


def inputs(seed, nranks, shape, dtype, device="cuda"):
    """Every rank's input for one case: fresh random data, the same on
    every process for the same seed (so each process can compute the
    reference of the whole group)."""
    g = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)
            for _ in range(nranks)]


def bit_inputs(seed, nranks, shape, dtype, device="cuda"):
    """Every rank's input of a bits-moving op: random bytes viewed as
    dtype (every bit pattern; bool as 0/1), the same for the same seed."""
    g = torch.Generator(device=device).manual_seed(seed)
    if dtype is torch.bool:
        return [torch.randint(0, 2, shape, generator=g, device=device).bool()
                for _ in range(nranks)]
    size = torch.empty((), dtype=dtype).element_size()
    n = 1
    for d in shape:
        n *= d
    return [torch.randint(0, 256, (n * size,), generator=g, device=device, dtype=torch.uint8)
            .view(dtype).view(shape) for _ in range(nranks)]


def bits_equal(a, b):
    """Whether two tensors hold the same bytes (NaN patterns included, which
    torch.equal calls unequal): the check of the ops that move bits."""
    return (a.dtype == b.dtype and a.shape == b.shape and
            torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def poison_allocator(nbytes, device="cuda"):
    """Fills freed allocator blocks with NaN bytes, so outputs the op
    allocates start as garbage rather than as a previous result."""
    t = torch.full((max(1, nbytes // 4) + 1024,), float("nan"), device=device)
    del t


def group_sum(xs):
    """The f32 sum of xs in rank order (collgen's order), not rounded."""
    s = xs[0].float()
    for x in xs[1:]:
        s = s + x.float()
    return s


def rmsnorm_exact(residual, gamma, eps, weight_offset):
    """The exact RMSNorm (float64) of the rows of ``residual``; the offset
    as the dtype holds it."""
    r = residual.double().reshape(-1, residual.shape[-1])
    wo = torch.tensor(weight_offset, dtype=residual.dtype).double().item()
    scale = torch.rsqrt((r * r).mean(-1, keepdim=True) + eps)
    return (r * scale * (gamma.double() + wo)).reshape(residual.shape)


def assert_close_normed(got, exact, what):
    """got (dtype) within one output ulp of exact (float64); below the
    smallest normal number an ulp is the subnormal spacing."""
    tol = _REL_TOL[got.dtype]
    info = torch.finfo(got.dtype)
    subnormal_ulp = info.tiny * info.eps * (64 if got.dtype == torch.float32 else 1)
    err = (got.double() - exact).abs()
    bound = tol * torch.maximum(exact.abs(), got.double().abs()) + subnormal_ulp
    bad = (err > bound) | torch.isnan(got)
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(f"{what}: {int(bad.sum())} elements off; first at {i}: got "
                             f"{got.flatten()[i].item()}, exact {exact.flatten()[i].item()}")


def assert_fp8(normed_fp8, scales, exact, static_scale, what):
    """The FP8 codes within one e4m3 code of exact / scale, and the dynamic
    scales within 2^-12 of max|exact| / 448."""
    rows = exact.reshape(-1, exact.shape[-1])
    if static_scale is None:
        want = rows.abs().amax(-1) / 448
        if not torch.all((scales.double() - want).abs() <= 2.0 ** -12 * want + 1e-30):
            raise AssertionError(f"{what}: row scales differ from max|y|/448")
        div = scales.double().unsqueeze(-1)
    else:
        div = torch.full((rows.shape[0], 1), static_scale, dtype=torch.float64, device=rows.device)
    got = normed_fp8.reshape(rows.shape).float().double()
    v = (rows / torch.where(div == 0, torch.ones_like(div), div)).clamp(-448, 448)
    err = (got - v).abs()
    bound = 2.0 ** -3 * v.abs() * 1.01 + 2.0 ** -9
    if not torch.all(err <= bound):
        i = int((err > bound).flatten().nonzero()[0])
        raise AssertionError(f"{what}: code {i} is {got.flatten()[i].item()}, want about "
                             f"{v.flatten()[i].item()}")


def digest(*tensors):
    """SHA-256 of the tensors' bytes, to compare results across ranks."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes())
    return h.hexdigest()
