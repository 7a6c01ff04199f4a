//go:build !purego

package dist

import "unsafe"

//go:noescape
func addF32(dst, a, b *float32, n int) (nan bool)

//go:noescape
func addF64(dst, a, b *float64, n int) (nan bool)

// vecAdd sets dst[i] = a[i] + b[i] over the longest prefix the vector loop takes (a multiple
// of 16 f32 or 8 f64 elements) and returns its length and whether any of those sums is NaN.
// dst may be a or b. The rest is the caller's scalar loop.
func vecAdd[T float32 | float64](dst, a, b []T) (int, bool) {
	a, b = a[:len(dst)], b[:len(dst)]
	switch d := any(dst).(type) {
	case []float32:
		n := len(d) &^ 15
		if n == 0 {
			return 0, false
		}
		return n, addF32(&d[0], (*float32)(unsafe.Pointer(&a[0])), (*float32)(unsafe.Pointer(&b[0])), n)
	case []float64:
		n := len(d) &^ 7
		if n == 0 {
			return 0, false
		}
		return n, addF64(&d[0], (*float64)(unsafe.Pointer(&a[0])), (*float64)(unsafe.Pointer(&b[0])), n)
	}
	return 0, false
}
