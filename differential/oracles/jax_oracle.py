"""JAX oracle for Tessera's differential suite: the torch oracle's protocol and contract
(docs/differential.md), computed with jax.numpy.

x64 is enabled (f64 inputs stay f64) and matmuls use "highest" precision (no TF32 or bf16
passes on GPUs). XLA may accumulate half-precision reductions in the storage dtype, so sums,
means, softmax, norms, losses and matmuls of f16/bf16 run in f32 and are rounded once; that
is Tessera's contract and is reported as the mode. float -> int casts saturate and send NaN to
0 explicitly, as the contract says, whatever XLA's own convert does. sign(-0) is +0 (XLA keeps
-0), full_like rounds its value once and saturates it for ints, and attention_lse and
attention_grad are composites (attention_grad by jax.vjp of the composite attention).

Gradient cases (proto.run_vjp_case) use jax.vjp. JAX cannot tell an unused input from one
whose gradient is zero, so "unused" lists only inputs no output depends on in the graph.
"""

import math
import sys

import proto

HALF_NAMES = ("f16", "bf16")
INT_RANGE = {"int8": (-128, 127), "int32": (-2147483648, 2147483647)}
OPMATH = "f32 for f16/bf16, rounded once"


def setup():
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_default_matmul_precision", "highest")
    import jax.numpy as jnp
    import numpy as np

    return JaxBackend(jax, jnp, np)


class JaxBackend:
    def __init__(self, jax, jnp, np):
        self.jax, self.jnp, self.np = jax, jnp, np
        self.dtypes = {"f64": jnp.float64, "f32": jnp.float32, "f16": jnp.float16, "bf16": jnp.bfloat16,
                       "int8": jnp.int8, "int32": jnp.int32, "bool": jnp.bool_, "uint8": jnp.uint8}
        if hasattr(jnp, "float8_e4m3fn"):
            self.dtypes["fp8e4m3"] = jnp.float8_e4m3fn
            self.dtypes["fp8e5m2"] = jnp.float8_e5m2
        self.names = {np.dtype(v): k for k, v in self.dtypes.items()}
        self.native = False  # the current request's Options.native

    def info(self):
        devices = ["cpu"]
        if self.gpus():
            devices.append("cuda")
        gpu = self.gpus()
        return {"version": self.jax.__version__, "devices": devices, "float8": "fp8e4m3" in self.dtypes,
                "cuda_device": gpu[0].device_kind if gpu else ""}

    def gpus(self):
        try:
            return self.jax.devices("gpu")
        except RuntimeError:
            return []

    def device(self, name):
        if name == "cpu":
            return self.jax.devices("cpu")[0]
        if name == "cuda":
            gpu = self.gpus()
            if not gpu:
                raise proto.Unsupported("jax %s has no gpu device here" % self.jax.__version__)
            return gpu[0]
        raise ValueError("unknown device %r" % name)

    def dtype(self, name):
        if name not in self.dtypes:
            raise proto.Unsupported("jax %s has no dtype %s" % (self.jax.__version__, name))
        return self.dtypes[name]

    def decode(self, t, device):
        np = self.np
        dt = np.dtype(self.dtype(t["dtype"]))
        raw = proto.b64decode(t.get("data", ""))
        if len(raw) != proto.numel(t["shape"]) * dt.itemsize:
            raise ValueError("input %s: %d bytes for %s%s" % (t["name"], len(raw), t["dtype"], t["shape"]))
        arr = np.frombuffer(raw, dtype=dt).reshape(t["shape"])
        return self.jax.device_put(arr, self.device(device))

    def encode(self, name, x):
        # Not ascontiguousarray: it turns a 0-d array into shape (1,). tobytes is C order anyway.
        arr = self.np.asarray(x)
        dt = self.names[arr.dtype]
        return {"name": name, "dtype": dt, "shape": list(arr.shape), "data": proto.b64encode(arr.tobytes())}

    def describe(self, x):
        dt = self.np.dtype(x.dtype)
        return self.names.get(dt, str(dt)), tuple(x.shape)

    # ---- gradients

    def to_f64(self, x):
        return x.astype(self.jnp.float64)

    def zeros_like(self, x):
        return self.jnp.zeros_like(x)

    def round_to(self, x, name):
        """x in wire dtype name, rounded once (f64 -> f16/bf16 by round_once)."""
        dt = self.dtype(name)
        if self.np.dtype(x.dtype) == self.np.dtype(dt):
            return x
        if name in HALF_NAMES and x.dtype == self.jnp.float64:
            return round_once(self, x, dt)
        return x.astype(dt)

    def vjp(self, forward, leaves, cots):
        """forward's outputs at leaves, and the gradient of sum_i <cots[i], outputs[i]> over
        the float outputs with respect to each leaf, by jax.vjp (zeros where unused)."""
        jnp = self.jnp
        if not leaves:
            return forward([]), []
        floats = []

        def f(*ls):
            outs = forward(list(ls))
            floats[:] = [i for i, o in enumerate(outs) if jnp.issubdtype(o.dtype, jnp.inexact)]
            rest = tuple(o for i, o in enumerate(outs) if i not in floats)
            return tuple(outs[i] for i in floats), rest

        primal, pull, rest = self.jax.vjp(f, *leaves, has_aux=True)
        grads = pull(tuple(cots[i] for i in floats))
        outs, fl, other = [], iter(primal), iter(rest)
        for i in range(len(cots)):
            outs.append(next(fl) if i in floats else next(other))
        return outs, list(grads)

    def apply(self, node, args, opts):
        op = OPS.get(node["op"])
        if op is None:
            raise proto.Unsupported("no jax mapping for op %s" % node["op"])
        self.native = opts.native
        res = op(self, node, args)
        return res if isinstance(res, tuple) else (res, "native")

    def opmath(self, x):
        jnp = self.jnp
        return jnp.float64 if x.dtype == jnp.float64 else jnp.float32

    def half(self, x):
        return self.names.get(self.np.dtype(x.dtype)) in HALF_NAMES


def attrs(node):
    return node.get("attrs", {})


def rounded(b, like, f, *xs):
    """f computed in opmath and rounded once to like's dtype; the mode says so for halves. A
    native request computes in the storage dtype, as XLA would by itself."""
    if b.native:
        return f(*xs)
    m = b.opmath(like)
    out = f(*[x.astype(m) if b.jnp.issubdtype(x.dtype, b.jnp.floating) else x for x in xs]).astype(like.dtype)
    return (out, OPMATH) if b.half(like) else out


def unary(name):
    return lambda b, n, a: getattr(b.jnp, name)(a[0])


def binary(name):
    return lambda b, n, a: getattr(b.jnp, name)(a[0], a[1])


def relu(b, n, a):
    x = a[0]
    # jax.nn.relu would turn NaN into 0 on some versions; maximum keeps NaN as the contract says.
    return b.jnp.maximum(x, b.jnp.zeros((), x.dtype))


def transcendental(f):
    """XLA evaluates f16/bf16 transcendentals with 16-bit intermediates (sigmoid, silu and gelu
    end up an ulp or more from one rounding), so halves run in f32 and are rounded once."""
    return lambda b, n, a: rounded(b, a[0], lambda x: f(b, n, x), a[0])


def gelu_f(b, n, x):
    approx = attrs(n).get("approx", "erf")
    if approx not in ("erf", "tanh"):
        raise ValueError("gelu approx %r is neither erf nor tanh" % approx)
    return b.jax.nn.gelu(x, approximate=approx == "tanh")


def div(b, n, a):
    """True division, or torch.div's rounding modes (issue 21). Integers: exact in int64,
    x/0 = 0 (Tessera's definition), wrapped once. trunc truncates the quotient in the storage
    dtype (f16/bf16 as torch; fp8 travels as f32); floor is jnp.floor_divide (fmod-based, as
    torch and Python), f16/bf16 in f32, rounded once."""
    jnp, lax = b.jnp, b.jax.lax
    x, y = a
    mode = attrs(n).get("rounding_mode")
    if mode is None:
        return jnp.true_divide(x, y)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x, y = jnp.broadcast_arrays(x, y)  # lax.div takes no broadcasting, not even of rank
        zero = y == 0
        xl, yl = x.astype(jnp.int64), jnp.where(zero, 1, y).astype(jnp.int64)
        q = jnp.floor_divide(xl, yl) if mode == "floor" else lax.div(xl, yl)
        return jnp.where(zero, 0, q).astype(x.dtype)
    if mode == "trunc":
        return jnp.trunc(jnp.true_divide(x, y))
    return rounded(b, x, lambda p, q: jnp.floor_divide(p, q), x, y)


def cast(b, n, a):
    jnp, x = b.jnp, a[0]
    to = attrs(n)["to"]
    tdt = b.dtype(to)
    if b.native:
        return x.astype(tdt)
    if jnp.issubdtype(x.dtype, jnp.floating) and to in INT_RANGE:
        lo, hi = INT_RANGE[to]
        y = jnp.nan_to_num(x.astype(jnp.float64), nan=0.0, posinf=float(hi), neginf=float(lo))
        return jnp.trunc(jnp.clip(y, lo, hi)).astype(tdt), "emulated: float->int saturates, NaN->0"
    if to == "bool":
        return x != 0
    if to in HALF_NAMES and b.names[b.np.dtype(x.dtype)] in ("f64", "int32"):
        return round_once(b, x.astype(jnp.float64), tdt), "emulated: one rounding (no pass through f32)"
    return x.astype(tdt)


def round_once(b, d, tdt):
    """f64 -> f16/bf16 with one rounding: to f32 rounding to odd, then RNE to the target, so
    that a conversion through f32 cannot land on a false midpoint."""
    jnp, lax = b.jnp, b.jax.lax
    f = d.astype(jnp.float32)
    toward_zero = jnp.where(jnp.abs(f.astype(jnp.float64)) > jnp.abs(d), jnp.nextafter(f, jnp.zeros_like(f)), f)
    inexact = (toward_zero.astype(jnp.float64) != d) & ~jnp.isnan(d)
    bits = lax.bitcast_convert_type(toward_zero, jnp.int32) | inexact.astype(jnp.int32)
    return lax.bitcast_convert_type(bits, jnp.float32).astype(tdt)


def reduce_dims(x, node):
    """The axes to reduce: absent and [] are every axis (issue 21); a scalar's dim 0 or -1 is
    its one element, so nothing is folded."""
    axes = attrs(node).get("axes")
    if x.ndim == 0:
        return ()
    if not axes:
        return tuple(range(x.ndim))
    return tuple(sorted(a % x.ndim for a in axes))


def reduce_sum(b, n, a):
    jnp, x = b.jnp, a[0]
    dims, keep = reduce_dims(x, n), attrs(n).get("keepdims", False)
    if not dims:
        return x
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.sum(x.astype(jnp.int64), axis=dims, keepdims=keep).astype(x.dtype)
    return rounded(b, x, lambda y: jnp.sum(y, axis=dims, keepdims=keep), x)


def reduce_max(b, n, a):
    x = a[0]
    dims = reduce_dims(x, n)
    if not dims:
        return x
    return b.jnp.max(x, axis=dims, keepdims=attrs(n).get("keepdims", False))


def reduce_mean(b, n, a):
    x = a[0]
    dims = reduce_dims(x, n)
    if not dims:
        return x
    return rounded(b, x, lambda y: b.jnp.mean(y, axis=dims, keepdims=attrs(n).get("keepdims", False)), x)


def along_row(f, x, axis):
    """f along axis; a scalar is a row of one element (torch's dim 0 or -1 of a 0-d tensor)."""
    if x.ndim == 0:
        return f(x.reshape(1), 0).reshape(())
    return f(x, axis)


def softmax(b, n, a):
    ax = attrs(n).get("axis", -1)
    return rounded(b, a[0], lambda y: along_row(lambda v, k: b.jax.nn.softmax(v, axis=k), y, ax), a[0])


def log_softmax(b, n, a):
    ax = attrs(n).get("axis", -1)
    return rounded(b, a[0], lambda y: along_row(lambda v, k: b.jax.nn.log_softmax(v, axis=k), y, ax), a[0])


def layernorm(b, n, a):
    jnp, eps = b.jnp, attrs(n).get("eps", 1e-5)

    def f(x, g, beta):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)
        return (x - mu) * b.jax.lax.rsqrt(var + eps) * g + beta

    out = rounded(b, a[0], f, *a)
    return out if isinstance(out, tuple) else (out, "composite")


def rmsnorm(b, n, a):
    jnp, eps = b.jnp, attrs(n).get("eps", 1e-6)

    def f(x, g):
        return x * b.jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps) * g

    out = rounded(b, a[0], f, *a)
    return out if isinstance(out, tuple) else (out, "composite")


def matmul(b, n, a):
    jnp = b.jnp
    x, y = a
    if attrs(n).get("transpose_a", False):
        x = jnp.swapaxes(x, -1, -2)
    if attrs(n).get("transpose_b", False):
        y = jnp.swapaxes(y, -1, -2)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.matmul(x.astype(jnp.int64), y.astype(jnp.int64)).astype(x.dtype)
    if b.half(x) and not b.native:
        return jnp.matmul(x, y, preferred_element_type=jnp.float32).astype(x.dtype), "f32 accumulation, rounded once"
    return jnp.matmul(x, y)


def scaled_matmul(b, n, a):
    """torch._scaled_mm's function: f32 products of the fp8 values (exact) summed in f32,
    times scale_a*scale_b rounded to f32, rounded once to out_dtype (b is [N,K])."""
    jnp = b.jnp
    x, y, sa, sb = a
    f32 = jnp.float32
    out = jnp.matmul(x.astype(f32), jnp.swapaxes(y.astype(f32), -1, -2), preferred_element_type=f32)
    out = out * (sa.astype(f32).reshape(()) * sb.astype(f32).reshape(()))
    return out.astype(b.dtype(n["dtype"])), "composite in f32 (jax has no scaled fp8 matmul)"


def scores(b, n, q, k):
    """q k^T * scale (absent: 1/sqrt(D)) with the causal mask (key j > query i is -Inf, top-left
    aligned as torch's is_causal), in q's dtype."""
    jnp = b.jnp
    at = attrs(n)
    scale = at.get("scale", 1.0 / math.sqrt(q.shape[-1]))
    s = jnp.matmul(q, jnp.swapaxes(k, -1, -2)) * scale
    if at.get("causal", False):
        keep = jnp.tril(jnp.ones((s.shape[-2], s.shape[-1]), dtype=bool))
        s = jnp.where(keep, s, -jnp.inf)
    return s


def attention(b, n, a):
    def f(q, k, v):
        return b.jnp.matmul(b.jax.nn.softmax(scores(b, n, q, k), axis=-1), v)

    out = rounded(b, a[0], f, *a)
    return out if isinstance(out, tuple) else (out, "composite")


def attention_lse(b, n, a):
    """logsumexp over keys of the masked scores, in f32 (f64 for f64): the output dtype."""
    q, k = a
    m = b.opmath(q)
    return b.jax.nn.logsumexp(scores(b, n, q.astype(m), k.astype(m)), axis=-1), "composite in f32 (f64 for f64)"


ATTENTION_WRT = {"q": 0, "k": 1, "v": 2}


def attention_grad(b, n, a):
    """The gradient of the composite attention with respect to q, k or v for the output
    cotangent do, by jax.vjp in f32 (f64 for f64), rounded once to q's dtype; o and lse are
    ignored. The result has no gradient itself."""
    jax, jnp = b.jax, b.jnp
    q, k, v, _o, do, _lse = a
    which = attrs(n).get("wrt")
    if which not in ATTENTION_WRT:
        raise ValueError("attention_grad wrt %r is none of q, k, v" % which)
    m = b.opmath(q)

    def f(q, k, v):
        return jnp.matmul(jax.nn.softmax(scores(b, n, q, k), axis=-1), v)

    args = [jax.lax.stop_gradient(x).astype(m) for x in (q, k, v)]
    _, pull = jax.vjp(f, *args)
    g = pull(jax.lax.stop_gradient(do).astype(m))[ATTENTION_WRT[which]]
    return g.astype(q.dtype), "jax.vjp of the composite in f32 (f64 for f64), rounded once; o and lse unused"


def full_like(b, n, a):
    """x's shape and dtype, every element attribute `value` rounded once to the dtype; ints
    truncate and saturate as a cast does, bool is value != 0."""
    jnp, x = b.jnp, a[0]
    v = float(attrs(n)["value"])
    name = b.names[b.np.dtype(x.dtype)]
    if b.native:
        return jnp.full(x.shape, v, x.dtype)
    if name in HALF_NAMES:
        return round_once(b, jnp.full(x.shape, v, jnp.float64), x.dtype), "emulated: one rounding"
    if name in INT_RANGE:
        lo, hi = INT_RANGE[name]
        return jnp.full(x.shape, int(math.trunc(min(max(v, lo), hi))), x.dtype), "emulated: truncated and saturated"
    if name == "bool":
        return jnp.full(x.shape, v != 0, x.dtype)
    return jnp.full(x.shape, v, x.dtype)


def sign(b, n, a):
    """-1, 0, +1; sign(+-0) = +0 (XLA keeps -0), sign(NaN) = NaN (XLA agrees); gradient 0."""
    jnp, x = b.jnp, a[0]
    s = jnp.sign(x)
    if b.native or not jnp.issubdtype(x.dtype, jnp.floating):
        return s
    return jnp.where(x == 0, jnp.zeros_like(s), s)


def transpose(b, n, a):
    return b.jnp.transpose(a[0], attrs(n)["perm"])


def reshape(b, n, a):
    return b.jnp.reshape(a[0], n["shape"])


def slice_op(b, n, a):
    at = attrs(n)
    return a[0][tuple(slice(s, e) for s, e in zip(at["starts"], at["ends"]))]


def concat(b, n, a):
    return b.jnp.concatenate(a, axis=attrs(n)["axis"])


def mse_loss(b, n, a):
    red = attrs(n).get("reduction", "mean")
    fold = {"mean": b.jnp.mean, "sum": b.jnp.sum, "none": lambda d: d}[red]
    return rounded(b, a[0], lambda x, y: fold(b.jnp.square(x - y)), *a)


import spectral_ops  # noqa: E402  (issue 26)

_SPECTRAL = spectral_ops.jax_ops()
_SPECTRAL.update(spectral_ops.jax_conv_ops())

OPS = {
    "neg": unary("negative"), "abs": unary("abs"), "relu": relu,
    "exp": transcendental(lambda b, n, x: b.jnp.exp(x)),
    "log": transcendental(lambda b, n, x: b.jnp.log(x)),
    "sqrt": transcendental(lambda b, n, x: b.jnp.sqrt(x)),
    "rsqrt": transcendental(lambda b, n, x: b.jax.lax.rsqrt(x)),
    "tanh": transcendental(lambda b, n, x: b.jnp.tanh(x)),
    "erf": transcendental(lambda b, n, x: b.jax.lax.erf(x)),
    "sigmoid": transcendental(lambda b, n, x: b.jax.nn.sigmoid(x)),
    "silu": transcendental(lambda b, n, x: b.jax.nn.silu(x)),
    "gelu": transcendental(gelu_f),
    "add": binary("add"), "sub": binary("subtract"), "mul": binary("multiply"), "div": div,
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
    sys.exit(proto.serve("jax", setup))
