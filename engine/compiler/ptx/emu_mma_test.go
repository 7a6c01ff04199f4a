package ptx

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The emulator's warp-wide matrix instructions, for the general path's tensor-core MMAs
// (tensor.go): ldmatrix and mma.sync m16n8k16, with the fragment layouts of the PTX ISA. A
// warp exchanges operands through its shuffle slots one register at a time (every lane
// deposits, the warp meets, every lane reads all 32, the warp meets again), so the lanes must
// be converged as the hardware requires, or the rendezvous times out. The MMA is modelled as
// ptxsim models it: the 16 products of a dot product summed in float64, rounded once to f32,
// added to the f32 accumulator; tests compare its results with a tolerance, never bitwise.

// warpMatrix executes in if it is one of these instructions; false when it is not.
func (c *emuCTA) warpMatrix(in *emuInstr, lane, warp int, regs []uint64) bool {
	switch {
	case strings.HasPrefix(in.op, "ldmatrix.sync.aligned.m8n8."):
		c.ldmatrix(in, lane, warp, regs)
	case strings.HasPrefix(in.op, "mma.sync.aligned.m16n8k16.row.col.f32."):
		dt := numerics.BF16
		if strings.Contains(in.op, ".f16.f16.") {
			dt = numerics.F16
		}
		c.mmaSync(in, dt, lane, warp, regs)
	default:
		return false
	}
	return true
}

// gather returns v of every lane of the warp.
func (c *emuCTA) gather(warp, lane int, v uint64) [32]uint64 {
	bar := c.warps[warp]
	c.shuffle[warp][lane] = v
	bar.wait()
	all := c.shuffle[warp]
	bar.wait()
	return all
}

// ldmatrix: lanes 8q..8q+7 give the row addresses of matrix q; lane l receives row l/4,
// columns 2(l%4) and 2(l%4)+1 of each matrix, or with .trans column l/4 of rows 2(l%4), +1.
func (c *emuCTA) ldmatrix(in *emuInstr, lane, warp int, regs []uint64) {
	dst, at := in.args[0].regs, in.args[1]
	rows := c.gather(warp, lane, regs[at.reg]+at.imm)
	half := func(a uint64) uint64 {
		if a%2 != 0 || a+2 > uint64(len(c.shared)) {
			panic(fmt.Sprintf("ldmatrix reads shared %d of %d bytes", a, len(c.shared)))
		}
		return uint64(binary.LittleEndian.Uint16(c.shared[a:]))
	}
	trans := strings.Contains(in.op, ".trans")
	for q, r := range dst {
		m := rows[8*q : 8*q+8]
		for _, a := range m {
			if a%16 != 0 {
				panic(fmt.Sprintf("ldmatrix row address %d not 16-byte aligned", a))
			}
		}
		var lo, hi uint64
		if trans {
			lo, hi = half(m[2*(lane%4)]+uint64(2*(lane/4))), half(m[2*(lane%4)+1]+uint64(2*(lane/4)))
		} else {
			lo, hi = half(m[lane/4]+uint64(4*(lane%4))), half(m[lane/4]+uint64(4*(lane%4)+2))
		}
		regs[r] = lo | hi<<16
	}
}

// mmaSync: A row-major (a0: row g, k 2t..2t+1; a1: row g+8; a2: k+8; a3: both), B column-major
// (b0: k 2t..2t+1 of column g; b1: k+8), C and D (c0, c1: row g, columns 2t, 2t+1; c2, c3:
// row g+8), with g = lane/4 and t = lane%4.
func (c *emuCTA) mmaSync(in *emuInstr, dt numerics.DType, lane, warp int, regs []uint64) {
	d, ar, br, cr := in.args[0].regs, in.args[1].regs, in.args[2].regs, in.args[3].regs
	var A [16][16]float64
	var B [16][8]float64
	dec := func(x uint64) float64 { return numerics.Decode(dt, x&0xFFFF) }
	for q, r := range ar {
		all := c.gather(warp, lane, regs[r])
		for l, x := range all {
			row, col := l/4+8*(q%2), 2*(l%4)+8*(q/2)
			A[row][col], A[row][col+1] = dec(x), dec(x>>16)
		}
	}
	for q, r := range br {
		all := c.gather(warp, lane, regs[r])
		for l, x := range all {
			k := 2*(l%4) + 8*q
			B[k][l/4], B[k+1][l/4] = dec(x), dec(x>>16)
		}
	}
	out := make([]uint64, len(d))
	for q := range d {
		row, col := lane/4+8*(q/2), 2*(lane%4)+q%2
		sum := 0.0
		for k := range 16 {
			sum += A[row][k] * B[k][col]
		}
		out[q] = uint64(math.Float32bits(f32of(regs[cr[q]]) + float32(sum)))
	}
	for q, r := range d {
		regs[r] = out[q]
	}
}
