package ptx

import "math"

// The f64 routines below evaluate the transcendental functions that Tile IR's Unary computes
// in float64 (the CPU uses math.Exp, math.Log, math.Tanh, math.Erf), accurate to about one
// ulp of f64, so that after rounding to the instruction dtype the GPU gives the CPU's bits in
// all but vanishingly rare cases. They are branch-free (special cases are selected at the end),
// which keeps the emitted PTX straight-line inside the element loops.

const signBit = uint64(1) << 63

// horner evaluates c[0]*x^(n-1) + ... + c[n-1] with fused multiply-adds.
func horner[F, I, P any](m arith[F, I, P], x F, c []float64) F {
	p := m.f(c[0])
	for _, k := range c[1:] {
		p = m.fma(p, x, m.f(k))
	}
	return p
}

// pow2 is 2^n for an integer n in [-1022, 1023], built from its exponent field.
func pow2[F, I, P any](m arith[F, I, P], n I) F {
	return m.frombits(m.shl(m.iadd(n, m.i(1023)), m.i(52)))
}

// reduceLn2 writes x = n ln2 + r with |r| <= ln2/2 (Cody and Waite: ln2Hi has few enough
// bits that n*ln2Hi is exact) and returns n as a float, n as an integer, and r.
func reduceLn2[F, I, P any](m arith[F, I, P], x F) (F, I, F) {
	c := mc()
	nf := m.rint(m.mul(x, m.f(c.invLn2)))
	r := m.fma(m.neg(nf), m.f(c.ln2Hi), x)
	r = m.fma(m.neg(nf), m.f(c.ln2Lo), r)
	return nf, m.f2i(nf), r
}

// expm1Reduced is e^r - 1 for |r| <= ln2/2: r + r^2 (1/2! + r/3! + ... + r^11/13!).
func expm1Reduced[F, I, P any](m arith[F, I, P], r F) F {
	p := horner(m, r, mc().expPoly)
	return m.fma(m.mul(r, r), p, r)
}

// expF is e^x.
func expF[F, I, P any](m arith[F, I, P], x F) F {
	// Clamping keeps n inside the scaling's range; the clamped ends still overflow to +Inf and
	// underflow to 0 below, and NaN passes the ordered compares untouched.
	x = m.fsel(m.fgt(x, m.f(710)), m.f(710), x)
	x = m.fsel(m.flt(x, m.f(-746)), m.f(-746), x)
	_, n, r := reduceLn2(m, x)
	y := m.add(m.f(1), expm1Reduced(m, r))
	// Two scalings: the first is exact, the second rounds once when the result is subnormal.
	n1 := m.sar(n, m.i(1))
	n2 := m.isub(n, n1)
	return m.mul(m.mul(y, pow2(m, n1)), pow2(m, n2))
}

// expm1Pos is e^y - 1 for 0 <= y <= 64, with full relative accuracy near 0.
func expm1Pos[F, I, P any](m arith[F, I, P], y F) F {
	_, n, r := reduceLn2(m, y)
	q := expm1Reduced(m, r)
	s := pow2(m, n)
	// 2^n (1+q) - 1 = 2^n q + (2^n - 1); 2^n - 1 is exact for n <= 53 and the fma rounds once.
	return m.fma(s, q, m.sub(s, m.f(1)))
}

// copySign gives |v| the sign bit of x.
func copySign[F, I, P any](m arith[F, I, P], v, x F) F {
	return m.frombits(m.or(m.bits(m.abs(v)), m.and(m.bits(x), m.i(signBit))))
}

// tanhF is tanh(x): its Taylor series below 0.55, 1 - 2/(e^(2|x|)+1) above (tanh is past
// 1/2 there, so the subtraction from 1 loses nothing), and 1 beyond 22.
func tanhF[F, I, P any](m arith[F, I, P], x F) F {
	ax := m.abs(x)
	z := m.mul(ax, ax)
	small := m.fma(m.mul(ax, z), horner(m, z, mc().tanhPoly), ax)
	t := expm1Pos(m, m.mul(m.f(2), m.fsel(m.fgt(ax, m.f(22)), m.f(22), ax)))
	large := m.sub(m.f(1), m.div(m.f(2), m.add(t, m.f(2))))
	r := m.fsel(m.flt(ax, m.f(tanhSmallMax)), small, large)
	r = m.fsel(m.fgt(ax, m.f(22)), m.f(1), r)
	r = m.fsel(m.flt(ax, m.f(0x1p-28)), ax, r)
	r = m.fsel(m.fnan(x), x, r)
	return copySign(m, r, x)
}

// logF is ln(x): x = 2^e m with m in (sqrt(1/2), sqrt(2)], f = m-1, s = f/(2+f), and
// ln(1+f) = 2 atanh(s) = f - (f^2/2 - s (f^2/2 + R(s^2))), R(z) = z (2/3 + 2z/5 + ...).
func logF[F, I, P any](m arith[F, I, P], x F) F {
	c := mc()
	sub := m.pand(m.flt(x, m.f(0x1p-1022)), m.fgt(x, m.f(0)))
	xs := m.fsel(sub, m.mul(x, m.f(0x1p54)), x)
	bx := m.bits(xs)
	e := m.isub(m.shr(bx, m.i(52)), m.isel(sub, m.i(1023+54), m.i(1023)))
	mb := m.or(m.and(bx, m.i(1<<52-1)), m.i(1023<<52))
	// m > sqrt(2): halve it (exponent field 1022) and count it in e.
	big := m.iltu(m.i(math.Float64bits(math.Sqrt2)), mb)
	mb = m.isel(big, m.isub(mb, m.i(1<<52)), mb)
	e = m.isel(big, m.iadd(e, m.i(1)), e)
	f := m.sub(m.frombits(mb), m.f(1))
	s := m.div(f, m.add(m.f(2), f))
	z := m.mul(s, s)
	rr := m.mul(z, horner(m, z, c.logPoly))
	hfsq := m.mul(m.mul(m.f(0.5), f), f)
	v := m.fma(m.neg(s), m.add(hfsq, rr), hfsq)
	lm := m.sub(f, v)
	ef := m.i2f(e)
	res := m.fma(ef, m.f(c.ln2Hi), m.fma(ef, m.f(c.ln2Lo), lm))
	res = m.fsel(m.feq(x, m.f(0)), m.f(math.Inf(-1)), res)
	res = m.fsel(m.flt(x, m.f(0)), m.f(math.NaN()), res)
	res = m.fsel(m.feq(x, m.f(math.Inf(1))), x, res)
	return m.fsel(m.fnan(x), x, res)
}

// erfF is erf(x): a Taylor series in x^2 below 1/2, a Taylor polynomial around the centre of
// one of the 1/8-wide intervals up to 6 (coefficients in the erf table), and 1 beyond, where
// erfc(6) < 2^-54 rounds away.
func erfF[F, I, P any](m arith[F, I, P], x F) F {
	c := mc()
	ax := m.abs(x)
	z := m.mul(ax, ax)
	t := m.fma(z, horner(m, z, c.erfSmall), m.f(c.erfA0Lo))
	small := m.fma(ax, m.f(c.erfA0Hi), m.mul(ax, t))
	j := m.f2i(m.mul(m.sub(ax, m.f(erfSmallMax)), m.f(erfPerUnit)))
	j = m.imin(m.imax(j, m.i(0)), m.i(uint64(erfIntervals-1)))
	h := m.sub(ax, m.fma(m.i2f(j), m.f(1.0/erfPerUnit), m.f(erfSmallMax+0.5/erfPerUnit)))
	tb := c.erfMid
	q := m.tab(tb, j, erfDegree)
	for k := erfDegree - 1; k >= 2; k-- {
		q = m.fma(q, h, m.tab(tb, j, k))
	}
	mid := m.add(m.tab(tb, j, 0), m.fma(h, q, m.tab(tb, j, 1)))
	r := m.fsel(m.flt(ax, m.f(erfBigMin)), mid, m.f(1))
	r = m.fsel(m.flt(ax, m.f(erfSmallMax)), small, r)
	r = m.fsel(m.fnan(x), x, r)
	return copySign(m, r, x)
}

// sigmoidF is the CPU's sigmoid: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below, so exp never
// overflows into Inf/Inf.
func sigmoidF[F, I, P any](m arith[F, I, P], x F) F {
	e := expF(m, m.neg(m.abs(x)))
	pos := m.div(m.f(1), m.add(m.f(1), e))
	neg := m.div(e, m.add(m.f(1), e))
	return m.fsel(m.fge(x, m.f(0)), pos, neg)
}

// unaryF64 evaluates a Tile IR unary op in f64 exactly as the CPU backend's unaryFuncs do
// (same operation order, so the only differences come from exp/log/tanh/erf themselves).
func unaryF64[F, I, P any](m arith[F, I, P], op string, x F) (F, bool) {
	c := mc()
	switch op {
	case "neg":
		return m.neg(x), true
	case "abs":
		return m.abs(x), true
	case "relu":
		keep := m.por(m.fgt(x, m.f(0)), m.fnan(x))
		return m.fsel(keep, x, m.f(0)), true
	case "exp":
		return expF(m, x), true
	case "log":
		return logF(m, x), true
	case "sqrt":
		return m.sqrt(x), true
	case "rsqrt":
		return m.div(m.f(1), m.sqrt(x)), true
	case "tanh":
		return tanhF(m, x), true
	case "sigmoid":
		return sigmoidF(m, x), true
	case "silu":
		return m.mul(x, sigmoidF(m, x)), true
	case "gelu_erf":
		e := erfF(m, m.div(x, m.f(c.sqrt2)))
		return m.mul(m.mul(m.f(0.5), x), m.add(m.f(1), e)), true
	case "gelu_tanh":
		cube := m.mul(m.mul(m.mul(m.f(0.044715), x), x), x)
		inner := m.mul(m.f(c.sqrt2OverPi), m.add(x, cube))
		return m.mul(m.mul(m.f(0.5), x), m.add(m.f(1), tanhF(m, inner))), true
	case "recip":
		return m.div(m.f(1), x), true
	case "sign":
		s := m.fsel(m.fgt(x, m.f(0)), m.f(1), m.fsel(m.flt(x, m.f(0)), m.f(-1), m.f(0)))
		return m.fsel(m.fnan(x), x, s), true
	case "erf":
		return erfF(m, x), true
	}
	var zero F
	return zero, false
}

// fmaxmin is Go's builtin max (or min) on float64: NaN if either operand is NaN, and -0 < +0
// (max(-0, +0) = +0, min = -0). PTX max/min would return the non-NaN operand instead.
func fmaxmin[F, I, P any](m arith[F, I, P], a, b F, isMax bool) F {
	var r F
	var z I
	if isMax {
		r = m.fsel(m.fgt(a, b), a, b)
		z = m.and(m.bits(a), m.bits(b))
	} else {
		r = m.fsel(m.flt(a, b), a, b)
		z = m.or(m.bits(a), m.bits(b))
	}
	r = m.fsel(m.feq(a, b), m.frombits(z), r)
	return m.fsel(m.por(m.fnan(a), m.fnan(b)), m.add(a, b), r)
}
