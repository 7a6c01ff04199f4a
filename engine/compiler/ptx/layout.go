package ptx

import (
	"sort"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// layout places every tile register in dynamic shared memory.
//
// Storage: a register is kept as f32 when every value any of its definitions can produce is
// exactly an f32 (or NaN), else as f64. That is a representation choice, never a rounding:
// the CPU's float64 register file holds the same values.
//
// Space: registers whose live ranges (in instruction order, widened over loops they are
// carried around) do not overlap share bytes, first fit.
//
// Half: an operand of a tensor-core MMA whose every definition yields an f16 (or bf16) value
// (a load of such a parameter, a Round to that dtype) is kept in 16 bits, the form ldmatrix
// reads. half[r] is F16 or BF16 then, else Invalid.
type layout struct {
	wide   []bool           // f64 storage
	half   []numerics.DType // 16-bit storage of this dtype
	offset []int            // byte offset in shared memory
	bytes  int              // total, 16-byte aligned
}

func (l *layout) size(r tile.Reg) int {
	switch {
	case l.wide[r]:
		return 8
	case l.half[r] != numerics.Invalid:
		return 2
	}
	return 4
}

// exact32 reports whether x survives a round trip through float32 (NaN counts as exact).
func exact32(x float64) bool { return float64(float32(x)) == x || x != x }

// narrowResult reports whether arithmetic rounded to dt always yields f32-exact values.
func narrowResult(dt numerics.DType) bool { return dt != numerics.F64 && dt != numerics.I32 }

// loadExact32 reports whether every value of dt decodes to an exact f32.
func loadExact32(dt numerics.DType) bool { return dt != numerics.F64 && dt != numerics.I32 }

func planLayout(k *tile.Kernel, shapes []tile.Shape, tensorCores bool) *layout {
	return planLayoutWithout(k, shapes, tensorCores, nil)
}

// planLayoutWithout places every register but the absent ones, which no generated
// instruction touches (an FFT's fused source and destination, fft_work.go).
func planLayoutWithout(k *tile.Kernel, shapes []tile.Shape, tensorCores bool, absent map[tile.Reg]bool) *layout {
	l := &layout{wide: make([]bool, k.NumRegs), half: make([]numerics.DType, k.NumRegs), offset: make([]int, k.NumRegs)}
	// Fixpoint: a definition is narrow when its inputs are; start optimistic, widen until stable.
	for changed := true; changed; {
		changed = false
		widen := func(r tile.Reg, narrowDef bool) {
			if !narrowDef && !l.wide[r] {
				l.wide[r], changed = true, true
			}
		}
		walk(k.Body, func(in tile.Instr) {
			switch x := in.(type) {
			case tile.Full:
				widen(x.Dst, exact32(x.Value))
			case tile.Load:
				widen(x.Dst, loadExact32(k.Params[x.At.Param].DType) && exact32(x.Fill))
			case tile.Unary:
				widen(x.Dst, narrowResult(x.DType))
			case tile.Binary:
				widen(x.Dst, narrowResult(x.DType))
			case tile.Round:
				// Round to f64 is the identity: the result is as narrow as the source.
				widen(x.Dst, narrowResult(x.DType) && (x.DType != numerics.F64 || !l.wide[x.Src]))
			case tile.Reduce:
				widen(x.Dst, narrowResult(x.DType))
			case tile.MMA:
				widen(x.Acc, narrowResult(x.AccDType))
			case tile.OnlineSoftmax:
				for _, r := range []tile.Reg{x.M, x.L, x.P, x.Alpha} {
					widen(r, narrowResult(x.DType))
				}
			case tile.MaskScores:
				widen(x.Dst, !l.wide[x.Src])
			case tile.MaskCols:
				widen(x.Dst, !l.wide[x.Src] && exact32(x.Value))
			case tile.FFT:
				widen(x.Dst, narrowResult(x.DType))
			}
		})
	}
	if tensorCores {
		l.planHalf(k, shapes)
	}
	iv := liveRanges(k)
	order := make([]int, 0, k.NumRegs)
	for r := range k.NumRegs {
		if iv[r].start >= 0 && !absent[tile.Reg(r)] {
			order = append(order, r)
		}
	}
	sort.Slice(order, func(i, j int) bool { return iv[order[i]].start < iv[order[j]].start })
	type block struct{ off, size, end int }
	var live []block
	for _, r := range order {
		size := align16(shapes[r][0] * shapes[r][1] * l.size(tile.Reg(r)))
		kept := live[:0]
		for _, b := range live {
			if b.end >= iv[r].start {
				kept = append(kept, b)
			}
		}
		live = kept
		sort.Slice(live, func(i, j int) bool { return live[i].off < live[j].off })
		off := 0
		for _, b := range live {
			if off+size <= b.off {
				break
			}
			off = max(off, b.off+b.size)
		}
		l.offset[r] = off
		live = append(live, block{off, size, iv[r].end})
		l.bytes = max(l.bytes, off+size)
	}
	// A kernel without tile registers (a bit copy) still gets one aligned block: launches
	// always pass a non-empty dynamic shared-memory size.
	l.bytes = max(l.bytes, 16)
	return l
}

func align16(n int) int { return (n + 15) &^ 15 }

// planHalf gives 16-bit storage to both operands of every MMA that can run on tensor cores.
func (l *layout) planHalf(k *tile.Kernel, shapes []tile.Shape) {
	defs := map[tile.Reg][]tile.Instr{}
	walk(k.Body, func(in tile.Instr) {
		_, ds := regRefs(in)
		for _, r := range ds {
			defs[r] = append(defs[r], in)
		}
	})
	// halfOf is the 16-bit dtype every definition of r produces, or Invalid.
	halfOf := func(r tile.Reg) numerics.DType {
		dt := numerics.Invalid
		for _, in := range defs[r] {
			var d numerics.DType
			switch x := in.(type) {
			case tile.Load:
				d = k.Params[x.At.Param].DType
				if rounded := numerics.Round(d, x.Fill); rounded != x.Fill && x.Fill == x.Fill {
					return numerics.Invalid
				}
			case tile.Round:
				d = x.DType
			default:
				return numerics.Invalid
			}
			if (d != numerics.F16 && d != numerics.BF16) || (dt != numerics.Invalid && d != dt) {
				return numerics.Invalid
			}
			dt = d
		}
		return dt
	}
	walk(k.Body, func(in tile.Instr) {
		x, ok := in.(tile.MMA)
		if !ok || !tensorShape(x, shapes) || l.wide[x.Acc] {
			return
		}
		if a, b := halfOf(x.A), halfOf(x.B); a != numerics.Invalid && a == b {
			l.half[x.A], l.half[x.B] = a, b
		}
	})
}

// tensorShape reports whether an MMA fits the m16n8k16 tensor-core path: an f32 accumulator,
// no aliasing, and tile sides that are multiples of the instruction's.
func tensorShape(x tile.MMA, shapes []tile.Shape) bool {
	a, b := shapes[x.A], shapes[x.B]
	return x.AccDType == numerics.F32 && x.Acc != x.A && x.Acc != x.B &&
		a[0]%16 == 0 && a[1]%16 == 0 && b[1]%8 == 0
}

// walk visits every instruction in program order, descending into loops.
func walk(body []tile.Instr, fn func(tile.Instr)) {
	for _, in := range body {
		fn(in)
		if f, ok := in.(tile.For); ok {
			walk(f.Body, fn)
		}
	}
}

// regRefs lists the registers an instruction reads and writes.
func regRefs(in tile.Instr) (uses, defs []tile.Reg) {
	switch x := in.(type) {
	case tile.Full:
		return nil, []tile.Reg{x.Dst}
	case tile.Load:
		return nil, []tile.Reg{x.Dst}
	case tile.Store:
		return []tile.Reg{x.Src}, nil
	case tile.Unary:
		return []tile.Reg{x.Src}, []tile.Reg{x.Dst}
	case tile.Binary:
		return []tile.Reg{x.A, x.B}, []tile.Reg{x.Dst}
	case tile.Round:
		return []tile.Reg{x.Src}, []tile.Reg{x.Dst}
	case tile.Reduce:
		return []tile.Reg{x.Src}, []tile.Reg{x.Dst}
	case tile.MMA:
		return []tile.Reg{x.Acc, x.A, x.B}, []tile.Reg{x.Acc}
	case tile.OnlineSoftmax:
		return []tile.Reg{x.M, x.L, x.X}, []tile.Reg{x.M, x.L, x.P, x.Alpha}
	case tile.MaskScores:
		return []tile.Reg{x.Src}, []tile.Reg{x.Dst}
	case tile.MaskCols:
		return []tile.Reg{x.Src}, []tile.Reg{x.Dst}
	case tile.FFT:
		return []tile.Reg{x.Src}, []tile.Reg{x.Dst}
	}
	return nil, nil
}

type interval struct{ start, end int }

// liveRanges numbers instructions in pre-order (a For gets the number before its body) and
// returns, per register, the span from its first to its last reference, widened to a whole
// loop when the register lives across the loop's boundary or is read in an iteration before
// that iteration writes it (a loop-carried value). Unreferenced registers get start -1.
func liveRanges(k *tile.Kernel) []interval {
	iv := make([]interval, k.NumRegs)
	for i := range iv {
		iv[i] = interval{-1, -1}
	}
	firstUse := map[[2]int]bool{} // (loop start, reg): first reference inside the loop reads it
	type loop struct{ start, end int }
	var loops []loop
	pc := 0
	var visit func(body []tile.Instr, open []int)
	visit = func(body []tile.Instr, open []int) {
		for _, in := range body {
			my := pc
			pc++
			uses, defs := regRefs(in)
			for _, rs := range [][]tile.Reg{uses, defs} {
				for _, r := range rs {
					if iv[r].start < 0 {
						iv[r].start = my
					}
					iv[r].end = max(iv[r].end, my)
				}
			}
			for _, s := range open {
				for _, r := range uses {
					if _, seen := firstUse[[2]int{s, int(r)}]; !seen {
						firstUse[[2]int{s, int(r)}] = true
					}
				}
				for _, r := range defs {
					if _, seen := firstUse[[2]int{s, int(r)}]; !seen {
						firstUse[[2]int{s, int(r)}] = false
					}
				}
			}
			if f, ok := in.(tile.For); ok {
				visit(f.Body, append(open, my))
				loops = append(loops, loop{my, pc - 1})
			}
		}
	}
	visit(k.Body, nil)
	for changed := true; changed; {
		changed = false
		for _, lp := range loops {
			for r := range iv {
				v := &iv[r]
				if v.start < 0 || v.end < lp.start || v.start > lp.end {
					continue
				}
				inside := v.start >= lp.start && v.end <= lp.end
				if !inside || firstUse[[2]int{lp.start, r}] {
					if v.start > lp.start || v.end < lp.end {
						v.start, v.end = min(v.start, lp.start), max(v.end, lp.end)
						changed = true
					}
				}
			}
		}
	}
	return iv
}

// maxShared is the most dynamic shared memory one CTA may use on sm_90 (227 KiB).
const maxShared = compiler.SharedBudget
