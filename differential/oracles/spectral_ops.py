"""Issue 26: the spectral ops for the torch and jax oracles.

Complex values travel as real tensors with a trailing dimension of 2 (torch.view_as_real);
each op views them as complex, calls torch.fft / jnp.fft with the same dim, n (s) and norm,
and views the result as real again. f32 is complex64, f64 complex128."""


def _at(n):
    return n.get("attrs", {})


def _one_axis(at):
    kw = {"dim": at.get("dim", -1), "norm": at.get("norm", "backward")}
    if "n" in at:
        kw["n"] = at["n"]
    return kw


def _two_axes(at):
    kw = {"norm": at.get("norm", "backward")}
    if "s" in at:
        kw["s"] = tuple(at["s"])
    return kw


def torch_ops():
    def cx(b, x):
        return b.torch.view_as_complex(x.contiguous())

    def rx(b, z):
        return b.torch.view_as_real(z).contiguous()

    def one(name):
        def f(b, n, a):
            fn = getattr(b.torch.fft, name)
            x = a[0] if name == "rfft" else cx(b, a[0])
            y = fn(x, **_one_axis(_at(n)))
            return y.contiguous() if name == "irfft" else rx(b, y)
        return f

    def two(name):
        def f(b, n, a):
            fn = getattr(b.torch.fft, name)
            x = a[0] if name == "rfft2" else cx(b, a[0])
            y = fn(x, **_two_axes(_at(n)))
            return y.contiguous() if name == "irfft2" else rx(b, y)
        return f

    def complex_mul(b, n, a):
        # f16/bf16 in f32, rounded once (the engine's contract for every float op).
        dt = a[0].dtype
        x, y = a[0].to(b.opmath(a[0])), a[1].to(b.opmath(a[0]))
        xr, xi, yr, yi = x[..., 0], x[..., 1], y[..., 0], y[..., 1]
        return b.torch.stack([xr * yr - xi * yi, xr * yi + xi * yr], dim=-1).to(dt)

    def conj(b, n, a):
        x = a[0]
        return b.torch.stack([x[..., 0], -x[..., 1]], dim=-1)

    ops = {k: one(k) for k in ("fft", "ifft", "rfft", "irfft")}
    ops.update({k: two(k) for k in ("fft2", "ifft2", "rfft2", "irfft2")})
    ops.update({"complex_mul": complex_mul, "conj": conj})
    return ops


def jax_ops():
    def cx(b, x):
        return x[..., 0] + 1j * x[..., 1]

    def rx(b, z):
        return b.jnp.stack([b.jnp.real(z), b.jnp.imag(z)], axis=-1)

    def one(name):
        def f(b, n, a):
            kw = _one_axis(_at(n))
            kw["axis"] = kw.pop("dim")
            x = a[0] if name == "rfft" else cx(b, a[0])
            y = getattr(b.jnp.fft, name)(x, **kw)
            return y if name == "irfft" else rx(b, y)
        return f

    def two(name):
        def f(b, n, a):
            x = a[0] if name == "rfft2" else cx(b, a[0])
            y = getattr(b.jnp.fft, name)(x, **_two_axes(_at(n)))
            return y if name == "irfft2" else rx(b, y)
        return f

    def complex_mul(b, n, a):
        dt = a[0].dtype
        wide = b.jnp.float64 if dt == b.jnp.float64 else b.jnp.float32
        x, y = a[0].astype(wide), a[1].astype(wide)
        xr, xi, yr, yi = x[..., 0], x[..., 1], y[..., 0], y[..., 1]
        return b.jnp.stack([xr * yr - xi * yi, xr * yi + xi * yr], axis=-1).astype(dt)

    def conj(b, n, a):
        x = a[0]
        return b.jnp.stack([x[..., 0], -x[..., 1]], axis=-1)

    ops = {k: one(k) for k in ("fft", "ifft", "rfft", "irfft")}
    ops.update({k: two(k) for k in ("fft2", "ifft2", "rfft2", "irfft2")})
    ops.update({"complex_mul": complex_mul, "conj": conj})
    return ops


def _conv_kw(n, dims):
    at = _at(n)

    def pair(name, dflt):
        v = list(at.get(name, [dflt]))
        return tuple(v * dims if len(v) == 1 else v)
    return pair("stride", 1), pair("padding", 0), pair("dilation", 1), at.get("groups", 1)


def torch_conv_ops():
    """conv1d/conv2d (issue 26): torch.nn.functional.conv*d; f16/bf16 in f32, rounded once."""
    def conv(dims):
        def f(b, n, a):
            dt = a[0].dtype
            wide = b.opmath(a[0])
            x, w = a[0].to(wide), a[1].to(wide)
            bias = a[2].to(wide) if len(a) > 2 else None
            s, p, d, g = _conv_kw(n, dims)
            fn = b.F.conv1d if dims == 1 else b.F.conv2d
            return fn(x, w, bias, stride=s, padding=p, dilation=d, groups=g).to(dt)
        return f
    return {"conv1d": conv(1), "conv2d": conv(2)}


def jax_conv_ops():
    """conv1d/conv2d through jax.lax.conv_general_dilated (NCH[W], OIH[W])."""
    def conv(dims):
        def f(b, n, a):
            dt = a[0].dtype
            wide = b.jnp.float64 if dt == b.jnp.float64 else b.jnp.float32
            x, w = a[0].astype(wide), a[1].astype(wide)
            s, p, d, g = _conv_kw(n, dims)
            spec = ("NCH", "OIH", "NCH") if dims == 1 else ("NCHW", "OIHW", "NCHW")
            y = b.jax.lax.conv_general_dilated(x, w, window_strides=s, padding=[(q, q) for q in p],
                                               rhs_dilation=d, dimension_numbers=spec, feature_group_count=g,
                                               precision=b.jax.lax.Precision.HIGHEST)
            if len(a) > 2:
                y = y + a[2].astype(wide).reshape((-1,) + (1,) * dims)
            return y.astype(dt)
        return f
    return {"conv1d": conv(1), "conv2d": conv(2)}
