package differential

// spectralRows map issue 26's ops (differential/oracles/spectral_ops.py). Complex values are
// real [...,2] tensors here; the oracles view them as complex (torch.view_as_complex, or
// re + 1j*im in JAX) and back.
var spectralRows = []OpMapping{
	{"fft", "torch.fft.fft(view_as_complex(x), n, dim, norm)", "jnp.fft.fft(n, axis, norm)",
		"f32 is complex64, f64 complex128; dim counts the logical (complex) axes in both; torch's pocketfft computes in the input precision, as the engine does"},
	{"ifft", "torch.fft.ifft", "jnp.fft.ifft", "as fft"},
	{"rfft", "torch.fft.rfft", "jnp.fft.rfft", "real input; n/2+1 bins"},
	{"irfft", "torch.fft.irfft", "jnp.fft.irfft",
		"n defaults to 2*(bins-1); the imaginary parts of bin 0 and (even n) bin n/2 are ignored in all three (a non-Hermitian input is not an error)"},
	{"fft2", "torch.fft.fft2(s, norm)", "jnp.fft.fft2(s, norm)", "the last two logical axes"},
	{"ifft2", "torch.fft.ifft2", "jnp.fft.ifft2", "as fft2"},
	{"rfft2", "torch.fft.rfft2", "jnp.fft.rfft2", "rfft over the last axis, fft over the one before"},
	{"irfft2", "torch.fft.irfft2", "jnp.fft.irfft2", "ifft over the second-to-last axis, irfft over the last"},
	{"complex_mul", "composite (xr*yr - xi*yi, xr*yi + xi*yr) on the real view", "the same composite",
		"f32 and f64 compute in their dtype (each product and difference rounded, as the engine's desugaring); f16, bf16 and fp8 compute in f32 and round once, in the engine and the oracle"},
	{"conj", "stack(re, -im)", "the same", "bitwise but for the sign of im"},
	{"conv1d", "torch.nn.functional.conv1d(x, w, b, stride, padding, dilation, groups)", "jax.lax.conv_general_dilated (NCH/OIH, rhs_dilation, feature_group_count, HIGHEST precision)",
		"f16/bf16 compute in f32 and round once in both oracles, as the engine accumulates in f32; the summation order differs (tolerance scales with C_in/groups*K)"},
	{"conv2d", "torch.nn.functional.conv2d", "jax.lax.conv_general_dilated (NCHW/OIHW)", "as conv1d"},
}
