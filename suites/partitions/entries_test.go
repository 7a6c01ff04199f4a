package partitions_test

import (
	"fmt"
	"time"
)

// The report entries the reporter reads from this suite's Ginkgo JSON report
// (report/parse/partitions.go turns them into the dashboard's "partitions" metrics).
// Ginkgo stores an entry's value as JSON beside its String, so the field names below are that
// contract, and String is the line a person reads in the console.

// interferenceEntry is one pair of spec (d): A's throughput next to B, as a ratio to alone.
type interferenceEntry struct {
	Pair     string  `json:"pair"` // "A FMA-bound (64 SMs) next to B bandwidth-bound (64 SMs)"
	Ratio    float64 `json:"ratio"`
	AloneMS  float64 `json:"alone_ms"`
	LoadedMS float64 `json:"loaded_ms"`
	Reps     int     `json:"reps"`
}

func (e interferenceEntry) String() string {
	return fmt.Sprintf("%s: throughput ratio %.3f (alone %.3f ms, with neighbour %.3f ms for %d reps)",
		e.Pair, e.Ratio, e.AloneMS, e.LoadedMS, e.Reps)
}

// goldenEntry is the golden catalogue on one SM partition compared with the whole GPU.
type goldenEntry struct {
	Specs     int  `json:"specs"`
	SMs       int  `json:"sms"`
	Differing int  `json:"differing"`
	SameBits  bool `json:"same_bits"`
}

func (e goldenEntry) String() string {
	same := "same bits as the whole GPU"
	if !e.SameBits {
		same = fmt.Sprintf("%d differ from the whole GPU", e.Differing)
	}
	return fmt.Sprintf("golden catalogue on %d SMs: %d specs, %s", e.SMs, e.Specs, same)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
