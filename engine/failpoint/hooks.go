package failpoint

// Pick returns bad while the fault name is active, else good. Both values are evaluated by
// the caller: keep bad cheap and free of side effects (a constant, a comparison).
func Pick[T any](name string, good, bad T) T {
	if Enabled(name) {
		return bad
	}
	return good
}

// Apply returns fault(v) while the fault name is active, else v; fault runs only then.
func Apply[T any](name string, v T, fault func(T) T) T {
	if Enabled(name) {
		return fault(v)
	}
	return v
}
