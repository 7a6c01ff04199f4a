package autotune

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Config is one point of a kernel's config space: the schedule fields autotune sets. BK is 0
// for kinds without a reduction step; BM is 1 for the flat kinds (elementwise, copy, loss).
type Config struct {
	BM     int `json:"bm"`
	BN     int `json:"bn"`
	BK     int `json:"bk"`
	Stages int `json:"stages"`
}

// String prints the config as the compiler prints a schedule's tile: "[64,64,32]/s2".
func (c Config) String() string { return fmt.Sprintf("[%d,%d,%d]/s%d", c.BM, c.BN, c.BK, c.Stages) }

// compare orders configs by (BM, BN, BK, Stages): the tie-break among equally fast configs.
func (c Config) compare(d Config) int {
	return cmp.Or(cmp.Compare(c.BM, d.BM), cmp.Compare(c.BN, d.BN), cmp.Compare(c.BK, d.BK), cmp.Compare(c.Stages, d.Stages))
}

func configOf(s compiler.Schedule) Config {
	return Config{BM: s.BM, BN: s.BN, BK: s.BK, Stages: s.Stages}
}

// Schedule is the compiler.Options.Configs entry that applies c to the kernels keyed key.
func (c Config) Schedule(key, kind string) compiler.Schedule {
	return compiler.Schedule{Key: key, Kind: kind, BM: c.BM, BN: c.BN, BK: c.BK, Stages: c.Stages, Source: "autotune"}
}

// axes lists the values each config field takes for one kernel kind, before filtering.
type axes struct{ bm, bn, bk, stages []int }

func pow2s(lo, hi int) []int {
	var out []int
	for v := lo; v <= hi; v *= 2 {
		out = append(out, v)
	}
	return out
}

// spaces holds the axes per kernel kind (compiler.Schedule.Kind). Row kinds and flat kinds
// run no software pipeline, so their stages stay 1.
var spaces = map[string]axes{
	"matmul":      {bm: pow2s(16, 256), bn: pow2s(16, 256), bk: pow2s(16, 128), stages: []int{1, 2, 3, 4}},
	"attention":   {bm: pow2s(16, 256), bn: pow2s(16, 256), bk: []int{0}, stages: []int{1, 2, 3}},
	"reduce":      {bm: pow2s(1, 64), bn: pow2s(32, 8192), bk: []int{0}, stages: []int{1}},
	"rowwise":     {bm: pow2s(1, 64), bn: pow2s(32, 8192), bk: []int{0}, stages: []int{1}},
	"elementwise": {bm: []int{1}, bn: pow2s(128, 16384), bk: []int{0}, stages: []int{1}},
	"copy":        {bm: []int{1}, bn: pow2s(128, 16384), bk: []int{0}, stages: []int{1}},
	"loss":        {bm: []int{1}, bn: pow2s(128, 8192), bk: []int{0}, stages: []int{1}},
}

// Budgets that stand in for the register file, which the PTX generator spends per tile: an
// f32 accumulator of maxAccElems elements is 128 KiB, half of an H100 SM's registers.
const (
	maxAccElems     = 256 * 128 // matmul BM*BN; attention BM*(BN+Dv)
	minMMATileElems = 32 * 32   // below this a tile cannot feed a warpgroup (unless the problem is smaller)
	maxRowTileElems = 128 * 128 // reduce/rowwise BM*BN held across a row loop
)

// HasSpace reports whether kernels of this kind have a config space.
func HasSpace(kind string) bool { _, ok := spaces[kind]; return ok }

// padded is the smallest power of two >= n: tiles may reach past a dim up to this, no further,
// so a small dim does not get a mostly-masked tile.
func padded(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// check returns why config c cannot run problem pr on device d, or "" when it can. The rules
// are the same for every device except where they name the device's shared memory.
func (pr problem) check(c Config, d Device) string {
	if c.BM < 1 || c.BN < 1 || c.Stages < 1 || c.BK < 0 {
		return fmt.Sprintf("non-positive tile or stages %s", c)
	}
	if (c.BK > 0) != (pr.kind == "matmul") {
		return fmt.Sprintf("BK %d for a %s kernel", c.BK, pr.kind)
	}
	if c.BM > padded(pr.m) || c.BN > padded(pr.n) || (pr.kind == "matmul" && c.BK > padded(pr.k)) {
		return fmt.Sprintf("tile %s exceeds the padded problem [%d,%d,%d]", c, padded(pr.m), padded(pr.n), padded(pr.k))
	}
	switch pr.kind {
	case "matmul", "attention":
		acc := c.BM * c.BN
		if pr.kind == "attention" {
			acc = c.BM * (c.BN + pr.dv)
		}
		if acc > maxAccElems {
			return fmt.Sprintf("accumulators of %d elements > %d", acc, maxAccElems)
		}
		if small := min(padded(pr.m)*padded(pr.n), minMMATileElems); c.BM*c.BN < small {
			return fmt.Sprintf("tile of %d elements < %d", c.BM*c.BN, small)
		}
		if sh := pr.shared(c); d.SharedPerBlock > 0 && sh > d.SharedPerBlock {
			return fmt.Sprintf("needs %d B of shared memory > %d per block on %s", sh, d.SharedPerBlock, d.Arch)
		}
	case "reduce", "rowwise":
		if c.BM*c.BN > maxRowTileElems {
			return fmt.Sprintf("row tile of %d elements > %d", c.BM*c.BN, maxRowTileElems)
		}
	}
	return ""
}

// shared estimates the shared memory a GPU kernel with config c stages through: every
// pipeline stage holds one A and one B tile (matmul) or one K and one V tile (attention, with
// the Q tile resident).
func (pr problem) shared(c Config) int {
	switch pr.kind {
	case "matmul":
		return c.Stages * (c.BM*c.BK + c.BK*c.BN) * pr.elemSize
	case "attention":
		return (c.BM*pr.k + c.Stages*c.BN*(pr.k+pr.dv)) * pr.elemSize
	}
	return 0
}

// Space returns the candidate configs of kernel i of p on device d: the kernel's current
// (default) config first, then every valid point of its kind's space, nearest to the default
// first (so a truncated space explores around the default), ties in config order. The order
// depends only on the problem and the device.
func Space(p *compiler.Program, i int, d Device) ([]Config, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	pr, err := problemOf(p, i)
	if err != nil {
		return nil, err
	}
	ax, ok := spaces[pr.kind]
	if !ok {
		return nil, errs.New(errs.Unsupported, "autotune: no config space for %s kernel %s", pr.kind, p.Schedules[i].Key)
	}
	def := configOf(p.Schedules[i])
	stages := ax.stages
	if !d.pipelined() {
		stages = []int{def.Stages}
	}
	var out []Config
	for _, bm := range ax.bm {
		for _, bn := range ax.bn {
			for _, bk := range ax.bk {
				for _, st := range stages {
					c := Config{BM: bm, BN: bn, BK: bk, Stages: st}
					if c != def && pr.check(c, d) == "" {
						out = append(out, c)
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Config) int {
		return cmp.Or(cmp.Compare(distance(a, def), distance(b, def)), a.compare(b))
	})
	return append([]Config{def}, out...), nil
}

// distance counts doublings and halvings from def, plus the difference in stages.
func distance(c, def Config) int {
	lg := func(v int) int { return bits.Len(uint(max(v, 0))) }
	abs := func(v int) int { return max(v, -v) }
	return abs(lg(c.BM)-lg(def.BM)) + abs(lg(c.BN)-lg(def.BN)) + abs(lg(c.BK)-lg(def.BK)) + abs(c.Stages-def.Stages)
}
