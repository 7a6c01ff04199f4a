package cuda

import "testing"

// TestTheoreticalOccupancy against hand-computed shares of an sm_90 SM (2048 thread slots).
func TestTheoreticalOccupancy(t *testing.T) {
	for _, c := range []struct {
		blocks, threads, slots int
		want                   int64
	}{
		{8, 256, 2048, 100}, // 8 x 256 threads fill the SM
		{2, 256, 2048, 25},
		{1, 100, 2048, 6},  // 100 threads take 4 warps = 128 slots
		{16, 33, 2048, 50}, // 33 threads take 2 warps
		{64, 128, 2048, 100},
		{0, 256, 2048, 0},
		{4, 256, 0, 0}, // the driver did not say: no number rather than a wrong one
	} {
		if got := theoreticalOccupancy(c.blocks, c.threads, c.slots); got != c.want {
			t.Errorf("occupancy(%d blocks x %d threads of %d) = %d%%, want %d%%", c.blocks, c.threads, c.slots, got, c.want)
		}
	}
}
