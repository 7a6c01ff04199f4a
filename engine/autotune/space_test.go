package autotune

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
)

func spaceOf(t *testing.T, src, kind string, d Device) (*compiler.Program, int, []Config) {
	t.Helper()
	p := mustCompile(t, mustParse(t, src), nil)
	i := slices.IndexFunc(p.Schedules, func(s compiler.Schedule) bool { return s.Kind == kind })
	if i < 0 {
		t.Fatalf("no %s kernel in %s", kind, compiler.FormatSchedules(p.Schedules))
	}
	sp, err := Space(p, i, d)
	if err != nil {
		t.Fatal(err)
	}
	return p, i, sp
}

const bigMatmul = `graph big {
  input %a: bf16[4096,4096]
  input %b: bf16[4096,4096]
  %c: bf16[4096,4096] = matmul(%a, %b)
  output %c
}`

func TestSpaceMatmulOnH100(t *testing.T) {
	p, i, sp := spaceOf(t, bigMatmul, "matmul", h100)
	if sp[0] != configOf(p.Schedules[i]) {
		t.Fatalf("space starts with %v, want the default %v", sp[0], configOf(p.Schedules[i]))
	}
	pr, _ := problemOf(p, i)
	seen := map[Config]bool{}
	stages := map[int]bool{}
	for _, c := range sp {
		if seen[c] {
			t.Fatalf("config %v listed twice", c)
		}
		seen[c] = true
		stages[c.Stages] = true
		if sh := pr.shared(c); sh > h100.SharedPerBlock {
			t.Errorf("%v needs %d B shared > %d", c, sh, h100.SharedPerBlock)
		}
		if c.BM*c.BN > maxAccElems || c.BM*c.BN < minMMATileElems || c.BK < 16 {
			t.Errorf("%v outside the register/tile budgets", c)
		}
	}
	if len(stages) != 4 {
		t.Errorf("GPU space tunes stages %v, want 1..4", stages)
	}
	// Known points: 128x128x64 in 3 stages fits (96 KiB), 256x128x128 in 4 does not (384 KiB).
	if !seen[cfg(128, 128, 64, 3)] || seen[cfg(256, 128, 128, 4)] || seen[cfg(256, 256, 32, 2)] {
		t.Errorf("space membership wrong: 128x128x64/s3 %v, 256x128x128/s4 %v, 256x256x32/s2 %v",
			seen[cfg(128, 128, 64, 3)], seen[cfg(256, 128, 128, 4)], seen[cfg(256, 256, 32, 2)])
	}
	// A device with less shared memory gets a strict subset.
	small := h100
	small.SharedPerBlock = 48 * 1024
	_, _, sp2 := spaceOf(t, bigMatmul, "matmul", small)
	if len(sp2) >= len(sp) || len(sp2) < 10 {
		t.Errorf("48 KiB device space has %d configs, H100 %d", len(sp2), len(sp))
	}
	for _, c := range sp2[1:] {
		if pr.shared(c) > small.SharedPerBlock {
			t.Errorf("48 KiB device got %v (%d B)", c, pr.shared(c))
		}
	}
}

func TestSpaceIsDeterministicAndNearestFirst(t *testing.T) {
	_, _, a := spaceOf(t, bigMatmul, "matmul", h100)
	_, _, b := spaceOf(t, bigMatmul, "matmul", h100)
	if !slices.Equal(a, b) {
		t.Fatal("two calls gave different spaces")
	}
	for k := 2; k < len(a); k++ {
		if distance(a[k-1], a[0]) > distance(a[k], a[0]) {
			t.Fatalf("space not ordered by distance from the default at %d: %v before %v", k, a[k-1], a[k])
		}
	}
	if d := distance(a[1], a[0]); d != 1 {
		t.Errorf("first neighbour %v is %d steps from the default %v", a[1], d, a[0])
	}
}

func TestSpaceRespectsPaddedDims(t *testing.T) {
	// M=5 pads to 8, N=3 to 4, K=7 to 8: tiles may not exceed those; the CPU keeps stages.
	src := `graph small {
  input %a: f32[5,7]
  input %b: f32[7,3]
  %c: f32[5,3] = matmul(%a, %b)
  output %c
}`
	p, i, sp := spaceOf(t, src, "matmul", hostCPU)
	def := configOf(p.Schedules[i])
	if def != cfg(8, 4, 8, 2) {
		t.Fatalf("default %v, want [8,4,8]/s2 (compiler's fit)", def)
	}
	// Every pow2 >= 16 exceeds M's padding, so only the default remains.
	if len(sp) != 1 {
		t.Errorf("space %v, want only the default", sp)
	}
	_, _, sp = spaceOf(t, matmulSrc, "matmul", hostCPU)
	for _, c := range sp {
		if c.BM > 64 || c.BN > 128 || c.BK > 64 || c.Stages != 2 {
			t.Errorf("%v exceeds the padded problem [64,128,64] or tunes CPU stages", c)
		}
	}
	if len(sp) < 10 {
		t.Errorf("48x72x40 matmul space has only %d configs", len(sp))
	}
}

func TestSpaceOtherKinds(t *testing.T) {
	for _, tc := range []struct {
		kind string
		ok   func(c Config) bool
		min  int
	}{
		{"attention", func(c Config) bool { return c.BM <= 128 && c.BN <= 128 && c.BM*c.BN >= 1024 && c.BK == 0 }, 20},
		{"rowwise", func(c Config) bool { return c.BM <= 32 && c.BN <= 64 && c.BK == 0 && c.Stages == 1 }, 5},
		{"reduce", func(c Config) bool { return c.BM <= 64 && c.BN <= 32 && c.BK == 0 }, 3},
		{"elementwise", func(c Config) bool { return c.BM == 1 && c.BN <= 1024 && c.BN >= 128 }, 3},
		{"copy", func(c Config) bool { return c.BM == 1 && c.BN <= 1024 }, 3},
		{"loss", func(c Config) bool { return c.BM == 1 && c.BN <= 1024 }, 3},
	} {
		_, _, sp := spaceOf(t, mixedSrc, tc.kind, h100)
		if len(sp) < tc.min {
			t.Errorf("%s: space %v has fewer than %d configs", tc.kind, sp, tc.min)
		}
		for _, c := range sp[1:] {
			if !tc.ok(c) {
				t.Errorf("%s: config %v out of bounds", tc.kind, c)
			}
		}
	}
}

func TestCheckReasons(t *testing.T) {
	p := mustCompile(t, mustParse(t, bigMatmul), nil)
	pr, err := problemOf(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{cfg(128, 128, 64, 3), ""},
		{cfg(0, 128, 64, 3), "non-positive"},
		{cfg(128, 128, 0, 3), "BK 0 for a matmul"},
		{cfg(8192, 16, 16, 1), "exceeds the padded problem"},
		{cfg(256, 256, 16, 1), "accumulators"},
		{cfg(16, 16, 16, 1), "tile of 256 elements"},
		{cfg(256, 128, 128, 4), "shared memory"},
	} {
		got := pr.check(tc.c, h100)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("check(%v) = %q, want %q", tc.c, got, tc.want)
		}
	}
	if got := pr.check(cfg(256, 128, 128, 4), hostCPU); got != "" {
		t.Errorf("the CPU has no shared-memory budget, got %q", got)
	}
}

func TestSpaceErrors(t *testing.T) {
	p := mustCompile(t, mustParse(t, matmulSrc), nil)
	if _, err := Space(p, 0, Device{}); err == nil || !strings.Contains(err.Error(), "E_INPUT") {
		t.Errorf("empty device: %v", err)
	}
	if _, err := Space(p, 7, hostCPU); err == nil {
		t.Error("kernel out of range accepted")
	}
}
