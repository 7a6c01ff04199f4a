package profiling

import "time"

// calibration is the reference workload a profile times next to every step (design.md §8:
// ratios measured side by side, never absolute times across runs): a plain-Go f32 matmul of
// calN^3 multiply-adds that shares no code with the engine, so a loaded or slower machine
// slows it as it slows the step, and step/calibration compares across runs.
const calN = 48

var calA, calB, calC [calN * calN]float32

func init() {
	for i := range calA {
		calA[i] = float32(i%7) * 0.25
		calB[i] = float32(i%5) * 0.5
	}
}

// calibrate runs the reference workload once and returns its wall time.
func calibrate() time.Duration {
	t0 := time.Now()
	for i := range calN {
		for j := range calN {
			var s float32
			for k := range calN {
				s += calA[i*calN+k] * calB[k*calN+j]
			}
			calC[i*calN+j] = s
		}
	}
	return time.Since(t0)
}
