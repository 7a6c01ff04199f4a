// Package ptxsim runs the reduction kernels of engine/dist/devreduce on the CPU, one thread at
// a time, so that CI (no GPU) checks the PTX text itself, not a Go model of it, against the
// host reduction. It implements exactly the instructions in devreduce.Opcodes, with the PTX
// ISA's semantics written independently of engine/numerics: f16 conversions through
// x448/float16, bf16 rounding by its bit rule, fp8 rounding by a search over every code, IEEE
// f32/f64 arithmetic from Go's float32/float64 (round to nearest even, subnormals kept, as PTX
// without .ftz). Loads and stores are bounds- and alignment-checked against the buffers mapped
// into a Memory, so a kernel that reads past a contribution or writes past the output fails.
//
// The reduction kernels have no shared memory, barriers or cross-thread communication, so
// running threads one after another is exact.
package ptxsim

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/x448/float16"
)

// Mem is a device address space: Bytes returns the size bytes at addr, or why the access is
// invalid (unmapped, out of bounds, misaligned). Memory is the simple one; a simulated device
// with its own allocations provides another.
type Mem interface {
	Bytes(addr uint64, size int) ([]byte, error)
}

// Memory is a flat device address space of mapped host buffers.
type Memory struct {
	regions []region // sorted by base
	next    uint64
}

type region struct {
	base uint64
	data []byte
}

// Map makes data addressable and returns its device address (256-byte aligned, as cuMemAlloc).
func (m *Memory) Map(data []byte) uint64 {
	if m.next == 0 {
		m.next = 0x7f0000000000
	}
	base := m.next
	m.next += (uint64(len(data)) + 4096 + 255) &^ 255
	m.regions = append(m.regions, region{base, data})
	sort.Slice(m.regions, func(i, j int) bool { return m.regions[i].base < m.regions[j].base })
	return base
}

// Bytes implements Mem.
func (m *Memory) Bytes(addr uint64, size int) ([]byte, error) {
	i := sort.Search(len(m.regions), func(i int) bool { return m.regions[i].base > addr }) - 1
	if i < 0 {
		return nil, fmt.Errorf("address 0x%x is not in any mapped buffer", addr)
	}
	r := m.regions[i]
	off := addr - r.base
	if off+uint64(size) > uint64(len(r.data)) {
		return nil, fmt.Errorf("access of %d bytes at 0x%x is past the end of the %d-byte buffer at 0x%x", size, addr, len(r.data), r.base)
	}
	if addr%uint64(size) != 0 {
		return nil, fmt.Errorf("misaligned %d-byte access at 0x%x", size, addr)
	}
	return r.data[off : off+uint64(size)], nil
}

// Kernel is a parsed entry.
type Kernel struct {
	Entry  string
	Params []string
	ins    []instr
	labels map[string]int
	nregs  int
}

type instr struct {
	pred    int // register index, -1 for none
	negPred bool
	op      string
	args    []operand
	line    string
}

type operand struct {
	kind  int // oReg, oImm, oSpecial, oMem, oParam, oLabel
	reg   int
	imm   uint64
	name  string
	float bool // immediate written as 0f / 0d
}

const (
	oReg = iota
	oImm
	oSpecial
	oMem   // [%reg]
	oParam // [p_name]
	oLabel
)

// Parse reads one module with one .entry.
func Parse(ptx string) (*Kernel, error) {
	k := &Kernel{labels: map[string]int{}}
	regs := map[string]int{}
	lines := strings.Split(ptx, "\n")
	inParams, inBody := false, false
	for n, raw := range lines {
		t := strings.TrimSpace(raw)
		if i := strings.Index(t, "//"); i >= 0 {
			t = strings.TrimSpace(t[:i])
		}
		switch {
		case t == "":
			continue
		case strings.HasPrefix(t, ".visible .entry "):
			name := strings.TrimPrefix(t, ".visible .entry ")
			k.Entry = strings.TrimSuffix(name, "(")
			inParams = true
			continue
		case inParams && strings.HasPrefix(t, ".param .u64 "):
			k.Params = append(k.Params, strings.TrimSuffix(strings.TrimPrefix(t, ".param .u64 "), ","))
			continue
		case inParams && t == ")":
			inParams = false
			continue
		case t == "{":
			inBody = true
			continue
		case t == "}":
			inBody = false
			continue
		case !inBody || strings.HasPrefix(t, ".reg "):
			continue
		case strings.HasSuffix(t, ":"):
			k.labels[strings.TrimSuffix(t, ":")] = len(k.ins)
			continue
		}
		if !strings.HasSuffix(t, ";") {
			return nil, fmt.Errorf("line %d: %q does not end with ';'", n+1, t)
		}
		t = strings.TrimSuffix(t, ";")
		in := instr{pred: -1, line: t}
		if strings.HasPrefix(t, "@") {
			g, rest, _ := strings.Cut(t, " ")
			g = strings.TrimPrefix(g, "@")
			in.negPred = strings.HasPrefix(g, "!")
			in.pred = regIndex(regs, strings.TrimPrefix(g, "!"))
			t = rest
		}
		op, rest, _ := strings.Cut(t, " ")
		in.op = op
		if rest != "" {
			for _, a := range strings.Split(rest, ", ") {
				o, err := parseOperand(regs, strings.TrimSpace(a))
				if err != nil {
					return nil, fmt.Errorf("line %d: %q: %v", n+1, t, err)
				}
				in.args = append(in.args, o)
			}
		}
		k.ins = append(k.ins, in)
	}
	if k.Entry == "" {
		return nil, fmt.Errorf("no .visible .entry")
	}
	for _, in := range k.ins {
		for _, a := range in.args {
			if a.kind == oLabel {
				if _, ok := k.labels[a.name]; !ok {
					return nil, fmt.Errorf("%q: undefined label %s", in.line, a.name)
				}
			}
		}
	}
	k.nregs = len(regs)
	return k, nil
}

func regIndex(regs map[string]int, name string) int {
	i, ok := regs[name]
	if !ok {
		i = len(regs)
		regs[name] = i
	}
	return i
}

func parseOperand(regs map[string]int, a string) (operand, error) {
	switch {
	case a == "%ctaid.x" || a == "%ntid.x" || a == "%tid.x" || a == "%nctaid.x":
		return operand{kind: oSpecial, name: a}, nil
	case strings.HasPrefix(a, "[%"):
		return operand{kind: oMem, reg: regIndex(regs, strings.Trim(a, "[]"))}, nil
	case strings.HasPrefix(a, "["):
		return operand{kind: oParam, name: strings.Trim(a, "[]")}, nil
	case strings.HasPrefix(a, "%"):
		return operand{kind: oReg, reg: regIndex(regs, a)}, nil
	case strings.HasPrefix(a, "$"):
		return operand{kind: oLabel, name: a}, nil
	case strings.HasPrefix(a, "0f") && len(a) == 10, strings.HasPrefix(a, "0d") && len(a) == 18:
		v, err := strconv.ParseUint(a[2:], 16, 64)
		return operand{kind: oImm, imm: v, float: true}, err
	case strings.HasPrefix(a, "0x"):
		v, err := strconv.ParseUint(a[2:], 16, 64)
		return operand{kind: oImm, imm: v}, err
	}
	v, err := strconv.ParseInt(a, 10, 64)
	return operand{kind: oImm, imm: uint64(v)}, err
}

// Run executes the kernel on a grid of grid blocks of threads threads with args in parameter
// order. It returns the first fault (bad access, unknown instruction, runaway loop).
func (k *Kernel) Run(mem Mem, grid, threads int, args []uint64) error {
	if len(args) != len(k.Params) {
		return fmt.Errorf("%s: %d arguments for %d parameters", k.Entry, len(args), len(k.Params))
	}
	params := map[string]uint64{}
	for i, p := range k.Params {
		params[p] = args[i]
	}
	regs := make([]uint64, k.nregs)
	for c := range grid {
		for t := range threads {
			clear(regs)
			th := thread{k: k, mem: mem, params: params, regs: regs,
				special: map[string]uint64{"%ctaid.x": uint64(c), "%ntid.x": uint64(threads), "%tid.x": uint64(t), "%nctaid.x": uint64(grid)}}
			if err := th.run(); err != nil {
				return fmt.Errorf("%s block %d thread %d: %v", k.Entry, c, t, err)
			}
		}
	}
	return nil
}

type thread struct {
	k       *Kernel
	mem     Mem
	params  map[string]uint64
	special map[string]uint64
	regs    []uint64
}

func (th *thread) val(o operand) uint64 {
	switch o.kind {
	case oReg:
		return th.regs[o.reg]
	case oImm:
		return o.imm
	case oSpecial:
		return th.special[o.name]
	}
	panic(fmt.Sprintf("operand kind %d has no value", o.kind))
}

const stepLimit = 1 << 26

func (th *thread) run() error {
	pc := 0
	for steps := 0; ; steps++ {
		if steps > stepLimit {
			return fmt.Errorf("more than %d instructions: runaway loop", stepLimit)
		}
		if pc >= len(th.k.ins) {
			return fmt.Errorf("fell off the end without ret")
		}
		in := &th.k.ins[pc]
		pc++
		if in.pred >= 0 && (th.regs[in.pred] != 0) == in.negPred {
			continue
		}
		switch in.op {
		case "ret":
			return nil
		case "bra":
			pc = th.k.labels[in.args[0].name]
			continue
		}
		if err := th.exec(in); err != nil {
			return fmt.Errorf("%s: %v", in.line, err)
		}
	}
}

func f32(v uint64) float32 { return math.Float32frombits(uint32(v)) }
func f64(v uint64) float64 { return math.Float64frombits(v) }
func b32(f float32) uint64 { return uint64(math.Float32bits(f)) }
func b64(f float64) uint64 { return math.Float64bits(f) }
func bit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (th *thread) exec(in *instr) error {
	a := in.args
	set := func(v uint64) { th.regs[a[0].reg] = v }
	x := func(i int) uint64 { return th.val(a[i]) }
	switch in.op {
	case "ld.param.u64":
		v, ok := th.params[a[1].name]
		if !ok {
			return fmt.Errorf("no parameter %s", a[1].name)
		}
		set(v)
	case "cvta.to.global.u64", "mov.u32", "mov.b64", "mov.b32", "mov.b16", "mov.f32":
		set(x(1))
	case "mul.wide.u32":
		set(uint64(uint32(x(1))) * uint64(uint32(x(2))))
	case "cvt.u64.u32", "cvt.u32.u16":
		if in.op == "cvt.u32.u16" {
			set(uint64(uint16(x(1))))
		} else {
			set(uint64(uint32(x(1))))
		}
	case "add.u64", "add.s64":
		set(x(1) + x(2))
	case "shl.b64":
		set(x(1) << x(2))
	case "shl.b32":
		set(uint64(uint32(x(1)) << x(2)))
	case "setp.ge.u64":
		set(bit(x(1) >= x(2)))
	case "setp.ne.u32":
		set(bit(uint32(x(1)) != uint32(x(2))))
	case "setp.ne.u64":
		set(bit(x(1) != x(2)))
	case "setp.eq.u32":
		set(bit(uint32(x(1)) == uint32(x(2))))
	case "setp.eq.u64":
		set(bit(x(1) == x(2)))
	case "setp.gt.u32":
		set(bit(uint32(x(1)) > uint32(x(2))))
	case "setp.gt.u64":
		set(bit(x(1) > x(2)))
	case "setp.gt.s32":
		set(bit(int32(x(1)) > int32(x(2))))
	case "setp.lt.s32":
		set(bit(int32(x(1)) < int32(x(2))))
	case "setp.gt.s64":
		set(bit(int64(x(1)) > int64(x(2))))
	case "setp.lt.s64":
		set(bit(int64(x(1)) < int64(x(2))))
	case "setp.nan.f32":
		set(bit(f32(x(1)) != f32(x(1)) || f32(x(2)) != f32(x(2))))
	case "setp.nan.f64":
		set(bit(f64(x(1)) != f64(x(1)) || f64(x(2)) != f64(x(2))))
	case "or.pred":
		set(bit(x(1) != 0 || x(2) != 0))
	case "and.b32":
		set(uint64(uint32(x(1) & x(2))))
	case "and.b64":
		set(x(1) & x(2))
	case "not.b32":
		set(uint64(^uint32(x(1))))
	case "not.b64":
		set(^x(1))
	case "selp.b64":
		if x(3) != 0 {
			set(x(1))
		} else {
			set(x(2))
		}
	case "selp.b32", "selp.b16":
		v := x(2)
		if x(3) != 0 {
			v = x(1)
		}
		if in.op == "selp.b16" {
			v = uint64(uint16(v))
		} else {
			v = uint64(uint32(v))
		}
		set(v)
	case "add.rn.f32":
		set(b32(f32(x(1)) + f32(x(2))))
	case "div.rn.f32":
		set(b32(f32(x(1)) / f32(x(2))))
	case "add.rn.f64":
		set(b64(f64(x(1)) + f64(x(2))))
	case "div.rn.f64":
		set(b64(f64(x(1)) / f64(x(2))))
	case "div.s64":
		if x(2) == 0 {
			return fmt.Errorf("integer division by zero")
		}
		set(uint64(int64(x(1)) / int64(x(2))))
	case "cvt.s64.s32":
		set(uint64(int64(int32(x(1)))))
	case "cvt.s64.s16":
		set(uint64(int64(int16(x(1)))))
	case "cvt.s32.s16":
		set(uint64(uint32(int32(int16(x(1))))))
	case "cvt.u32.u64":
		set(uint64(uint32(x(1))))
	case "cvt.u16.u64", "cvt.u16.u32":
		set(uint64(uint16(x(1))))
	case "cvt.f32.f16":
		set(b32(float16.Frombits(uint16(x(1))).Float32()))
	case "cvt.rn.f16.f32":
		set(uint64(float16.Fromfloat32(f32(x(1))).Bits()))
	case "cvt.rn.bf16.f32":
		set(uint64(bf16RN(uint32(x(1)))))
	case "cvt.rn.f16x2.e4m3x2", "cvt.rn.f16x2.e5m2x2":
		f := fp8Of(in.op)
		h := uint16(x(1))
		lo := float16.Fromfloat32(float32(f.decode(uint8(h)))).Bits()
		hi := float16.Fromfloat32(float32(f.decode(uint8(h >> 8)))).Bits()
		set(uint64(hi)<<16 | uint64(lo))
	case "cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.satfinite.e5m2x2.f32":
		f := fp8Of(in.op)
		hi, lo := f.encodeSatfinite(f32(x(1))), f.encodeSatfinite(f32(x(2)))
		set(uint64(hi)<<8 | uint64(lo))
	default:
		if strings.HasPrefix(in.op, "ld.global.") || strings.HasPrefix(in.op, "st.global.") {
			return th.access(in)
		}
		return fmt.Errorf("instruction %s is not implemented", in.op)
	}
	return nil
}

func (th *thread) access(in *instr) error {
	load := strings.HasPrefix(in.op, "ld.")
	typ := in.op[len("ld.global."):]
	size := map[string]int{"b64": 8, "b32": 4, "s32": 4, "b16": 2, "u8": 1, "s8": 1}[typ]
	if size == 0 {
		return fmt.Errorf("access type %s", typ)
	}
	m := in.args[0]
	if load {
		m = in.args[1]
	}
	if m.kind != oMem {
		return fmt.Errorf("address operand is not [register]")
	}
	b, err := th.mem.Bytes(th.regs[m.reg], size)
	if err != nil {
		return err
	}
	if !load {
		v := th.val(in.args[1])
		for i := range size {
			b[i] = byte(v >> (8 * i))
		}
		return nil
	}
	var v uint64
	for i := range size {
		v |= uint64(b[i]) << (8 * i)
	}
	switch typ {
	case "s32":
		v = uint64(int64(int32(v))) & 0xFFFFFFFF // a .b32 register holds the 32 bits
	case "s8":
		v = uint64(uint16(int16(int8(v)))) // sign-extended into the 16-bit register
	}
	th.regs[in.args[0].reg] = v
	return nil
}

// bf16RN rounds f32 bits to bf16, nearest even; NaN gives a quiet NaN.
func bf16RN(b uint32) uint16 {
	if b&0x7FFFFFFF > 0x7F800000 {
		return uint16(b>>16) | 0x0040
	}
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

// fp8 describes an 8-bit float format: e4m3 (OCP "FN": no infinities, S.1111.111 is NaN) or
// e5m2 (IEEE-like).
type fp8 struct {
	exp, man uint
	bias     int
	ieee     bool
}

var (
	e4m3 = fp8{exp: 4, man: 3, bias: 7}
	e5m2 = fp8{exp: 5, man: 2, bias: 15, ieee: true}
)

func fp8Of(op string) fp8 {
	if strings.Contains(op, "e4m3") {
		return e4m3
	}
	return e5m2
}

func (f fp8) decode(c uint8) float64 {
	neg := c&0x80 != 0
	mag := c & 0x7F
	e := int(mag >> f.man)
	m := float64(mag & (1<<f.man - 1))
	var v float64
	switch {
	case !f.ieee && mag == 0x7F:
		return math.NaN()
	case f.ieee && e == 1<<f.exp-1 && m != 0:
		return math.NaN()
	case f.ieee && e == 1<<f.exp-1:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(m, 1-f.bias-int(f.man))
	default:
		v = math.Ldexp(1+m/float64(int(1)<<f.man), e-f.bias)
	}
	if neg {
		v = -v
	}
	return v
}

// encodeSatfinite rounds x to the nearest code (ties to the even code), saturating anything
// beyond the largest finite magnitude (Inf included) to it; NaN gives 0x7F.
func (f fp8) encodeSatfinite(x float32) uint8 {
	if x != x {
		return 0x7F
	}
	sign := uint8(0)
	v := float64(x)
	if math.Signbit(v) {
		sign, v = 0x80, -v
	}
	top := uint8(0x7E) // the largest finite magnitude: e4m3 S.1111.110, e5m2 S.11110.11
	if f.ieee {
		top = 0x7B
	}
	if v >= f.decode(top) { // Inf included: .satfinite
		return sign | top
	}
	best, bestD := uint8(0), math.Inf(1)
	for c := 0; c < 0x80; c++ {
		d := f.decode(uint8(c))
		if d != d || math.IsInf(d, 0) {
			continue
		}
		diff := math.Abs(d - v)
		if diff < bestD || (diff == bestD && c&1 == 0) {
			best, bestD = uint8(c), diff
		}
	}
	return sign | best
}
