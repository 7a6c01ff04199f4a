"""PyTorch oracle for Tessera's differential suite (docs/differential.md).

Every registry op maps to torch below. Where torch's semantics differ from Tessera's, the
mapping emulates Tessera's contract and says so in the returned mode, so that the difference
is visible in the report (and suites/differential tests it explicitly):
  - float -> int casts saturate and send NaN to 0 (torch wraps or leaves it undefined);
  - f64/int32 -> f16/bf16 casts round once (torch rounds through f32 first: double rounding);
  - a half-precision op torch has no kernel for on this device runs in f32 and is rounded
    once to the storage dtype (torch 1.13 CPU has almost no f16 kernels, and no bf16 mse);
  - rmsnorm and, before torch 2.1, attention are composites computed in f32 (f64 for f64
    inputs) and rounded once, since torch has no such op to call;
  - sign(NaN) is NaN and sign(-0) is +0 (torch 1.13's sign gives 0 for NaN); full_like rounds
    its value once to f16/bf16 (torch rounds through f32) and saturates it for ints (torch
    refuses or wraps); attention_lse and attention_grad are composites (torch has neither).

Gradient cases (proto.run_vjp_case) use torch.autograd.grad with allow_unused=True. What
torch 1.13 does at ties, zeros and NaNs, measured, is differential.TorchGradRules (mapping.go).
"""

import math
import sys

import proto

HALF_NAMES = ("f16", "bf16")


def setup():
    import torch
    import torch.nn.functional as F

    return TorchBackend(torch, F)


class TorchBackend:
    def __init__(self, torch, F):
        self.torch, self.F = torch, F
        t = torch
        self.dtypes = {"f64": t.float64, "f32": t.float32, "f16": t.float16, "bf16": t.bfloat16,
                       "int8": t.int8, "int32": t.int32, "bool": t.bool, "uint8": t.uint8}
        if hasattr(t, "float8_e4m3fn"):
            self.dtypes["fp8e4m3"] = t.float8_e4m3fn
            self.dtypes["fp8e5m2"] = t.float8_e5m2
        self.names = {v: k for k, v in self.dtypes.items()}
        self.native = False  # the current request's Options.native
        self.probes = {}  # (dtype, device type) -> (16-bit matmul sums in f32, the probe's sum)
        # Reference arithmetic on CUDA: no TF32, no reduced-precision GEMM reductions.
        cm = getattr(t.backends, "cuda", None)
        if cm is not None:
            cm.matmul.allow_tf32 = False
            for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
                try:
                    setattr(cm.matmul, flag, False)
                except (AttributeError, AssertionError):  # older torch: no such flag
                    pass
        if hasattr(t.backends, "cudnn"):
            t.backends.cudnn.allow_tf32 = False
        t.use_deterministic_algorithms(True, warn_only=True)

    def info(self):
        t = self.torch
        devices = ["cpu"]
        if t.cuda.is_available():
            devices.append("cuda")
        return {"version": t.__version__, "devices": devices, "float8": "fp8e4m3" in self.dtypes,
                "cuda_device": t.cuda.get_device_name(0) if "cuda" in devices else ""}

    # ---- transport

    def device(self, name):
        if name not in ("cpu", "cuda"):
            raise ValueError("unknown device %r" % name)
        if name == "cuda" and not self.torch.cuda.is_available():
            raise proto.Unsupported("torch %s has no cuda device here" % self.torch.__version__)
        return self.torch.device(name)

    def dtype(self, name):
        if name not in self.dtypes:
            raise proto.Unsupported("torch %s has no dtype %s" % (self.torch.__version__, name))
        return self.dtypes[name]

    def decode(self, t, device):
        dt = self.dtype(t["dtype"])
        raw = proto.b64decode(t.get("data", ""))
        n = proto.numel(t["shape"])
        size = self.torch.empty(0, dtype=dt).element_size()
        if len(raw) != n * size:
            raise ValueError("input %s: %d bytes for %s%s" % (t["name"], len(raw), t["dtype"], t["shape"]))
        x = self.torch.frombuffer(bytearray(raw), dtype=dt) if n else self.torch.empty(0, dtype=dt)
        return x.reshape(t["shape"]).to(self.device(device))

    def encode(self, name, x):
        t = self.torch
        x = x.detach().contiguous().cpu()
        dt = self.names[x.dtype]
        view = {"bf16": t.int16, "fp8e4m3": t.uint8, "fp8e5m2": t.uint8}.get(dt)
        raw = (x.view(view) if view is not None else x).numpy().tobytes()
        return {"name": name, "dtype": dt, "shape": list(x.shape), "data": proto.b64encode(raw)}

    def describe(self, x):
        return self.names.get(x.dtype, str(x.dtype)), tuple(x.shape)

    # ---- gradients

    def to_f64(self, x):
        return x.double()

    def zeros_like(self, x):
        return self.torch.zeros_like(x)

    def round_to(self, x, name):
        """x in wire dtype name, rounded once (f64 -> f16/bf16 by round_once: torch's own
        conversion rounds through f32)."""
        x = x.detach()
        dt = self.dtype(name)
        if x.dtype == dt:
            return x
        if name in HALF_NAMES and x.dtype == self.torch.float64:
            return round_once(self, x, dt)
        return x.to(dt)

    def vjp(self, forward, leaves, cots):
        """forward's outputs at leaves, and the gradient of sum_i <cots[i], outputs[i]> with
        respect to each leaf (None where torch finds no path: allow_unused). Outputs that do
        not require grad (integers, constants) take no part."""
        t = self.torch
        leaves = [x.detach().requires_grad_(True) for x in leaves]
        with t.enable_grad():
            outs = forward(leaves)
        pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        grads = [None] * len(leaves)
        if pairs and leaves:
            try:
                grads = list(t.autograd.grad([o for o, _ in pairs], leaves, grad_outputs=[c for _, c in pairs],
                                             allow_unused=True))
            except RuntimeError as e:
                if "not implemented for" not in str(e):
                    raise
                # A backward kernel missing for this dtype on this device (native mode).
                raise proto.Unsupported("torch %s autograd: %s" % (t.__version__, proto.one_line(e)))
        return [o.detach() for o in outs], grads

    # ---- evaluation

    def apply(self, node, args, opts):
        op = OPS.get(node["op"])
        if op is None:
            raise proto.Unsupported("no torch mapping for op %s" % node["op"])
        self.native = opts.native
        want = self.dtype(node["dtype"])
        halves = [self.names.get(a.dtype) for a in args if self.names.get(a.dtype) in HALF_NAMES]
        if halves and not opts.native and node["op"] in ROUNDS_INTERMEDIATES:
            out, _ = with_mode(op(self, node, [upcast(self, a) for a in args]))
            return out.to(want), "f32, rounded once (torch's own %s %s kernels may round intermediates)" % (
                halves[0], node["op"])
        if halves and not opts.native and node["op"] in MATMULS and not self.accumulates_in_f32(args[0]):
            out, _ = with_mode(op(self, node, [upcast(self, a) for a in args]))
            return out.to(want), ("f32, rounded once: torch %s's %s matmul on this %s does not accumulate in f32 "
                                  "(probe: 1 + 256 x 2^-8 summed to %s, not 2)") % (
                self.torch.__version__, halves[0], args[0].device.type, self.probes[(args[0].dtype, args[0].device.type)][1])
        try:
            return with_mode(op(self, node, args))
        except RuntimeError as e:
            if not halves or "not implemented for" not in str(e):
                raise
            # No kernel for this half type on this device: compute in f32, round once.
            out, _ = with_mode(op(self, node, [upcast(self, a) for a in args]))
            return out.to(want), "f32, rounded once: torch %s has no %s %s kernel" % (
                self.torch.__version__, opts.device, halves[0])

    def accumulates_in_f32(self, x):
        """Whether torch's matmul of x's 16-bit dtype on x's device sums in f32, as the contract
        (and cuBLAS, and oneDNN on CPUs with bf16 instructions) does. Some CPUs' fallback sums in
        the 16-bit type (seen: torch 1.13 on an AMD EPYC without avx512_bf16, errors of 0.03 on
        unit-scale 64x64x64 products). Probed once per dtype and device: a row of ones times
        1 followed by 256 values of 2^-8 is exactly 2 in f32 and stays 1 when each partial sum
        is rounded to bf16 or f16 (1 + 2^-8 rounds back to 1 in bf16; f16 needs 2^-11)."""
        key = (x.dtype, x.device.type)
        if key not in self.probes:
            t = self.torch
            small = 2.0 ** -8 if x.dtype == t.bfloat16 else 2.0 ** -11
            n = 256 if x.dtype == t.bfloat16 else 2048
            a = t.ones(1, n + 1, dtype=x.dtype, device=x.device)
            col = t.full((n + 1, 1), small, dtype=x.dtype, device=x.device)
            col[0, 0] = 1.0
            try:
                got = float(t.matmul(a, col)[0, 0])
            except RuntimeError as e:
                if "not implemented for" not in str(e):
                    raise
                # no kernel at all: the caller's fallback computes in f32 and says so
                got = 2.0
            self.probes[key] = (got == 2.0, got)
        return self.probes[key][0]

    def opmath(self, x):
        """The dtype composites compute in: f64 for f64 inputs, else f32."""
        return self.torch.float64 if x.dtype == self.torch.float64 else self.torch.float32


# Ops whose torch kernels for f16/bf16 round intermediate results to the storage dtype (seen
# on torch 1.13's CPU kernels: up to 2 ulp of bf16 apart from one rounding of the f32 result).
# Tessera computes them in f32 and rounds once, so the oracle does the same unless a request
# asks for torch's native kernels. Sums and means get f32 accumulation through dtype= instead.
ROUNDS_INTERMEDIATES = ("gelu", "silu", "layernorm", "mse_loss")
# Matmuls whose 16-bit torch kernels are taken natively only where they sum in f32
# (TorchBackend.accumulates_in_f32); elsewhere they run in f32 and are rounded once.
MATMULS = ("matmul", "batch_matmul")


def upcast(b, x):
    return x.float() if b.names.get(x.dtype) in HALF_NAMES else x


def attrs(node):
    return node.get("attrs", {})


def with_mode(res):
    """An op returns a tensor (computed natively) or (tensor, how it was computed instead)."""
    return res if isinstance(res, tuple) else (res, "native")


def unary(name):
    return lambda b, n, a: getattr(b.torch, name)(a[0])


def binary(name):
    return lambda b, n, a: getattr(b.torch, name)(a[0], a[1])


def gelu(b, n, a):
    approx = attrs(n).get("approx", "erf")
    if approx not in ("erf", "tanh"):
        raise ValueError("gelu approx %r is neither erf nor tanh" % approx)
    return b.F.gelu(a[0], approximate="tanh" if approx == "tanh" else "none")


COMPOSITE = "composite in f32 (f64 for f64), rounded once"

INT_RANGE = {"int8": (-128, 127), "int32": (-2147483648, 2147483647)}


def cast(b, n, a):
    t, x = b.torch, a[0]
    to = attrs(n)["to"]
    tdt = b.dtype(to)
    src = b.names[x.dtype]
    if b.native:
        return x.to(tdt)
    if x.is_floating_point() and to in INT_RANGE:
        lo, hi = INT_RANGE[to]
        # f64 holds both int32 bounds exactly, so the clamp cannot round past them.
        y = t.nan_to_num(x.double(), nan=0.0, posinf=float(hi), neginf=float(lo))
        return y.clamp(lo, hi).trunc().to(tdt), "emulated: float->int saturates, NaN->0 (torch wraps)"
    if to in HALF_NAMES and src in ("f64", "int32"):
        return round_once(b, x.double(), tdt), "emulated: one rounding (torch rounds through f32)"
    return x.to(tdt)


def round_once(b, d, tdt):
    """f64 -> f16/bf16 with one rounding: f64 -> f32 rounding to odd, then f32 -> target RNE.
    Rounding to odd keeps the information that the f32 value was inexact, so the second
    rounding cannot land on a false midpoint (f32 has more than two bits beyond either target)."""
    t = b.torch
    f = d.float()
    fd = f.double()
    toward_zero = t.where(fd.abs() > d.abs(), t.nextafter(f, t.zeros_like(f)), f)
    inexact = (toward_zero.double() != d) & ~t.isnan(d)
    odd = toward_zero.view(t.int32) | inexact.to(t.int32)
    return odd.view(t.float32).to(tdt)


def reduce_dims(b, x, node):
    """The axes to reduce, sorted. Absent and [] both mean every axis (torch.sum(x, dim=[])
    reduces all, and so does Tessera); a scalar has no axis to fold (dim 0 or -1 is its one
    element), so its result is the element itself."""
    axes = attrs(node).get("axes")
    if x.dim() == 0:
        return []
    if not axes:
        return list(range(x.dim()))
    return sorted(a % x.dim() for a in axes)


def accumulation(b, n, x):
    """The dtype a sum or mean accumulates in. Tessera's contract: f32 for 16- and 8-bit floats
    unless `accum` says otherwise. torch's own reductions of bf16 on the CPU round partial sums
    to bf16 (torch 1.13), so the oracle asks torch for f32 accumulation explicitly; `accum`
    equal to the storage dtype leaves torch to its own accumulation instead."""
    accum = attrs(n).get("accum")
    name = b.names[x.dtype]
    if b.native and accum is None:
        return None, "native"
    if accum == name:
        return None, "native accumulation (accum=%s)" % name
    if accum is not None:
        return b.dtype(accum), "accumulated in %s (accum), rounded once" % accum
    if name in HALF_NAMES:
        return b.torch.float32, "f32 accumulation (dtype=float32), rounded once"
    return None, "native"


def reduce_sum(b, n, a):
    x = a[0]
    dims, keep = reduce_dims(b, x, n), attrs(n).get("keepdims", False)
    if x.dim() == 0:
        return x.clone()
    if not x.is_floating_point():
        # Accumulate in int64 and wrap once: equal, modulo 2^bits, to wrapping every step.
        return b.torch.sum(x.long(), dim=dims, keepdim=keep).to(x.dtype)
    acc, how = accumulation(b, n, x)
    return b.torch.sum(x, dim=dims, keepdim=keep, dtype=acc).to(x.dtype), how


def reduce_max(b, n, a):
    x = a[0]
    dims = reduce_dims(b, x, n)
    if x.dim() == 0:
        return x.clone()
    return b.torch.amax(x, dim=dims, keepdim=attrs(n).get("keepdims", False))


def reduce_mean(b, n, a):
    x = a[0]
    dims = reduce_dims(b, x, n)
    if x.dim() == 0:
        return x.clone()
    acc, how = accumulation(b, n, x)
    return b.torch.mean(x, dim=dims, keepdim=attrs(n).get("keepdims", False), dtype=acc).to(x.dtype), how


def softmax(b, n, a):
    return b.F.softmax(a[0], dim=attrs(n).get("axis", -1))


def log_softmax(b, n, a):
    return b.F.log_softmax(a[0], dim=attrs(n).get("axis", -1))


def layernorm(b, n, a):
    x, g, beta = a
    return b.F.layer_norm(x, (x.shape[-1],), g, beta, attrs(n).get("eps", 1e-5))


def rmsnorm(b, n, a):
    x, g = a
    m = b.opmath(x)
    xf = x.to(m)
    r = b.torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + attrs(n).get("eps", 1e-6))
    return (xf * r * g.to(m)).to(x.dtype), COMPOSITE


def matmul(b, n, a):
    t = b.torch
    x, y = a
    if attrs(n).get("transpose_a", False):
        x = x.transpose(-1, -2)
    if attrs(n).get("transpose_b", False):
        y = y.transpose(-1, -2)
    if x.is_floating_point():
        return t.matmul(x, y)
    # Integers: int64 products and sums, wrapped once at the end (equal modulo 2^bits to
    # wrapping at every step). torch has no integer GEMM on CUDA, so this runs on the CPU.
    out = t.matmul(x.cpu().long(), y.cpu().long()).to(x.dtype).to(x.device)
    if x.device.type != "cpu":
        return out, "int64 on the cpu (torch has no integer GEMM on %s)" % x.device.type
    return out


def scaled_matmul(b, n, a):
    """torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype) on CUDA where torch has float8
    and the shape suits it (a and b travel as exact f32 values and go back to e4m3 exactly;
    b.t() is the column-major operand _scaled_mm wants). Elsewhere, and for shapes _scaled_mm
    refuses (dims not multiples of 16), a composite: f32 products (exact for fp8) summed in
    f32, times scale_a*scale_b rounded to f32, rounded once to out_dtype."""
    t = b.torch
    x, y, sa, sb = a
    want = b.dtype(n["dtype"])
    why = "torch %s has no float8 _scaled_mm on %s" % (t.__version__, x.device.type)
    if x.device.type == "cuda" and hasattr(t, "_scaled_mm") and "fp8e4m3" in b.dtypes:
        e4 = b.dtypes["fp8e4m3"]
        try:
            out = t._scaled_mm(x.to(e4), y.to(e4).t(), scale_a=sa.reshape(()).float(), scale_b=sb.reshape(()).float(),
                               out_dtype=want, use_fast_accum=False)
            if isinstance(out, tuple):  # torch 2.1-2.4 return (out, amax)
                out = out[0]
            return out, "torch._scaled_mm"
        except RuntimeError as e:
            why = "torch._scaled_mm refused [%d,%d]x[%d,%d]^T: %s" % (x.shape[0], x.shape[1], y.shape[0], y.shape[1],
                                                                     proto.one_line(e)[:120])
    out = t.matmul(x.float(), y.float().t()) * (sa.float().reshape(()) * sb.float().reshape(()))
    return out.to(want), "composite in f32 (%s)" % why


def attention_form(n, q):
    """(causal, scale) of an attention node: scale absent means 1/sqrt(D)."""
    at = attrs(n)
    return at.get("causal", False), at.get("scale", 1.0 / math.sqrt(q.shape[-1]))


def scores(b, n, q, k):
    """q k^T * scale with the causal mask (key j > query i is -Inf, top-left aligned as
    torch's is_causal), in q's dtype."""
    t = b.torch
    causal, scale = attention_form(n, q)
    s = t.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        keep = t.ones(s.shape[-2], s.shape[-1], dtype=t.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return s


def attention(b, n, a):
    t, F = b.torch, b.F
    q, k, v = a
    causal, scale = attention_form(n, q)
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is not None:
        try:
            return sdpa(q, k, v, is_causal=causal, scale=scale)
        except TypeError:
            pass  # torch 2.0: no scale argument
    # softmax(q k^T * scale, masked) v in f32 (f64 for f64), rounded once.
    m = b.opmath(q)
    return t.matmul(F.softmax(scores(b, n, q.to(m), k.to(m)), dim=-1), v.to(m)).to(q.dtype), COMPOSITE


def attention_lse(b, n, a):
    """logsumexp over keys of the masked scores, in f32 (f64 for f64): the output dtype."""
    q, k = a
    m = b.opmath(q)
    return b.torch.logsumexp(scores(b, n, q.to(m), k.to(m)), dim=-1), "composite in f32 (f64 for f64)"


ATTENTION_WRT = {"q": 0, "k": 1, "v": 2}


def attention_grad(b, n, a):
    """The gradient of softmax(q k^T * scale + mask) v with respect to q, k or v for the output
    cotangent do, by torch.autograd on the oracle's own composite attention in f32 (f64 for
    f64), rounded once to q's dtype. The engine's forward output o and log-sum-exp lse are
    ignored, so the answer does not lean on them. The result has no gradient itself."""
    t, F = b.torch, b.F
    q, k, v, _o, do, _lse = a
    which = attrs(n).get("wrt")
    if which not in ATTENTION_WRT:
        raise ValueError("attention_grad wrt %r is none of q, k, v" % which)
    m = b.opmath(q)
    with t.enable_grad():
        leaves = [x.detach().to(m).requires_grad_(True) for x in (q, k, v)]
        out = t.matmul(F.softmax(scores(b, n, leaves[0], leaves[1]), dim=-1), leaves[2])
        g, = t.autograd.grad(out, [leaves[ATTENTION_WRT[which]]], grad_outputs=do.detach().to(m))
    return g.to(q.dtype), "autograd of the composite in f32 (f64 for f64), rounded once; o and lse unused"


def full_like(b, n, a):
    """x's shape and dtype, every element attribute `value` rounded once to the dtype; ints
    truncate and saturate as a cast does, bool is value != 0."""
    t, x = b.torch, a[0]
    v = float(attrs(n)["value"])
    name = b.names[x.dtype]
    if b.native:
        return t.full_like(x, v)
    if name in HALF_NAMES:
        full = t.full(tuple(x.shape), v, dtype=t.float64, device=x.device)
        return round_once(b, full, x.dtype), "emulated: one rounding (torch rounds through f32)"
    if name in INT_RANGE:
        lo, hi = INT_RANGE[name]
        return t.full_like(x, int(math.trunc(min(max(v, lo), hi)))), "emulated: truncated and saturated (torch refuses out of range)"
    if name == "bool":
        return t.full_like(x, v != 0)
    return t.full_like(x, v)


def sign(b, n, a):
    """-1, 0, +1; sign(+-0) = +0 and sign(NaN) = NaN (numpy). torch 1.13 gives 0 for NaN, so
    NaN is put back; the gradient is 0 everywhere, as torch's."""
    t, x = b.torch, a[0]
    s = t.sign(x)
    if b.native or not x.is_floating_point():
        return s
    s = t.where(x == 0, t.zeros_like(s), s)
    return t.where(t.isnan(x), x.detach(), s), "emulated: sign(NaN) = NaN (torch 1.13 gives 0), sign(-0) = +0"


def transpose(b, n, a):
    return a[0].permute(*attrs(n)["perm"]).contiguous()


def reshape(b, n, a):
    return a[0].reshape(n["shape"])


def slice_op(b, n, a):
    at = attrs(n)
    return a[0][tuple(slice(s, e) for s, e in zip(at["starts"], at["ends"]))].contiguous()


def concat(b, n, a):
    return b.torch.cat(a, dim=attrs(n)["axis"])


def mse_loss(b, n, a):
    return b.F.mse_loss(a[0], a[1], reduction=attrs(n).get("reduction", "mean"))


def div(b, n, a):
    """torch.div with rounding_mode. Integer x/0 is 0 in Tessera (torch raises
    ZeroDivisionError): the oracle divides by 1 there and puts 0 back. Floor division of f16
    and bf16 runs in f32 and is rounded once: torch 1.13's bf16 kernel rounds the intermediate
    a - fmod(a, b) to bf16 and is off by one from the exact floor in about 0.5% of pairs."""
    t, (x, y) = b.torch, a
    mode = attrs(n).get("rounding_mode")
    if mode is None:
        return t.div(x, y)
    if not x.is_floating_point():
        zero = y == 0
        q = t.div(x.long(), t.where(zero, t.ones_like(y), y).long(), rounding_mode=mode)
        return t.where(zero, t.zeros_like(q), q).to(x.dtype), "emulated: integer x/0 = 0 (torch raises), int64 wrapped once"
    if mode == "floor" and b.names.get(x.dtype) in HALF_NAMES and not b.native:
        return t.div(x.float(), y.float(), rounding_mode=mode).to(x.dtype), "f32, rounded once (torch 1.13's 16-bit floor division rounds an intermediate)"
    return t.div(x, y, rounding_mode=mode)


import spectral_ops  # noqa: E402  (issue 26)

_SPECTRAL = spectral_ops.torch_ops()
_SPECTRAL.update(spectral_ops.torch_conv_ops())

OPS = {
    "neg": unary("neg"), "abs": unary("abs"), "relu": unary("relu"), "exp": unary("exp"),
    "log": unary("log"), "sqrt": unary("sqrt"), "rsqrt": unary("rsqrt"), "tanh": unary("tanh"), "erf": unary("erf"),
    "sigmoid": unary("sigmoid"), "silu": lambda b, n, a: b.F.silu(a[0]), "gelu": gelu,
    "add": binary("add"), "sub": binary("sub"), "mul": binary("mul"), "div": div,
    "maximum": binary("maximum"), "minimum": binary("minimum"),
    "cast": cast,
    "reduce_sum": reduce_sum, "reduce_max": reduce_max, "reduce_mean": reduce_mean,
    "softmax": softmax, "log_softmax": log_softmax, "layernorm": layernorm, "rmsnorm": rmsnorm,
    "matmul": matmul, "batch_matmul": matmul, "scaled_matmul": scaled_matmul, "attention": attention,
    "transpose": transpose, "reshape": reshape, "slice": slice_op, "concat": concat,
    "mse_loss": mse_loss,
    "full_like": full_like, "sign": sign, "attention_lse": attention_lse, "attention_grad": attention_grad,
    "fft": _SPECTRAL["fft"], "ifft": _SPECTRAL["ifft"], "rfft": _SPECTRAL["rfft"], "irfft": _SPECTRAL["irfft"],
    "fft2": _SPECTRAL["fft2"], "ifft2": _SPECTRAL["ifft2"], "rfft2": _SPECTRAL["rfft2"], "irfft2": _SPECTRAL["irfft2"],
    "complex_mul": _SPECTRAL["complex_mul"], "conj": _SPECTRAL["conj"],
    "conv1d": _SPECTRAL["conv1d"], "conv2d": _SPECTRAL["conv2d"],
}

if __name__ == "__main__":
    sys.exit(proto.serve("torch", setup))
