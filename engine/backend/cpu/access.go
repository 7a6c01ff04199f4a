package cpu

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// access is a tile.Access with what does not change between executions worked out.
type access struct {
	a          tile.Access
	dt         numerics.DType
	rowN, colN int
	// load32: loads of this dtype are exact in f32, so they fill the register's f32 form.
	load32 bool
}

func newAccess(a tile.Access, p tile.Param) *access {
	at := &access{a: a, dt: p.DType, rowN: 1, colN: 1}
	for _, d := range a.RowDims {
		at.rowN *= d
	}
	for _, d := range a.ColDims {
		at.colN *= d
	}
	switch p.DType {
	case numerics.F32, numerics.F16, numerics.BF16, numerics.F8E4M3, numerics.F8E5M2, numerics.I8, numerics.Bool:
		at.load32 = true
	}
	return at
}

// colRun is a stretch of tile columns c0..c0+n-1 whose buffer offsets form an arithmetic
// progression off0 + t*stride. A plain 2-D block has one run per row with stride 1.
type colRun struct{ c0, n, off0, stride int }

type loadScratch struct {
	runs     []colRun
	copyCols []int // copyBits: (col, source offset, destination offset) triples
}

// unravel maps a flat row (or col) index to its offset: row-major over dims, dotted with
// strides. An index past the end keeps counting in the outermost dim, which is the offset that
// unguarded device code computes.
func unravel(i int, dims, strides []int) int {
	off := 0
	for k := len(dims) - 1; k > 0; k-- {
		d := dims[k]
		q := i / d
		off += (i - q*d) * strides[k]
		i = q
	}
	return off + i*strides[0]
}

// columns groups the tile's unmasked columns into runs; all reports whether none is masked.
func (w *worker) columns(at *access, cs int) (runs []colRun, all bool) {
	a := &at.a
	runs, all = w.ld.runs[:0], true
	if len(a.ColDims) == 1 {
		// One col dim: offsets are linear in j even past the end, so there is one run.
		valid := a.Cols
		if a.Mask {
			valid = max(0, min(a.Cols, at.colN-cs))
		}
		if valid > 0 {
			runs = append(runs, colRun{c0: 0, n: valid, off0: cs * a.ColStrides[0], stride: a.ColStrides[0]})
		}
		w.ld.runs = runs
		return runs, valid == a.Cols
	}
	for c := range a.Cols {
		j := cs + c
		if a.Mask && j >= at.colN {
			all = false
			continue
		}
		off := unravel(j, a.ColDims, a.ColStrides)
		if k := len(runs) - 1; k >= 0 && runs[k].c0+runs[k].n == c {
			r := &runs[k]
			if r.n == 1 {
				r.stride, r.n = off-r.off0, 2
				continue
			}
			if off == r.off0+r.n*r.stride {
				r.n++
				continue
			}
		}
		runs = append(runs, colRun{c0: c, n: 1, off0: off, stride: 1})
	}
	w.ld.runs = runs
	return runs, all
}

// inBounds reports whether every element of a run starting at start lies inside [0, n).
func inBounds(start, stride, cnt, n int) bool {
	last := start + (cnt-1)*stride
	return start >= 0 && start < n && last >= 0 && last < n
}

func (w *worker) load(at *access, dst tile.Reg, fill float64) {
	a := &at.a
	base, rs, cs := a.Base.Eval(w.vars), a.RowStart.Eval(w.vars), a.ColStart.Eval(w.vars)
	runs, all := w.columns(at, cs)
	pb := w.p.params[a.Param]
	t := &w.regs[dst]
	if at.load32 && exact32(fill) {
		loadRows(at, t.out32(), float32(fill), base, rs, runs, all, func(start, stride int, dst []float32) {
			decode32(at.dt, pb.data, pb.n, start, stride, dst)
		})
		return
	}
	loadRows(at, t.out64(), fill, base, rs, runs, all, func(start, stride int, dst []float64) {
		decode64(at.dt, pb.data, pb.n, start, stride, dst)
	})
}

// loadRows fills a register row by row: masked rows and columns get fill, each column run is
// decoded from the buffer.
func loadRows[T float32 | float64](at *access, out []T, fill T, base, rs int, runs []colRun, all bool, decode func(start, stride int, dst []T)) {
	a := &at.a
	for r := range a.Rows {
		row := out[r*a.Cols : (r+1)*a.Cols]
		i := rs + r
		masked := a.Mask && i >= at.rowN
		if masked || !all {
			for c := range row {
				row[c] = fill
			}
			if masked {
				continue
			}
		}
		ro := base + unravel(i, a.RowDims, a.RowStrides)
		for _, cr := range runs {
			decode(ro+cr.off0, cr.stride, row[cr.c0:cr.c0+cr.n])
		}
	}
}

func (w *worker) store(at *access, src tile.Reg) {
	a := &at.a
	base, rs, cs := a.Base.Eval(w.vars), a.RowStart.Eval(w.vars), a.ColStart.Eval(w.vars)
	runs, _ := w.columns(at, cs)
	pb := w.p.params[a.Param]
	t := &w.regs[src]
	var v32 []float32
	var v64 []float64
	if t.has32 && at.dt == numerics.F32 {
		v32 = t.f32
	} else {
		v64 = t.get64()
	}
	for r := range a.Rows {
		i := rs + r
		if a.Mask && i >= at.rowN {
			continue
		}
		ro := base + unravel(i, a.RowDims, a.RowStrides)
		for _, cr := range runs {
			lo := r*a.Cols + cr.c0
			if v32 != nil {
				encodeF32From32(pb.data, pb.n, ro+cr.off0, cr.stride, v32[lo:lo+cr.n])
			} else {
				encode64(at.dt, pb.data, pb.n, ro+cr.off0, cr.stride, v64[lo:lo+cr.n])
			}
		}
	}
}

// nanF32 is the bit pattern numerics.Encode gives every NaN stored as f32.
var nanF32 = uint32(numerics.Encode(numerics.F32, math.NaN()))

// copyBits is tile.Copy: element bit patterns from one access to the other, never decoded.
// Column offsets of both sides are worked out once per call; elements masked in either access
// are skipped, writes outside the destination buffer are dropped and reads outside the source
// buffer give the dtype's canonical NaN, as a Load then Store would.
func (w *worker) copyBits(from, to *access) {
	f, t := &from.a, &to.a
	fb, fr, fc := f.Base.Eval(w.vars), f.RowStart.Eval(w.vars), f.ColStart.Eval(w.vars)
	tb, tr, tc := t.Base.Eval(w.vars), t.RowStart.Eval(w.vars), t.ColStart.Eval(w.vars)
	src, dst := w.p.params[f.Param], w.p.params[t.Param]
	size := from.dt.Size()
	nan := numerics.Encode(from.dt, math.NaN())
	cols := w.ld.copyCols[:0]
	for c := range f.Cols {
		if (f.Mask && fc+c >= from.colN) || (t.Mask && tc+c >= to.colN) {
			continue
		}
		cols = append(cols, c, unravel(fc+c, f.ColDims, f.ColStrides), unravel(tc+c, t.ColDims, t.ColStrides))
	}
	w.ld.copyCols = cols
	for r := range f.Rows {
		if (f.Mask && fr+r >= from.rowN) || (t.Mask && tr+r >= to.rowN) {
			continue
		}
		fo := fb + unravel(fr+r, f.RowDims, f.RowStrides)
		to := tb + unravel(tr+r, t.RowDims, t.RowStrides)
		for k := 0; k < len(cols); k += 3 {
			d := to + cols[k+2]
			if d < 0 || d >= dst.n {
				continue
			}
			bits := nan
			if s := fo + cols[k+1]; s >= 0 && s < src.n {
				bits = bitsAt(src.data, s, size)
			}
			putBits(dst.data, d, size, bits)
		}
	}
}
