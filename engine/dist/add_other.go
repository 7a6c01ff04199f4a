//go:build !amd64 || purego

package dist

// vecAdd: no vector loop on this platform; the caller's scalar loop does all of it.
func vecAdd[T float32 | float64](dst, a, b []T) (int, bool) { return 0, false }
