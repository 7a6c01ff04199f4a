package ptx

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// A small PTX interpreter for the instruction forms the fast row kernels use, so that their
// PTX can be run on machines without a GPU: one goroutine per thread, warp shuffles and
// bar.sync as rendezvous, global memory as bounds-checked buffers. Semantics follow the PTX
// ISA; ex2.approx is taken exact, and cvt to bf16/f16 of a NaN gives the hardware's 0x7FFF /
// 0x7FFF rather than the engine's canonical NaN, so the kernels' own canonicalisation is what
// the tests see. It checks what ptxas cannot: that the kernel computes the right function.

type emuOperand struct {
	kind  byte // 'r' register, 'i' immediate, 's' special/symbol, 'a' address, 'v' vector, 'l' label, 'p' param
	reg   int
	imm   uint64
	regs  []int
	name  string
	param int
}

type emuInstr struct {
	guard  int // register index of the guard predicate, -1 for none
	negate bool
	op     string
	args   []emuOperand
	line   string
}

type emuModule struct {
	code   []emuInstr
	labels map[string]int
	nregs  int
	consts []byte         // the .const tables, back to back (address space emuConst)
	tables map[string]int // table name -> byte offset in consts
}

// emuConstDecl is one ".const .align 8 .b64 NAME[N] = { v, v, ... };" the generator writes.
var emuConstDecl = regexp.MustCompile(`(?s)\.const \.align 8 \.b64 (\w+)\[(\d+)\] = \{(.*?)\};`)

// emuParse reads the body of a generated module.
func emuParse(text string) (*emuModule, error) {
	m := &emuModule{labels: map[string]int{}}
	regs := map[string]int{}
	reg := func(name string) int {
		if i, ok := regs[name]; ok {
			return i
		}
		regs[name] = len(regs)
		return regs[name]
	}
	m.tables = map[string]int{}
	for _, d := range emuConstDecl.FindAllStringSubmatch(text, -1) {
		m.tables[d[1]] = len(m.consts)
		for _, v := range strings.Split(d[3], ",") {
			x, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(v), "0x"), 16, 64)
			if err != nil {
				return nil, fmt.Errorf("const table %s: %v", d[1], err)
			}
			m.consts = binary.LittleEndian.AppendUint64(m.consts, x)
		}
	}
	entry := strings.Index(text, ".visible .entry")
	if entry < 0 {
		return nil, fmt.Errorf("no .entry")
	}
	body, err := emuInlineCalls(text, text[entry+strings.Index(text[entry:], "{\n")+2:])
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(body, "\n") {
		s := strings.TrimSpace(line)
		if s == "" || s == "}" || strings.HasPrefix(s, "//") || strings.HasPrefix(s, ".reg") {
			continue
		}
		if strings.HasSuffix(s, ":") {
			m.labels[strings.TrimSuffix(s, ":")] = len(m.code)
			continue
		}
		s = strings.TrimSuffix(s, ";")
		in := emuInstr{guard: -1, line: s}
		if strings.HasPrefix(s, "@") {
			g, rest, _ := strings.Cut(s, " ")
			g = strings.TrimPrefix(g, "@")
			if strings.HasPrefix(g, "!") {
				in.negate, g = true, g[1:]
			}
			in.guard, s = reg(g), rest
		}
		op, rest, _ := strings.Cut(s, " ")
		in.op = op
		if rest != "" {
			for _, a := range strings.Split(rest, ", ") {
				o, err := emuOperandOf(a, reg)
				if err != nil {
					return nil, fmt.Errorf("%q: %v", s, err)
				}
				in.args = append(in.args, o)
			}
		}
		m.code = append(m.code, in)
	}
	m.nregs = len(regs)
	return m, nil
}

// emuFuncDecl is one ".func (.reg .T %ret) NAME(.reg .T %arg)" routine the generator writes.
var emuFuncDecl = regexp.MustCompile(`(?s)\.func \(\.reg \.\w+ %ret\) (\w+)\(\.reg \.\w+ %arg\)\n\{\n(.*?)\n\}\n`)

var emuCall = regexp.MustCompile(`^call \((%\w+)\), (\w+), \((%\w+)\);$`)

var emuRegName = regexp.MustCompile(`%[A-Za-z_]\w*`)

// emuInlineCalls replaces every call in body by the routine's instructions, its registers
// renamed apart for each call site, with the argument moved in and the result moved out: by
// value, as the PTX call passes them.
func emuInlineCalls(text, body string) (string, error) {
	funcs := map[string]string{}
	for _, d := range emuFuncDecl.FindAllStringSubmatch(text, -1) {
		funcs[d[1]] = d[2]
	}
	var out strings.Builder
	site := 0
	for _, line := range strings.Split(body, "\n") {
		c := emuCall.FindStringSubmatch(strings.TrimSpace(line))
		if c == nil {
			out.WriteString(line + "\n")
			continue
		}
		fn, ok := funcs[c[2]]
		if !ok {
			return "", fmt.Errorf("%q: no .func %s in the module", strings.TrimSpace(line), c[2])
		}
		site++
		rename := func(r string) string { return fmt.Sprintf("%%call%d_%s", site, r[1:]) }
		fmt.Fprintf(&out, "\tmov.b64 %s, %s;\n", rename("%arg"), c[3])
		for _, fl := range strings.Split(fn, "\n") {
			t := strings.TrimSpace(fl)
			if t == "" || t == "ret;" || strings.HasPrefix(t, ".reg") || strings.HasPrefix(t, "//") {
				continue
			}
			out.WriteString("\t" + emuRegName.ReplaceAllStringFunc(t, rename) + "\n")
		}
		fmt.Fprintf(&out, "\tmov.b64 %s, %s;\n", c[1], rename("%ret"))
	}
	return out.String(), nil
}

func emuOperandOf(a string, reg func(string) int) (emuOperand, error) {
	switch {
	case strings.HasPrefix(a, "{"):
		var rs []int
		for _, r := range strings.Split(strings.Trim(a, "{}"), ",") {
			rs = append(rs, reg(r))
		}
		return emuOperand{kind: 'v', regs: rs}, nil
	case strings.HasPrefix(a, "["):
		in := strings.Trim(a, "[]")
		if strings.HasPrefix(in, "tq_") {
			i := strings.LastIndex(in, "_p")
			n, err := strconv.Atoi(in[i+2:])
			return emuOperand{kind: 'p', param: n}, err
		}
		base, off, _ := strings.Cut(in, "+")
		o := emuOperand{kind: 'a', reg: reg(base)}
		if off != "" {
			n, err := strconv.ParseInt(off, 10, 64)
			if err != nil {
				return o, err
			}
			o.imm = uint64(n)
		}
		return o, nil
	case a == "%tid.x" || a == "%ctaid.x" || a == "tq_smem" || strings.HasPrefix(a, "tq_"):
		return emuOperand{kind: 's', name: a}, nil
	case strings.HasPrefix(a, "$L"):
		return emuOperand{kind: 'l', name: a}, nil
	case strings.HasPrefix(a, "%"):
		return emuOperand{kind: 'r', reg: reg(a)}, nil
	case strings.HasPrefix(a, "0f"), strings.HasPrefix(a, "0d"), strings.HasPrefix(a, "0x"):
		v, err := strconv.ParseUint(a[2:], 16, 64)
		return emuOperand{kind: 'i', imm: v}, err
	}
	v, err := strconv.ParseInt(a, 10, 64)
	return emuOperand{kind: 'i', imm: uint64(v)}, err
}

// emuBarrier is a reusable rendezvous of n goroutines.
type emuBarrier struct {
	n, count, gen int
	mu            sync.Mutex
	c             *sync.Cond
}

func newEmuBarrier(n int) *emuBarrier {
	b := &emuBarrier{n: n}
	b.c = sync.NewCond(&b.mu)
	return b
}

func (b *emuBarrier) wait() {
	b.mu.Lock()
	g := b.gen
	b.count++
	if b.count == b.n {
		b.count, b.gen = 0, b.gen+1
		b.c.Broadcast()
	} else {
		for g == b.gen {
			b.c.Wait()
		}
	}
	b.mu.Unlock()
}

// emuCTA is one CTA's shared state.
// emuCount, when set, counts what every thread executes: instructions, and the memory
// accesses and barriers by state space (a test that measures what a kernel costs sets it).
var emuCount *emuCounts

type emuCounts struct {
	mu    sync.Mutex
	instr int64
	ops   map[string]int64 // "ld.global", "st.shared", "bar.sync": executions
	bytes map[string]int64 // bytes moved, by the same keys
	each  map[string]int64 // every opcode's executions, when not nil
}

func (c *emuCounts) add(op string) {
	key, n := "", int64(0)
	for _, k := range []string{"ld.global", "st.global", "ld.shared", "st.shared", "bar.sync"} {
		if strings.HasPrefix(op, k) {
			key = k
		}
	}
	if key != "" && key != "bar.sync" {
		switch {
		case strings.HasSuffix(op, "v2.f64"), strings.HasSuffix(op, "v4.b32"):
			n = 16
		case strings.HasSuffix(op, "v2.b32"):
			n = 8
		case strings.HasSuffix(op, "v2.f32"), strings.HasSuffix(op, "f64"), strings.HasSuffix(op, "b64"):
			n = 8
		case strings.HasSuffix(op, "b16"):
			n = 2
		case strings.HasSuffix(op, "u8"), strings.HasSuffix(op, "s8"):
			n = 1
		default:
			n = 4
		}
	}
	c.mu.Lock()
	c.instr++
	if c.each != nil {
		c.each[op]++
	}
	if key != "" {
		c.ops[key]++
		c.bytes[key] += n
	}
	c.mu.Unlock()
}

type emuCTA struct {
	m       *emuModule
	global  [][]byte // per param; a param's address is (index+1) << 40
	shared  []byte
	ctaid   int
	cta     *emuBarrier
	warps   []*emuBarrier
	shuffle [][32]uint64
	mu      sync.Mutex
	subsets map[[2]uint32]*emuBarrier // (warp, member mask) of partial-warp shuffles
}

// members is the rendezvous of the lanes of warp named by a shfl member mask.
func (c *emuCTA) members(warp int, mask uint32) *emuBarrier {
	if mask == 0xFFFFFFFF {
		return c.warps[warp]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [2]uint32{uint32(warp), mask}
	if c.subsets[k] == nil {
		if c.subsets == nil {
			c.subsets = map[[2]uint32]*emuBarrier{}
		}
		c.subsets[k] = newEmuBarrier(bits.OnesCount32(mask))
	}
	return c.subsets[k]
}

const emuSpace = 40

// emuConst is the address-space tag (above every param's) of the .const tables.
const emuConst = 1 << 20

// emuRun runs every CTA of a module, one after the other, with threads threads each.
func emuRun(m *emuModule, mod *Module, global [][]byte) error {
	for c := range mod.Grid[0] {
		nw := (mod.Threads + 31) / 32
		cta := &emuCTA{m: m, global: global, shared: make([]byte, mod.SharedBytes), ctaid: c, cta: newEmuBarrier(mod.Threads),
			shuffle: make([][32]uint64, nw)}
		for range nw {
			cta.warps = append(cta.warps, newEmuBarrier(32))
		}
		errc := make(chan error, mod.Threads)
		for t := range mod.Threads {
			go func() { errc <- cta.thread(t) }()
		}
		timeout := time.After(20 * time.Second)
		for range mod.Threads {
			select {
			case err := <-errc:
				if err != nil {
					return fmt.Errorf("cta %d: %v", c, err)
				}
			case <-timeout:
				return fmt.Errorf("cta %d: threads did not finish (a divergent barrier or shuffle?)", c)
			}
		}
	}
	return nil
}

func f32of(v uint64) float32 { return math.Float32frombits(uint32(v)) }
func f64of(v uint64) float64 { return math.Float64frombits(v) }
func b32(f float32) uint64   { return uint64(math.Float32bits(f)) }
func b64(f float64) uint64   { return math.Float64bits(f) }

// emuHalf rounds like cvt.rn.{bf16,f16}.f32, a NaN becoming the hardware's 0x7FFF.
func emuHalf(dt numerics.DType, f float32) uint64 {
	if f != f {
		return 0x7FFF
	}
	return numerics.Encode(dt, float64(f))
}

// emuTrunc converts toward zero, saturating to [lo, hi], NaN to 0, as cvt.rzi does.
func emuTrunc(f float64, lo, hi int64) int64 {
	switch {
	case f != f:
		return 0
	case f <= float64(lo):
		return lo
	case f >= float64(hi):
		return hi
	}
	return int64(f)
}

func (c *emuCTA) thread(tid int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("thread %d: %v", tid, r)
		}
	}()
	regs := make([]uint64, c.m.nregs)
	val := func(o emuOperand) uint64 {
		switch o.kind {
		case 'r':
			return regs[o.reg]
		case 'i':
			return o.imm
		case 's':
			switch o.name {
			case "%tid.x":
				return uint64(tid)
			case "%ctaid.x":
				return uint64(c.ctaid)
			case "tq_smem":
				return 0 // shared addresses start at 0
			}
			if off, ok := c.m.tables[o.name]; ok {
				return emuConst<<emuSpace | uint64(off)
			}
			panic(fmt.Sprintf("unknown symbol %s", o.name))
		}
		panic(fmt.Sprintf("operand kind %c has no value", o.kind))
	}
	mem := func(o emuOperand, n int, shared bool) []byte {
		addr := regs[o.reg] + o.imm
		if shared {
			if addr+uint64(n) > uint64(len(c.shared)) || addr%uint64(n) != 0 {
				panic(fmt.Sprintf("shared access %d+%d beyond %d bytes or misaligned", addr, n, len(c.shared)))
			}
			return c.shared[addr : addr+uint64(n)]
		}
		if addr>>emuSpace == emuConst {
			off := addr & (1<<emuSpace - 1)
			if off+uint64(n) > uint64(len(c.m.consts)) || off%uint64(n) != 0 {
				panic(fmt.Sprintf("const access %d bytes at %d: outside the tables or misaligned", n, off))
			}
			return c.m.consts[off : off+uint64(n)]
		}
		buf, off := int(addr>>emuSpace)-1, addr&(1<<emuSpace-1)
		if buf < 0 || buf >= len(c.global) || off+uint64(n) > uint64(len(c.global[buf])) || addr%uint64(n) != 0 {
			panic(fmt.Sprintf("global access %d bytes at param %d offset %d: outside its %d bytes or misaligned", n, buf, off, len(c.global[max(buf, 0)%len(c.global)])))
		}
		return c.global[buf][off : off+uint64(n)]
	}
	lane, warp := tid%32, tid/32
	for pc := 0; pc < len(c.m.code); pc++ {
		in := &c.m.code[pc]
		if in.guard >= 0 && (regs[in.guard] != 0) == in.negate {
			continue
		}
		if emuCount != nil {
			emuCount.add(in.op)
		}
		a := in.args
		set := func(v uint64) { regs[a[0].reg] = v }
		x := func(i int) uint64 { return val(a[i]) }
		fx := func(i int) float32 { return f32of(x(i)) }
		dx := func(i int) float64 { return f64of(x(i)) }
		bo := func(p bool) uint64 {
			if p {
				return 1
			}
			return 0
		}
		switch in.op {
		case "ret":
			return nil
		case "bra":
			pc = c.m.labels[a[0].name] - 1
		case "bar.sync":
			c.cta.wait()
		case "shfl.sync.bfly.b32":
			// The member mask names who rendezvous: the whole warp, or a subset whose lanes
			// may have branched apart from the rest (reduce_fast's lane pairs).
			mask, from := uint32(x(4)), lane^int(x(2)&31)
			if mask&(1<<lane) == 0 || mask&(1<<from) == 0 {
				panic(fmt.Sprintf("shfl with member mask %#x: lane %d reads lane %d", mask, lane, from))
			}
			bar := c.members(warp, mask)
			c.shuffle[warp][lane] = x(1)
			bar.wait()
			v := c.shuffle[warp][from]
			bar.wait()
			set(v)
		case "ld.param.u64":
			set(uint64(a[1].param+1) << emuSpace)
		case "cvta.to.global.u64", "mov.b32", "mov.u32", "mov.b64", "mov.u64", "mov.f32", "mov.f64", "mov.b16":
			set(x(1))
		case "ld.global.b16":
			set(uint64(binary.LittleEndian.Uint16(mem(a[1], 2, false))))
		case "ld.global.b32":
			set(uint64(binary.LittleEndian.Uint32(mem(a[1], 4, false))))
		case "ld.global.v2.b32", "ld.global.v4.b32":
			b := mem(a[1], 4*len(a[0].regs), false)
			for i, r := range a[0].regs {
				regs[r] = uint64(binary.LittleEndian.Uint32(b[4*i:]))
			}
		case "ld.global.u8":
			set(uint64(mem(a[1], 1, false)[0]))
		case "ld.global.s32":
			set(uint64(binary.LittleEndian.Uint32(mem(a[1], 4, false)))) // raw bits; nothing here sign-extends
		case "ld.global.f64":
			set(binary.LittleEndian.Uint64(mem(a[1], 8, false)))
		case "st.global.u8":
			mem(a[0], 1, false)[0] = byte(x(1))
		case "st.global.f64":
			binary.LittleEndian.PutUint64(mem(a[0], 8, false), x(1))
		case "st.global.b16":
			binary.LittleEndian.PutUint16(mem(a[0], 2, false), uint16(x(1)))
		case "st.global.b32", "st.global.f32":
			binary.LittleEndian.PutUint32(mem(a[0], 4, false), uint32(x(1)))
		case "st.global.v2.b32", "st.global.v4.b32":
			b := mem(a[0], 4*len(a[1].regs), false)
			for i, r := range a[1].regs {
				binary.LittleEndian.PutUint32(b[4*i:], uint32(regs[r]))
			}
		case "ld.global.v2.f64":
			b := mem(a[1], 16, false)
			for i, r := range a[0].regs {
				regs[r] = binary.LittleEndian.Uint64(b[8*i:])
			}
		case "st.global.v2.f64":
			b := mem(a[0], 16, false)
			for i, r := range a[1].regs {
				binary.LittleEndian.PutUint64(b[8*i:], regs[r])
			}
		case "ld.global.f32":
			set(uint64(binary.LittleEndian.Uint32(mem(a[1], 4, false))))
		// Pairs of floats (the FFT's complex values): shared, global, and the read-only path.
		case "ld.shared.v2.f32", "ld.global.v2.f32", "ld.global.nc.v2.f32", "ld.shared.v2.f64", "ld.global.nc.v2.f64":
			sz := 4
			if strings.HasSuffix(in.op, "f64") {
				sz = 8
			}
			b := mem(a[1], 2*sz, strings.Contains(in.op, "shared"))
			for i, r := range a[0].regs {
				if sz == 4 {
					regs[r] = uint64(binary.LittleEndian.Uint32(b[4*i:]))
				} else {
					regs[r] = binary.LittleEndian.Uint64(b[8*i:])
				}
			}
		case "st.shared.v2.f32", "st.global.v2.f32", "st.shared.v2.f64":
			sz := 4
			if strings.HasSuffix(in.op, "f64") {
				sz = 8
			}
			b := mem(a[0], 2*sz, strings.Contains(in.op, "shared"))
			for i, r := range a[1].regs {
				if sz == 4 {
					binary.LittleEndian.PutUint32(b[4*i:], uint32(regs[r]))
				} else {
					binary.LittleEndian.PutUint64(b[8*i:], regs[r])
				}
			}
		case "ld.global.s8": // sign-extended into the 16-bit register
			set(uint64(uint16(int16(int8(mem(a[1], 1, false)[0])))))
		case "st.global.s32":
			binary.LittleEndian.PutUint32(mem(a[0], 4, false), uint32(x(1)))
		case "ld.const.f64":
			set(binary.LittleEndian.Uint64(mem(a[1], 8, false)))
		case "ld.shared.f64":
			set(binary.LittleEndian.Uint64(mem(a[1], 8, true)))
		case "st.shared.f64":
			binary.LittleEndian.PutUint64(mem(a[0], 8, true), x(1))
		case "ld.shared.b16":
			set(uint64(binary.LittleEndian.Uint16(mem(a[1], 2, true))))
		case "st.shared.b16":
			binary.LittleEndian.PutUint16(mem(a[0], 2, true), uint16(x(1)))
		case "ld.shared.b32":
			set(uint64(binary.LittleEndian.Uint32(mem(a[1], 4, true))))
		case "st.shared.b32":
			binary.LittleEndian.PutUint32(mem(a[0], 4, true), uint32(x(1)))
		case "ld.shared.u8":
			set(uint64(mem(a[1], 1, true)[0]))
		case "st.shared.u8":
			mem(a[0], 1, true)[0] = byte(x(1))
		case "ld.shared.f32":
			set(uint64(binary.LittleEndian.Uint32(mem(a[1], 4, true))))
		case "st.shared.f32":
			binary.LittleEndian.PutUint32(mem(a[0], 4, true), uint32(x(1)))
		// 32-bit integers
		case "shr.u32":
			set(uint64(uint32(x(1)) >> x(2)))
		case "shl.b32":
			set(uint64(uint32(x(1)) << x(2)))
		case "and.b32":
			set(uint64(uint32(x(1) & x(2))))
		case "or.b32":
			set(uint64(uint32(x(1) | x(2))))
		case "add.s32":
			set(uint64(uint32(x(1) + x(2))))
		case "mad.lo.s32":
			set(uint64(uint32(x(1)*x(2) + x(3))))
		case "rem.u32":
			set(uint64(uint32(x(1)) % uint32(x(2))))
		case "div.u32":
			set(uint64(uint32(x(1)) / uint32(x(2))))
		case "setp.lt.s32":
			set(bo(int32(x(1)) < int32(x(2))))
		case "setp.ge.s32":
			set(bo(int32(x(1)) >= int32(x(2))))
		case "setp.ge.u32":
			set(bo(uint32(x(1)) >= uint32(x(2))))
		case "rem.s32":
			set(uint64(uint32(int32(x(1)) % int32(x(2)))))
		case "div.s32":
			set(uint64(uint32(int32(x(1)) / int32(x(2)))))
		case "cvt.s64.s32":
			set(uint64(int64(int32(x(1)))))
		case "setp.lt.u32":
			set(bo(uint32(x(1)) < uint32(x(2))))
		case "setp.ne.u32":
			set(bo(uint32(x(1)) != uint32(x(2))))
		case "setp.eq.u32":
			set(bo(uint32(x(1)) == uint32(x(2))))
		case "cvt.u32.u16":
			set(x(1) & 0xFFFF)
		case "cvt.u16.u32":
			set(x(1) & 0xFFFF)
		case "selp.b32", "selp.b16", "selp.f32", "selp.f64", "selp.b64":
			if x(3) != 0 {
				set(x(1))
			} else {
				set(x(2))
			}
		case "bfe.u32", "bfe.s32": // pos and len in 0..31, pos+len <= 32 (all the generator uses)
			pos, n := x(2)&0xFF, x(3)&0xFF
			f := (uint32(x(1)) >> pos) & (1<<n - 1)
			if in.op == "bfe.s32" && n > 0 && f>>(n-1)&1 == 1 {
				f |= ^uint32(0) << n
			}
			set(uint64(f))
		case "cvt.s32.s16":
			set(uint64(uint32(int32(int16(uint16(x(1)))))))
		case "cvt.u64.u16":
			set(x(1) & 0xFFFF)
		case "cvt.u16.u64":
			set(x(1) & 0xFFFF)
		case "cvt.u64.u32":
			set(x(1) & 0xFFFFFFFF)
		case "cvt.rn.f32.s32":
			set(b32(float32(int32(x(1)))))
		case "cvt.rn.f64.s32":
			set(b64(float64(int32(x(1)))))
		case "cvt.rzi.s32.f64": // toward zero, saturating, NaN to 0 (PTX float-to-int)
			set(uint64(uint32(int32(emuTrunc(dx(1), math.MinInt32, math.MaxInt32)))))
		case "cvt.rzi.s64.f64":
			set(uint64(emuTrunc(dx(1), math.MinInt64, math.MaxInt64)))
		case "cvt.rni.f64.f64":
			set(b64(math.RoundToEven(dx(1))))
		case "min.s32":
			set(uint64(uint32(min(int32(x(1)), int32(x(2))))))
		case "max.s32":
			set(uint64(uint32(max(int32(x(1)), int32(x(2))))))
		case "setp.gt.s32":
			set(bo(int32(x(1)) > int32(x(2))))
		case "sub.s32":
			set(uint64(uint32(x(1) - x(2))))
		case "mul.lo.s32":
			set(uint64(uint32(x(1) * x(2))))
		case "neg.s64":
			set(-x(1))
		case "mul.lo.s64":
			set(x(1) * x(2))
		case "div.s64":
			set(uint64(int64(x(1)) / int64(x(2))))
		case "min.s64":
			set(uint64(min(int64(x(1)), int64(x(2)))))
		case "max.s64":
			set(uint64(max(int64(x(1)), int64(x(2)))))
		case "shr.s64":
			set(uint64(int64(x(1)) >> min(x(2), 63)))
		case "setp.ne.s64":
			set(bo(x(1) != x(2)))
		case "setp.neu.f32":
			set(bo(fx(1) != fx(2)))
		case "setp.neu.f64":
			set(bo(dx(1) != dx(2)))
		// 64-bit integers
		case "mul.wide.s32":
			set(uint64(int64(int32(x(1))) * int64(int32(x(2)))))
		case "mad.wide.s32":
			set(uint64(int64(int32(x(1)))*int64(int32(x(2)))) + x(3))
		case "mad.lo.s64":
			set(x(1)*x(2) + x(3))
		case "add.s64":
			set(x(1) + x(2))
		case "sub.s64":
			set(x(1) - x(2))
		case "and.b64":
			set(x(1) & x(2))
		case "or.b64":
			set(x(1) | x(2))
		case "shl.b64":
			set(x(1) << min(x(2), 64))
		case "shr.u64":
			set(x(1) >> min(x(2), 64))
		case "cvt.u32.u64":
			set(x(1) & 0xFFFFFFFF)
		case "setp.lt.u64":
			set(bo(x(1) < x(2)))
		case "setp.lt.s64":
			set(bo(int64(x(1)) < int64(x(2))))
		case "setp.eq.s64":
			set(bo(x(1) == x(2)))
		case "and.pred":
			set(x(1) & x(2))
		case "or.pred":
			set(x(1) | x(2))
		case "not.pred":
			set(1 - x(1))
		// f32
		case "add.rn.f32":
			set(b32(fx(1) + fx(2)))
		case "sub.rn.f32":
			set(b32(fx(1) - fx(2)))
		case "mul.rn.f32":
			set(b32(fx(1) * fx(2)))
		case "div.rn.f32":
			set(b32(fx(1) / fx(2)))
		case "fma.rn.f32":
			set(b32(float32(math.FMA(float64(fx(1)), float64(fx(2)), float64(fx(3))))))
		case "neg.f32":
			set(x(1) ^ 0x80000000)
		case "ex2.approx.ftz.f32":
			v := fx(1)
			if math.Abs(float64(v)) < 0x1p-126 {
				v = 0
			}
			r := float32(math.Exp2(float64(v)))
			if r < 0x1p-126 {
				r = 0
			}
			set(b32(r))
		case "max.NaN.f32":
			p, q := fx(1), fx(2)
			switch {
			case p != p || q != q:
				set(0x7FFFFFFF)
			case p == q:
				set(x(1) & x(2)) // +0 wins over -0
			default:
				set(b32(max(p, q)))
			}
		case "setp.gt.f32":
			set(bo(fx(1) > fx(2)))
		case "setp.eq.f32":
			set(bo(fx(1) == fx(2)))
		case "setp.nan.f32":
			set(bo(fx(1) != fx(1) || fx(2) != fx(2)))
		case "cvt.f32.f16":
			set(b32(float32(numerics.Decode(numerics.F16, x(1)&0xFFFF))))
		case "cvt.rn.bf16.f32":
			set(emuHalf(numerics.BF16, fx(1)))
		case "cvt.rn.f16.f32":
			set(emuHalf(numerics.F16, fx(1)))
		case "cvt.rn.bf16x2.f32":
			set(emuHalf(numerics.BF16, fx(1))<<16 | emuHalf(numerics.BF16, fx(2)))
		case "cvt.rn.f16x2.f32":
			set(emuHalf(numerics.F16, fx(1))<<16 | emuHalf(numerics.F16, fx(2)))
		// f64
		case "cvt.f64.f32":
			set(b64(float64(fx(1))))
		case "cvt.rn.f32.f64":
			set(b32(float32(dx(1))))
		case "cvt.rn.f64.s64":
			set(b64(float64(int64(x(1)))))
		case "add.rn.f64":
			set(b64(dx(1) + dx(2)))
		case "sub.rn.f64":
			set(b64(dx(1) - dx(2)))
		case "mul.rn.f64":
			set(b64(dx(1) * dx(2)))
		case "div.rn.f64":
			set(b64(dx(1) / dx(2)))
		case "fma.rn.f64":
			set(b64(math.FMA(dx(1), dx(2), dx(3))))
		case "sqrt.rn.f64":
			set(b64(math.Sqrt(dx(1))))
		case "neg.f64":
			set(x(1) ^ 1<<63)
		case "abs.f64":
			set(x(1) &^ (1 << 63))
		case "setp.lt.f64":
			set(bo(dx(1) < dx(2)))
		case "setp.le.f64":
			set(bo(dx(1) <= dx(2)))
		case "setp.gt.f64":
			set(bo(dx(1) > dx(2)))
		case "setp.ge.f64":
			set(bo(dx(1) >= dx(2)))
		case "setp.eq.f64":
			set(bo(dx(1) == dx(2)))
		case "setp.nan.f64":
			set(bo(dx(1) != dx(1) || dx(2) != dx(2)))
		default:
			if c.warpMatrix(in, lane, warp, regs) { // emu_mma_test.go
				continue
			}
			return fmt.Errorf("emulator: no semantics for %q", in.line)
		}
	}
	return nil
}
