package ptx

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// regClasses are the PTX virtual register files the emitter declares: name prefix and type.
var regClasses = []struct{ prefix, typ string }{
	{"p", ".pred"}, {"h", ".b16"}, {"r", ".b32"}, {"rd", ".b64"}, {"f", ".f32"}, {"fd", ".f64"},
}

// emitter writes one kernel body. Every register is fresh (ptxas allocates the real ones),
// every opcode must be in knownOps, so the emitter can only produce instructions whose
// operand forms were checked once.
//
// Several emitters may share one emitState (register numbering, labels, tables) while writing
// to different buffers: the kernel prologue is written while the body is being generated.
type emitter struct {
	w *strings.Builder
	*emitState
}

type emitState struct {
	count  map[string]int
	labels int
	tables map[string]*table
	funcs  []string        // .func definitions, in order of first call
	called map[string]bool // names in funcs
}

func newEmitter() *emitter {
	return &emitter{w: &strings.Builder{}, emitState: &emitState{count: map[string]int{}, tables: map[string]*table{}, called: map[string]bool{}}}
}

// fork returns an emitter writing to its own buffer with the same numbering.
func (e *emitter) fork() *emitter { return &emitter{w: &strings.Builder{}, emitState: e.emitState} }

func (e *emitter) reg(prefix string) string {
	e.count[prefix]++
	return fmt.Sprintf("%%%s%d", prefix, e.count[prefix])
}

func (e *emitter) op(opcode string, args ...string) { e.opIf("", opcode, args...) }

// opIf emits opcode guarded by a predicate ("%p1", or "!%p1"); "" means unguarded.
func (e *emitter) opIf(pred, opcode string, args ...string) {
	if !knownOps[opcode] {
		panic(fmt.Sprintf("ptx emitter: opcode %q is not in the table", opcode))
	}
	e.w.WriteByte('\t')
	if pred != "" {
		e.w.WriteString("@" + pred + " ")
	}
	e.w.WriteString(opcode)
	if len(args) > 0 {
		e.w.WriteString(" " + strings.Join(args, ", "))
	}
	e.w.WriteString(";\n")
}

func (e *emitter) label() string {
	e.labels++
	return fmt.Sprintf("$L%d", e.labels)
}

func (e *emitter) place(l string) { e.w.WriteString(l + ":\n") }

func (e *emitter) comment(format string, args ...any) {
	e.w.WriteString("\t// " + strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ") + "\n")
}

// decls declares every register file used, sized to the highest number handed out.
func (e *emitter) decls() string {
	var b strings.Builder
	for _, c := range regClasses {
		if n := e.count[c.prefix]; n > 0 {
			fmt.Fprintf(&b, "\t.reg %s %%%s<%d>;\n", c.typ, c.prefix, n+1)
		}
	}
	return b.String()
}

// callFunc applies a routine of one argument to x through the module's .func name, which body
// writes on first use; argCls and retCls are register classes ("fd" f64, "rd" b64). A routine
// such as tanh is some 300 instructions, the f64 -> fp8 encoder some 60; written inline they
// were repeated for every element an unrolled loop handles, and the driver's JIT time grows
// with the text it compiles (docs/ptx.md, "Compile cost"). The values are unchanged: argument
// and result pass by value in registers and the body is the same instructions.
func (e *emitter) callFunc(name, argCls, retCls, x string, body func(m ptxArith, arg string) string) string {
	if !e.called[name] {
		e.called[name] = true
		f := newEmitter()
		f.tables = e.tables // the tables are module-level: declared once, before every function
		y := body(ptxArith{f}, "%arg")
		f.op("mov"+funcTypes[retCls], "%ret", y)
		f.op("ret")
		e.funcs = append(e.funcs, fmt.Sprintf(".func (.reg %s %%ret) %s(.reg %s %%arg)\n{\n%s%s}\n\n",
			funcTypes[retCls], name, funcTypes[argCls], f.decls(), f.w.String()))
	}
	d := e.reg(retCls)
	e.op("call", "("+d+")", name, "("+x+")")
	return d
}

// funcTypes are the PTX types of the register classes a .func passes.
var funcTypes = map[string]string{"fd": ".f64", "rd": ".b64"}

// moduleDecls is what precedes the entry: the .const tables in name order, then the .func
// routines the body calls.
func (e *emitter) moduleDecls() string { return e.constDecls() + strings.Join(e.funcs, "") }

// constDecls declares the .const tables the body indexes, in name order.
func (e *emitter) constDecls() string {
	names := make([]string, 0, len(e.tables))
	for n := range e.tables {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		t := e.tables[n]
		fmt.Fprintf(&b, ".const .align 8 .b64 %s[%d] = {", n, len(t.vals))
		for i, v := range t.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			if i%8 == 0 {
				b.WriteString("\n\t")
			}
			fmt.Fprintf(&b, "0x%016X", math.Float64bits(v))
		}
		b.WriteString("\n};\n")
	}
	return b.String()
}

// f64lit and f32lit are PTX's exact hexadecimal float literals.
func f64lit(v float64) string { return fmt.Sprintf("0d%016X", math.Float64bits(v)) }
func f32lit(v float32) string { return fmt.Sprintf("0f%08X", math.Float32bits(v)) }

func itoa64(v int64) string { return fmt.Sprint(v) }

// ptxArith emits the arith instruction set as PTX (see arith.go for the semantics).
type ptxArith struct{ e *emitter }

func (m ptxArith) unop(op, cls, a string) string {
	d := m.e.reg(cls)
	m.e.op(op, d, a)
	return d
}

func (m ptxArith) binop(op, cls, a, b string) string {
	d := m.e.reg(cls)
	m.e.op(op, d, a, b)
	return d
}

func (m ptxArith) f(c float64) string       { return m.unop("mov.f64", "fd", f64lit(c)) }
func (m ptxArith) add(a, b string) string   { return m.binop("add.rn.f64", "fd", a, b) }
func (m ptxArith) sub(a, b string) string   { return m.binop("sub.rn.f64", "fd", a, b) }
func (m ptxArith) mul(a, b string) string   { return m.binop("mul.rn.f64", "fd", a, b) }
func (m ptxArith) div(a, b string) string   { return m.binop("div.rn.f64", "fd", a, b) }
func (m ptxArith) sqrt(a string) string     { return m.unop("sqrt.rn.f64", "fd", a) }
func (m ptxArith) neg(a string) string      { return m.unop("neg.f64", "fd", a) }
func (m ptxArith) abs(a string) string      { return m.unop("abs.f64", "fd", a) }
func (m ptxArith) rint(a string) string     { return m.unop("cvt.rni.f64.f64", "fd", a) }
func (m ptxArith) flt(a, b string) string   { return m.binop("setp.lt.f64", "p", a, b) }
func (m ptxArith) fle(a, b string) string   { return m.binop("setp.le.f64", "p", a, b) }
func (m ptxArith) fgt(a, b string) string   { return m.binop("setp.gt.f64", "p", a, b) }
func (m ptxArith) fge(a, b string) string   { return m.binop("setp.ge.f64", "p", a, b) }
func (m ptxArith) feq(a, b string) string   { return m.binop("setp.eq.f64", "p", a, b) }
func (m ptxArith) fnan(a string) string     { return m.binop("setp.nan.f64", "p", a, a) }
func (m ptxArith) bits(a string) string     { return m.unop("mov.b64", "rd", a) }
func (m ptxArith) frombits(i string) string { return m.unop("mov.b64", "fd", i) }
func (m ptxArith) i(c uint64) string        { return m.unop("mov.b64", "rd", fmt.Sprintf("0x%016X", c)) }
func (m ptxArith) iadd(a, b string) string  { return m.binop("add.s64", "rd", a, b) }
func (m ptxArith) isub(a, b string) string  { return m.binop("sub.s64", "rd", a, b) }
func (m ptxArith) imul(a, b string) string  { return m.binop("mul.lo.s64", "rd", a, b) }
func (m ptxArith) and(a, b string) string   { return m.binop("and.b64", "rd", a, b) }
func (m ptxArith) or(a, b string) string    { return m.binop("or.b64", "rd", a, b) }
func (m ptxArith) ilt(a, b string) string   { return m.binop("setp.lt.s64", "p", a, b) }
func (m ptxArith) iltu(a, b string) string  { return m.binop("setp.lt.u64", "p", a, b) }
func (m ptxArith) ieq(a, b string) string   { return m.binop("setp.eq.s64", "p", a, b) }
func (m ptxArith) imin(a, b string) string  { return m.binop("min.s64", "rd", a, b) }
func (m ptxArith) imax(a, b string) string  { return m.binop("max.s64", "rd", a, b) }
func (m ptxArith) f2i(a string) string      { return m.unop("cvt.rzi.s64.f64", "rd", a) }
func (m ptxArith) i2f(a string) string      { return m.unop("cvt.rn.f64.s64", "fd", a) }
func (m ptxArith) pand(p, q string) string  { return m.binop("and.pred", "p", p, q) }
func (m ptxArith) por(p, q string) string   { return m.binop("or.pred", "p", p, q) }
func (m ptxArith) pnot(p string) string     { return m.unop("not.pred", "p", p) }

func (m ptxArith) fma(a, b, c string) string {
	d := m.e.reg("fd")
	m.e.op("fma.rn.f64", d, a, b, c)
	return d
}

func (m ptxArith) fsel(p, a, b string) string {
	d := m.e.reg("fd")
	m.e.op("selp.f64", d, a, b, p)
	return d
}

func (m ptxArith) isel(p, a, b string) string {
	d := m.e.reg("rd")
	m.e.op("selp.b64", d, a, b, p)
	return d
}

// Shift counts are .u32 in PTX; the routines only shift by small non-negative amounts.
func (m ptxArith) shift(op, a, n string) string {
	c := m.unop("cvt.u32.u64", "r", n)
	return m.binop(op, "rd", a, c)
}

func (m ptxArith) shl(a, n string) string { return m.shift("shl.b64", a, n) }
func (m ptxArith) shr(a, n string) string { return m.shift("shr.u64", a, n) }
func (m ptxArith) sar(a, n string) string { return m.shift("shr.s64", a, n) }

func (m ptxArith) tab(t *table, idx string, k int) string {
	m.e.tables[t.name] = t
	base := m.unop("mov.u64", "rd", t.name)
	addr := m.e.reg("rd")
	m.e.op("mad.lo.s64", addr, idx, itoa64(int64(8*t.stride)), base)
	d := m.e.reg("fd")
	m.e.op("ld.const.f64", d, fmt.Sprintf("[%s+%d]", addr, 8*k))
	return d
}
