package cpu

import (
	"fmt"
	"testing"
)

// gridPoint visits every point of a grid exactly once.
func TestGridPointIsABijection(t *testing.T) {
	for _, grid := range [][]int{{1}, {7}, {3, 5}, {17, 3}, {2, 9, 20}, {3, 1, 8, 8}} {
		total := 1
		for _, d := range grid {
			total *= d
		}
		seen := map[string]bool{}
		vars := make([]int, len(grid))
		for g := range total {
			gridPoint(grid, g, vars)
			for d, v := range vars {
				if v < 0 || v >= grid[d] {
					t.Fatalf("grid %v point %d: var %d = %d out of range", grid, g, d, v)
				}
			}
			seen[fmt.Sprint(vars)] = true
		}
		if len(seen) != total {
			t.Errorf("grid %v: %d distinct points of %d", grid, len(seen), total)
		}
	}
}
