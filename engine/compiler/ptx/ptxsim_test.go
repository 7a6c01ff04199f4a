package ptx

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// ptxsim runs one CTA of a dedicated kernel (matmul, attention) on the CPU, so the loaders,
// the swizzled layouts, the pipelines' stage arithmetic, the fragments, the masked epilogues and
// the synchronisation protocols are tested in CI, where no GPU is. Each warpgroup (128 threads;
// the whole CTA when it is not a multiple of 128) has its own program counter, its threads run in
// lockstep (a branch must be uniform within the warpgroup, which the simulator checks), and a
// warpgroup runs until it blocks: at a named barrier (bar.sync) until the generation is complete,
// at an mbarrier wait (try_wait) until the phase completes, or at exit. So a producer runs as far
// ahead as its barriers let it, which is where a missing wait shows (it overwrites data not yet
// read), and a protocol that can stall shows as a deadlock. cp.async completes at once and wgmma
// when issued: the simulator proves indexing and protocols, not the absence of hardware races
// (the GPU check does that). Tensor-core steps are modelled as: each 16-k chunk (32-k for e4m3
// wgmma) summed exactly, rounded once to f32, added to the accumulator (the result is compared
// with a tolerance, not bitwise). wgmma operands are addressed as the PTX ISA's canonical
// layouts say, with the 128-byte swizzle applied to the shared address (e4m3: one byte an
// element, both operands K-major).
type ptxsim struct {
	dt      numerics.DType // the 16-bit operand type (mma.sync, ldmatrix, 16-bit wgmma)
	out     numerics.DType // what cvt.rn.{f16,bf16}x2 encodes to: dt unless set
	n       int            // threads
	ins     []simIns
	labels  map[string]int
	regs    map[string][]uint64
	smem    []byte
	smemSym uint64
	global  map[uint64][]byte // base address -> buffer
	params  map[string]uint64
	ctaid   [2]uint64
	named   map[uint64]*simNamed // named barriers by id
	mbars   map[uint64]*simMbar  // mbarriers by shared address
}

// simNamed is a named barrier's current generation: threads arrived, and the warpgroups
// blocked in bar.sync on it.
type simNamed struct {
	arrived, count int
	waiting        []*simGroup
}

// simMbar is an mbarrier: arrivals per phase, arrivals still pending, phases completed.
type simMbar struct{ count, pending, completed int }

type simGroup struct {
	lo, hi, pc int
	done       bool
	blocked    bool // in bar.sync until its generation completes
}

type simIns struct {
	pred string
	neg  bool
	op   string
	args []string
	ops  []simArg
	regs [][][]uint64 // per operand in braces: its registers' lanes
	line string
}

// simArg is an operand resolved once: a register's lanes, or a constant (immediates,
// special registers read per CTA are kept by name).
type simArg struct {
	lanes   []uint64
	imm     uint64
	special string
	isImm   bool
}

func newSim(text string, dt numerics.DType, threads, shared int) (*ptxsim, error) {
	s := &ptxsim{dt: dt, out: dt, n: threads, labels: map[string]int{}, params: map[string]uint64{}, global: map[uint64][]byte{}}
	s.smemSym = 16 // not 1024-aligned: the kernel must align it
	s.smem = make([]byte, shared+int(s.smemSym))
	body := false
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, ".maxntid"):
			body = true
			continue
		case !body || t == "" || t == "{" || t == "}" || strings.HasPrefix(t, "//") || strings.HasPrefix(t, ".reg"):
			continue
		case strings.HasSuffix(t, ":"):
			s.labels[strings.TrimSuffix(t, ":")] = len(s.ins)
			continue
		}
		t = strings.TrimSuffix(t, ";")
		in := simIns{line: t}
		if strings.HasPrefix(t, "@") {
			g, rest, _ := strings.Cut(t, " ")
			g = strings.TrimPrefix(g, "@")
			in.neg = strings.HasPrefix(g, "!")
			in.pred = strings.TrimPrefix(g, "!")
			t = rest
		}
		op, rest, _ := strings.Cut(t, " ")
		in.op = op
		if rest != "" {
			in.args = strings.Split(rest, ", ")
		}
		s.ins = append(s.ins, in)
	}
	s.regs = map[string][]uint64{}
	for i := range s.ins {
		for _, a := range s.ins[i].args {
			s.ins[i].ops = append(s.ins[i].ops, s.resolve(a))
			var list [][]uint64
			if strings.HasPrefix(a, "{") {
				for _, r := range regList(a) {
					list = append(list, s.reg(r))
				}
			}
			s.ins[i].regs = append(s.ins[i].regs, list)
		}
	}
	return s, nil
}

func (s *ptxsim) resolve(o string) simArg {
	switch {
	case strings.HasPrefix(o, "[") || strings.HasPrefix(o, "{") || strings.HasPrefix(o, "$"):
		return simArg{}
	case o == "%tid.x" || o == "%ctaid.x" || o == "%ctaid.y" || o == "tq_smem":
		return simArg{special: o}
	case strings.HasPrefix(o, "%"):
		return simArg{lanes: s.reg(o)}
	}
	return simArg{imm: s.val(o, 0), isImm: true}
}

func (s *ptxsim) get(a simArg, t int) uint64 {
	switch {
	case a.lanes != nil:
		return a.lanes[t]
	case a.isImm:
		return a.imm
	}
	return s.val(a.special, t)
}

func (s *ptxsim) reg(name string) []uint64 {
	if s.regs[name] == nil {
		s.regs[name] = make([]uint64, s.n)
	}
	return s.regs[name]
}

// val reads operand o for thread t: a register, an immediate or a special register.
func (s *ptxsim) val(o string, t int) uint64 {
	switch o {
	case "%tid.x":
		return uint64(t)
	case "%ctaid.x":
		return s.ctaid[0]
	case "%ctaid.y":
		return s.ctaid[1]
	case "tq_smem":
		return s.smemSym
	}
	if strings.HasPrefix(o, "%") {
		return s.reg(o)[t]
	}
	if strings.HasPrefix(o, "0f") {
		v, err := strconv.ParseUint(o[2:], 16, 32)
		if err != nil {
			panic(o)
		}
		return v
	}
	if strings.HasPrefix(o, "0x") {
		v, err := strconv.ParseUint(o[2:], 16, 64)
		if err != nil {
			panic(o)
		}
		return v
	}
	v, err := strconv.ParseInt(o, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("operand %q", o))
	}
	return uint64(v)
}

// addr parses [reg+off] or [sym].
func (s *ptxsim) addr(o string, t int) uint64 {
	o = strings.Trim(o, "[]")
	base, off, _ := strings.Cut(o, "+")
	if p, ok := s.params[base]; ok {
		return p
	}
	a := s.val(base, t)
	if off != "" {
		d, _ := strconv.ParseInt(off, 10, 64)
		a += uint64(d)
	}
	return a
}

func (s *ptxsim) globalBytes(a uint64, n int) ([]byte, error) {
	for base, buf := range s.global {
		if a >= base && a+uint64(n) <= base+uint64(len(buf)) {
			return buf[a-base : a-base+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("global access of %d bytes at %#x outside every buffer", n, a)
}

func (s *ptxsim) smemBytes(a uint64, n int) ([]byte, error) {
	if a+uint64(n) > uint64(len(s.smem)) || a%uint64(n) != 0 && n <= 16 {
		return nil, fmt.Errorf("shared access of %d bytes at %#x (size %d, or misaligned)", n, a, len(s.smem))
	}
	return s.smem[a : a+uint64(n)], nil
}

func f32bits(v uint64) float32 { return math.Float32frombits(uint32(v)) }

func (s *ptxsim) half(bits uint64) float64 { return numerics.Decode(s.dt, bits&0xFFFF) }

// run executes the kernel for one CTA.
func (s *ptxsim) run() (err error) {
	for _, r := range s.regs {
		clear(r)
	}
	s.named, s.mbars = map[uint64]*simNamed{}, map[uint64]*simMbar{}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	size := 128
	if s.n%size != 0 {
		size = s.n
	}
	var groups []*simGroup
	for lo := 0; lo < s.n; lo += size {
		groups = append(groups, &simGroup{lo: lo, hi: lo + size})
	}
	active := make([]bool, s.n)
	steps, stalled := 0, 0
	for cur := 0; ; cur = (cur + 1) % len(groups) {
		live := 0
		for _, g := range groups {
			if !g.done {
				live++
			}
		}
		if live == 0 {
			break
		}
		g := groups[cur]
		if g.done || g.blocked {
			stalled++
			if stalled > 2*len(groups) {
				return fmt.Errorf("deadlock: every warpgroup is blocked or waiting (pcs %s)", s.pcs(groups))
			}
			continue
		}
		progressed, err := s.runGroup(g, active, &steps)
		if err != nil {
			return err
		}
		if progressed {
			stalled = 0
		} else if stalled++; stalled > 2*len(groups) {
			return fmt.Errorf("deadlock: every warpgroup is blocked or waiting (pcs %s)", s.pcs(groups))
		}
	}
	for id, b := range s.named {
		if b.arrived != 0 {
			return fmt.Errorf("named barrier %d left with %d arrivals at exit", id, b.arrived)
		}
	}
	return nil
}

func (s *ptxsim) pcs(groups []*simGroup) string {
	var out []string
	for _, g := range groups {
		state := "running"
		switch {
		case g.done:
			state = "exited"
		case g.blocked:
			state = "in bar.sync"
		}
		line := ""
		if g.pc < len(s.ins) {
			line = s.ins[g.pc].line
		}
		out = append(out, fmt.Sprintf("threads %d-%d %s at %q", g.lo, g.hi-1, state, line))
	}
	return strings.Join(out, "; ")
}

// runGroup runs g until it blocks, waits on an incomplete mbarrier phase or exits; it reports
// whether anything changed.
func (s *ptxsim) runGroup(g *simGroup, active []bool, steps *int) (bool, error) {
	progressed := false
	for {
		if *steps++; *steps > 20_000_000 {
			return progressed, fmt.Errorf("runaway")
		}
		if g.pc >= len(s.ins) {
			g.done = true
			return true, nil
		}
		in := s.ins[g.pc]
		g.pc++
		for t := range active {
			active[t] = t >= g.lo && t < g.hi
			if active[t] && in.pred != "" {
				active[t] = (s.regs[in.pred][t] != 0) != in.neg
			}
		}
		switch {
		case in.op == "bra":
			for t := g.lo + 1; t < g.hi; t++ {
				if active[t] != active[g.lo] {
					return progressed, fmt.Errorf("divergent branch at %q", in.line)
				}
			}
			if active[g.lo] {
				g.pc = s.labels[in.args[0]]
			}
			continue
		case in.op == "ret":
			g.done = true
			return true, nil
		case in.op == "bar.sync" || in.op == "bar.arrive":
			blocked, err := s.barrier(in, g, active)
			if err != nil {
				return progressed, fmt.Errorf("%q: %w", in.line, err)
			}
			progressed = true
			if blocked {
				return true, nil
			}
			continue
		case strings.HasPrefix(in.op, "mbarrier.try_wait"):
			if err := s.exec(in, active); err != nil {
				return progressed, fmt.Errorf("%q: %w", in.line, err)
			}
			if !s.anyTrue(in.ops[0], active) && s.anyActive(active) {
				g.pc-- // retry this wait when another warpgroup has moved
				return progressed, nil
			}
			progressed = true
			continue
		}
		if err := s.exec(in, active); err != nil {
			return progressed, fmt.Errorf("%q: %w", in.line, err)
		}
		progressed = true
	}
}

func (s *ptxsim) anyActive(active []bool) bool {
	for _, a := range active {
		if a {
			return true
		}
	}
	return false
}

func (s *ptxsim) anyTrue(a simArg, active []bool) bool {
	for t, on := range active {
		if on && a.lanes[t] != 0 {
			return true
		}
	}
	return false
}

func (s *ptxsim) exec(in simIns, active []bool) error {
	a := in.args
	switch {
	case strings.HasPrefix(in.op, "wgmma.mma_async"):
		return s.wgmma(in, active)
	case strings.HasPrefix(in.op, "mma.sync"):
		return s.mma(in, active)
	case strings.HasPrefix(in.op, "ldmatrix"):
		return s.ldmatrix(in, active)
	case in.op == "shfl.sync.bfly.b32":
		return s.shfl(in, active)
	case strings.HasPrefix(in.op, "setmaxnreg"):
		return nil
	case strings.HasPrefix(in.op, "fence") || strings.HasPrefix(in.op, "wgmma.") ||
		in.op == "cp.async.commit_group" || in.op == "cp.async.wait_group" || in.op == "cp.async.wait_all":
		return nil
	}
	for t := 0; t < s.n; t++ {
		if !active[t] {
			continue
		}
		ops := in.ops
		v := func(i int) uint64 { return s.get(ops[i], t) }
		set := func(x uint64) { ops[0].lanes[t] = x }
		b32 := func(x uint64) { set(x & 0xFFFFFFFF) }
		f32 := func(x float32) { set(uint64(math.Float32bits(x))) }
		i32 := func(i int) int32 { return int32(uint32(v(i))) }
		pred := func(c bool) {
			if c {
				set(1)
			} else {
				set(0)
			}
		}
		switch in.op {
		case "mov.u32", "mov.f32", "mov.b32":
			b32(v(1))
		case "and.b32":
			b32(v(1) & v(2))
		case "or.b32":
			b32(v(1) | v(2))
		case "xor.b32":
			b32(v(1) ^ v(2))
		case "shl.b32":
			b32(v(1) << v(2))
		case "shr.u32":
			b32((v(1) & 0xFFFFFFFF) >> v(2))
		case "add.s32":
			b32(uint64(i32(1) + i32(2)))
		case "sub.s32":
			b32(uint64(i32(1) - i32(2)))
		case "mul.lo.s32":
			b32(uint64(i32(1) * i32(2)))
		case "mad.lo.s32":
			b32(uint64(i32(1)*i32(2) + i32(3)))
		case "div.u32":
			b32(uint64(uint32(v(1)) / uint32(v(2))))
		case "rem.u32":
			b32(uint64(uint32(v(1)) % uint32(v(2))))
		case "min.s32":
			b32(uint64(min(i32(1), i32(2))))
		case "setp.lt.s32":
			pred(i32(1) < i32(2))
		case "setp.le.s32":
			pred(i32(1) <= i32(2))
		case "setp.ge.s32":
			pred(i32(1) >= i32(2))
		case "mbarrier.init.shared::cta.b64":
			n := int(v(1))
			s.mbars[s.addr(a[0], t)] = &simMbar{count: n, pending: n}
		case "mbarrier.arrive.shared::cta.b64":
			if err := s.mbarArrive(s.addr(a[1], t)); err != nil {
				return err
			}
		case "cp.async.mbarrier.arrive.noinc.shared::cta.b64": // the copies completed at once
			if err := s.mbarArrive(s.addr(a[0], t)); err != nil {
				return err
			}
		case "mbarrier.try_wait.parity.shared::cta.b64":
			m := s.mbars[s.addr(a[1], t)]
			if m == nil {
				return fmt.Errorf("wait on an uninitialised mbarrier")
			}
			pred(uint64(m.completed&1) != v(2)&1)
		case "setp.eq.u32":
			pred(uint32(v(1)) == uint32(v(2)))
		case "setp.ge.u32":
			pred(uint32(v(1)) >= uint32(v(2)))
		case "setp.ne.u32":
			pred(uint32(v(1)) != uint32(v(2)))
		case "setp.nan.f32":
			f := f32bits(v(1))
			pred(f != f)
		case "setp.eq.f32":
			pred(f32bits(v(1)) == f32bits(v(2)))
		case "not.pred":
			pred(v(1) == 0)
		case "selp.f32":
			if v(3) != 0 {
				set(v(1))
			} else {
				set(v(2))
			}
		case "mul.rn.f32":
			f32(f32bits(v(1)) * f32bits(v(2)))
		case "add.rn.f32":
			f32(f32bits(v(1)) + f32bits(v(2)))
		case "div.rn.f32":
			f32(f32bits(v(1)) / f32bits(v(2)))
		case "neg.f32":
			b32(v(1) ^ 0x80000000)
		case "fma.rn.f32":
			f32(float32(math.FMA(float64(f32bits(v(1))), float64(f32bits(v(2))), float64(f32bits(v(3))))))
		case "max.NaN.f32":
			x, y := f32bits(v(1)), f32bits(v(2))
			if x != x || y != y {
				b32(0x7FFFFFFF)
			} else {
				f32(max(x, y))
			}
		case "ex2.approx.ftz.f32":
			f32(ftz(float32(math.Exp2(float64(ftz(f32bits(v(1))))))))
		case "selp.b32", "selp.b64":
			if v(3) != 0 {
				set(v(1))
			} else {
				set(v(2))
			}
		case "and.pred":
			pred(v(1) != 0 && v(2) != 0)
		case "ld.param.u64":
			set(s.addr(a[1], t))
		case "cvta.to.global.u64":
			set(v(1))
		case "mul.wide.s32":
			set(uint64(int64(i32(1)) * int64(i32(2))))
		case "cvt.s64.s32":
			set(uint64(int64(i32(1))))
		case "cvt.u64.u32":
			set(v(1) & 0xFFFFFFFF)
		case "add.s64":
			set(v(1) + v(2))
		case "or.b64":
			set(v(1) | v(2))
		case "mad.lo.s64":
			set(v(1)*v(2) + v(3))
		case "ld.global.f32":
			g, err := s.globalBytes(s.addr(a[1], t), 4)
			if err != nil {
				return err
			}
			set(uint64(g[0]) | uint64(g[1])<<8 | uint64(g[2])<<16 | uint64(g[3])<<24)
		case "st.global.v2.f32":
			at := s.addr(a[0], t)
			if at%8 != 0 {
				return fmt.Errorf("misaligned store at %#x", at)
			}
			g, err := s.globalBytes(at, 8)
			if err != nil {
				return err
			}
			for i, r := range regList(a[1]) {
				x := uint32(s.val(r, t))
				g[4*i], g[4*i+1], g[4*i+2], g[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
			}
		case "cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32":
			set(s.enc16(f32bits(v(1)))<<16 | s.enc16(f32bits(v(2))))
		case "cp.async.cg.shared.global":
			dst, src, n := s.addr(a[0], t), s.addr(a[1], t), 16
			if len(a) > 3 {
				n = int(v(3))
			}
			d, err := s.smemBytes(dst, 16)
			if err != nil {
				return err
			}
			clear(d)
			if n > 0 {
				if src%16 != 0 {
					return fmt.Errorf("cp.async source %#x not 16-byte aligned", src)
				}
				g, err := s.globalBytes(src, n)
				if err != nil {
					return err
				}
				copy(d, g)
			}
		case "st.global.b32":
			at := s.addr(a[0], t)
			if at%4 != 0 {
				return fmt.Errorf("misaligned store at %#x", at)
			}
			g, err := s.globalBytes(at, 4)
			if err != nil {
				return err
			}
			x := uint32(v(1))
			g[0], g[1], g[2], g[3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		default:
			return fmt.Errorf("simulator: opcode %s", in.op)
		}
	}
	return nil
}

// enc16 is cvt.rn to the kernel's 16-bit type; NaN gives the hardware's 0x7FFF, which the
// kernel must canonicalise.
func (s *ptxsim) enc16(f float32) uint64 {
	if f != f {
		return 0x7FFF
	}
	return numerics.Encode(s.out, float64(f))
}

func regList(o string) []string { return strings.Split(strings.Trim(o, "{}"), ",") }

func (s *ptxsim) u16(a uint64) uint64 {
	b, err := s.smemBytes(a&^1, 2)
	if err != nil {
		panic(err)
	}
	return uint64(b[0]) | uint64(b[1])<<8
}

// ldmatrix: lanes 8q..8q+7 give the row addresses of matrix q; thread l receives row l/4,
// cols 2(l%4), +1 of each matrix (.trans: rows 2(l%4), +1 of col l/4).
func (s *ptxsim) ldmatrix(in simIns, active []bool) error {
	dst := in.regs[0]
	trans := strings.Contains(in.op, ".trans")
	for w := 0; w < s.n/32; w++ {
		if !active[32*w] {
			continue
		}
		for q := range dst {
			var rows [8]uint64
			for r := range rows {
				rows[r] = s.addr(in.args[1], 32*w+8*q+r)
				if rows[r]%16 != 0 {
					return fmt.Errorf("ldmatrix row address %#x not 16-byte aligned", rows[r])
				}
			}
			for l := 0; l < 32; l++ {
				var lo, hi uint64
				if trans {
					lo, hi = s.u16(rows[2*(l%4)]+uint64(2*(l/4))), s.u16(rows[2*(l%4)+1]+uint64(2*(l/4)))
				} else {
					lo, hi = s.u16(rows[l/4]+uint64(4*(l%4))), s.u16(rows[l/4]+uint64(4*(l%4)+2))
				}
				dst[q][32*w+l] = lo | hi<<16
			}
		}
	}
	return nil
}

// mma: m16n8k16, A row (a0: rows g, k 2c..; a1: row g+8; a2: k+8; a3: both), B col (b0: k
// 2c.., n g; b1: k+8), C/D (c0,c1: row g, cols 2c..; c2,c3: row g+8).
func (s *ptxsim) mma(in simIns, active []bool) error {
	d, ar, br, cr := in.regs[0], in.regs[1], in.regs[2], in.regs[3]
	for w := 0; w < s.n/32; w++ {
		if !active[32*w] {
			continue
		}
		var A [16][16]float64
		var B [16][8]float64
		for l := 0; l < 32; l++ {
			g, c := l/4, l%4
			t := 32*w + l
			for q := 0; q < 4; q++ {
				x := ar[q][t]
				row, col := g+8*(q%2), 2*c+8*(q/2)
				A[row][col], A[row][col+1] = s.half(x), s.half(x>>16)
			}
			for q := 0; q < 2; q++ {
				x := br[q][t]
				B[2*c+8*q][g], B[2*c+8*q+1][g] = s.half(x), s.half(x>>16)
			}
		}
		out := make([][4]uint64, 32)
		for l := 0; l < 32; l++ {
			g, c := l/4, l%4
			for q := 0; q < 4; q++ {
				row, col := g+8*(q/2), 2*c+q%2
				sum := 0.0
				for k := 0; k < 16; k++ {
					sum += A[row][k] * B[k][col]
				}
				acc := f32bits(cr[q][32*w+l])
				out[l][q] = uint64(math.Float32bits(acc + float32(sum)))
			}
		}
		for l := 0; l < 32; l++ {
			for q := 0; q < 4; q++ {
				d[q][32*w+l] = out[l][q]
			}
		}
	}
	return nil
}

// swizzle128 applies the 128-byte swizzle to a shared address: bits 4-6 ^= bits 7-9.
func swizzle128(a uint64) uint64 { return a ^ ((a>>7)&7)<<4 }

func (s *ptxsim) wgmma(in simIns, active []bool) error {
	shape, types, _ := strings.Cut(strings.TrimPrefix(in.op, "wgmma.mma_async.sync.aligned.m64n"), ".")
	ns, ks, _ := strings.Cut(shape, "k")
	n, _ := strconv.Atoi(ns)
	kDepth, _ := strconv.Atoi(ks)
	fp8 := types == "f32.e4m3.e4m3"
	d := in.regs[0]
	// A from registers: d, {a0..a3}, b-desc, scale-d, 1, 1, trans-b; from shared memory:
	// d, a-desc, b-desc, scale-d, 1, 1, trans-a (0), trans-b. 8-bit types (from shared memory
	// only) have no transpose operands: d, a-desc, b-desc, scale-d, 1, 1, both K-major.
	regA := strings.HasPrefix(in.args[1], "{")
	transIdx := 7
	if regA {
		transIdx = 6
	}
	if fp8 {
		if len(d) != n/2 || len(in.args) != 6 || regA || kDepth != 32 {
			return fmt.Errorf("wgmma e4m3 form")
		}
	} else if kDepth != 16 || len(d) != n/2 || len(in.args) != transIdx+1 || (!regA && in.args[6] != "0") || (regA && len(in.regs[1]) != 4) {
		return fmt.Errorf("wgmma form")
	}
	transB := !fp8 && in.args[transIdx] == "1"
	for g := 0; g < s.n/128; g++ {
		if !active[128*g] {
			continue
		}
		da, db := uint64(0), s.val(in.args[2], 128*g)
		if !regA {
			da = s.val(in.args[1], 128*g)
		}
		accumulate := s.val(in.args[3], 128*g) != 0
		for t := 128 * g; t < 128*(g+1); t++ {
			if (!regA && s.val(in.args[1], t) != da) || s.val(in.args[2], t) != db || (s.val(in.args[3], t) != 0) != accumulate {
				return fmt.Errorf("descriptors or scale-d differ inside a warpgroup")
			}
		}
		field := func(x uint64, at uint) uint64 { return (x >> at) & 0x3FFF << 4 }
		if (!regA && (da>>62 != 1 || (da>>49)&7 != 0)) || db>>62 != 1 || (db>>49)&7 != 0 {
			return fmt.Errorf("only 128-byte swizzle with base offset 0 is modelled")
		}
		aStart, aSBO := field(da, 0), field(da, 32)
		bStart, bLBO, bSBO := field(db, 0), field(db, 16), field(db, 32)
		A := make([][]float64, 64)
		for m := range A {
			A[m] = make([]float64, kDepth)
			for k := 0; k < kDepth; k++ {
				if fp8 {
					A[m][k] = s.byteAt(swizzle128(aStart + uint64(m/8)*aSBO + uint64(m%8)*128 + uint64(k)))
					continue
				}
				if regA {
					// The m16n8k16 A fragment per warp: reg q of lane l holds row l/4 + 8(q%2),
					// cols 2(l%4) + 8(q/2), +1.
					w, r := m/16, m%16
					l := 4*(r%8) + (k%8)/2
					q := r/8 + 2*(k/8)
					x := in.regs[1][q][128*g+32*w+l]
					A[m][k] = s.half(x >> (16 * uint(k%2)))
					continue
				}
				A[m][k] = s.half(s.u16(swizzle128(aStart + uint64(m/8)*aSBO + uint64(m%8)*128 + uint64(2*k))))
			}
		}
		B := make([][]float64, n)
		for j := 0; j < n; j++ {
			B[j] = make([]float64, kDepth)
			for k := 0; k < kDepth; k++ {
				var at uint64
				if fp8 {
					B[j][k] = s.byteAt(swizzle128(bStart + uint64(j/8)*bSBO + uint64(j%8)*128 + uint64(k)))
					continue
				}
				if transB {
					at = bStart + uint64(j/64)*bLBO + uint64(k/8)*bSBO + uint64(k%8)*128 + uint64(2*(j%64))
				} else {
					at = bStart + uint64(j/8)*bSBO + uint64(j%8)*128 + uint64(2*k)
				}
				B[j][k] = s.half(s.u16(swizzle128(at)))
			}
		}
		for t := 0; t < 128; t++ {
			w, l := t/32, t%32
			for q := range d {
				row := 16*w + l/4 + 8*((q%4)/2)
				col := 8*(q/4) + 2*(l%4) + q%2
				sum := 0.0
				for k := 0; k < kDepth; k++ {
					sum += A[row][k] * B[col][k]
				}
				r := d[q]
				acc := float32(0)
				if accumulate {
					acc = f32bits(r[128*g+t])
				}
				r[128*g+t] = uint64(math.Float32bits(acc + float32(sum)))
			}
		}
	}
	return nil
}

// byteAt decodes the e4m3 element at shared address a.
func (s *ptxsim) byteAt(a uint64) float64 {
	b, err := s.smemBytes(a, 1)
	if err != nil {
		panic(err)
	}
	return numerics.Decode(numerics.F8E4M3, uint64(b[0]))
}

// ftz flushes f32 subnormals to signed zero, as the .ftz forms do.
func ftz(x float32) float32 {
	if x != 0 && math.Abs(float64(x)) < 0x1p-126 {
		return float32(math.Copysign(0, float64(x)))
	}
	return x
}

// shfl: shfl.sync.bfly.b32 d, a, lanemask, 31, membermask; every lane reads a from lane ^ mask
// of its warp, all lanes at once (a may be d).
func (s *ptxsim) shfl(in simIns, active []bool) error {
	src := make([]uint64, s.n)
	for t := range src {
		src[t] = s.get(in.ops[1], t)
	}
	for t := range src {
		if !active[t] {
			continue
		}
		from := t&^31 | (t & 31) ^ int(s.get(in.ops[2], t))
		if !active[from] {
			return fmt.Errorf("shfl from lane %d, which is not active", from)
		}
		in.ops[0].lanes[t] = src[from]
	}
	return nil
}

// barrier: bar.sync and bar.arrive on a named barrier, for warpgroup g's active threads. Every
// thread of one generation must name the same count; a generation ends when that many have
// arrived, which releases the warpgroups blocked in bar.sync on it. It reports whether g
// blocks.
func (s *ptxsim) barrier(in simIns, g *simGroup, active []bool) (bool, error) {
	arrived := 0
	var id uint64
	count := s.n
	for t := g.lo; t < g.hi; t++ {
		if !active[t] {
			continue
		}
		id = s.get(in.ops[0], t)
		if len(in.ops) > 1 {
			count = int(s.get(in.ops[1], t))
		}
		arrived++
	}
	if arrived == 0 {
		return false, nil
	}
	if id > 15 || count%32 != 0 || count == 0 {
		return false, fmt.Errorf("barrier %d with count %d", id, count)
	}
	b := s.named[id]
	if b == nil {
		b = &simNamed{count: count}
		s.named[id] = b
	}
	if b.arrived == 0 {
		b.count = count
	} else if b.count != count {
		return false, fmt.Errorf("barrier %d: count %d in a generation of count %d", id, count, b.count)
	}
	b.arrived += arrived
	switch {
	case b.arrived > b.count:
		return false, fmt.Errorf("barrier %d: %d arrivals for a count of %d (two generations mixed)", id, b.arrived, b.count)
	case b.arrived == b.count:
		for _, w := range b.waiting {
			w.blocked = false
		}
		b.arrived, b.waiting = 0, nil
		return false, nil
	case in.op == "bar.sync":
		g.blocked = true
		b.waiting = append(b.waiting, g)
		return true, nil
	}
	return false, nil
}

func (s *ptxsim) mbarArrive(addr uint64) error {
	m := s.mbars[addr]
	if m == nil {
		return fmt.Errorf("arrive on an uninitialised mbarrier at %#x", addr)
	}
	if m.pending--; m.pending == 0 {
		m.completed++
		m.pending = m.count
	}
	return nil
}
