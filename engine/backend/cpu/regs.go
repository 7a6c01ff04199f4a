package cpu

// treg is one tile register. Its value is a rows x cols array of float64; it may be held as
// float64s, as float32s, or both. The float32 form exists only when every value is exactly an
// f32 (or NaN), so it is a compact copy, never a rounding: f32 loads fill it directly and the
// f32 MMA reads and writes it without converting tiles on every K step.
type treg struct {
	rows, cols   int
	f64          []float64
	f32          []float32
	has64, has32 bool
}

func (t *treg) n() int { return t.rows * t.cols }

// out64 returns storage for a new float64 value; the float32 form becomes stale. Storage is
// reused between grid points, so steady state allocates nothing.
func (t *treg) out64() []float64 {
	n := t.n()
	if cap(t.f64) < n {
		t.f64 = make([]float64, n)
	}
	t.f64 = t.f64[:n]
	t.has64, t.has32 = true, false
	return t.f64
}

// out32 returns storage for a new value held as float32s.
func (t *treg) out32() []float32 {
	n := t.n()
	if cap(t.f32) < n {
		t.f32 = make([]float32, n)
	}
	t.f32 = t.f32[:n]
	t.has64, t.has32 = false, true
	return t.f32
}

// get64 returns the value as float64s, widening the float32 form if that is all there is.
func (t *treg) get64() []float64 {
	if t.has64 {
		return t.f64
	}
	n := t.n()
	if cap(t.f64) < n {
		t.f64 = make([]float64, n)
	}
	t.f64 = t.f64[:n]
	for i, v := range t.f32[:n] {
		t.f64[i] = float64(v)
	}
	t.has64 = true
	return t.f64
}

// get32 returns the value as float32s, or false when some value is not an f32 (then the
// caller must take a float64 path to keep the IR's rounding semantics).
func (t *treg) get32() ([]float32, bool) {
	if t.has32 {
		return t.f32, true
	}
	n := t.n()
	if cap(t.f32) < n {
		t.f32 = make([]float32, n)
	}
	t.f32 = t.f32[:n]
	for i, v := range t.f64[:n] {
		w := float32(v)
		if float64(w) != v && v == v {
			return nil, false
		}
		t.f32[i] = w
	}
	t.has32 = true
	return t.f32, true
}

// dirty32 and dirty64 record that one form was updated in place, so the other is stale.
func (t *treg) dirty32() { t.has64, t.has32 = false, true }
func (t *treg) dirty64() { t.has64, t.has32 = true, false }

// exact32 reports whether x survives a round trip through float32 (NaN counts as exact).
func exact32(x float64) bool { return float64(float32(x)) == x || x != x }
