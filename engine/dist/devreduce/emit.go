package devreduce

import (
	"fmt"
	"strings"
)

// regClasses are the virtual register files a kernel declares: name prefix and PTX type.
var regClasses = []struct{ prefix, typ string }{
	{"p", ".pred"}, {"h", ".b16"}, {"r", ".b32"}, {"rd", ".b64"}, {"f", ".f32"}, {"fd", ".f64"},
}

// Opcodes is every instruction a reduction kernel may contain, with the oldest target that
// has it. The emitter refuses anything else, and ptxsim implements exactly these, so a kernel
// cannot contain an instruction the CPU check did not execute.
var Opcodes = map[string]string{
	"ld.param.u64": "sm_80", "cvta.to.global.u64": "sm_80", "mov.u32": "sm_80",
	"mul.wide.u32": "sm_80", "cvt.u64.u32": "sm_80", "add.u64": "sm_80", "shl.b64": "sm_80",
	"setp.ge.u64": "sm_80", "bra": "sm_80", "ret": "sm_80",
	"ld.global.b64": "sm_80", "ld.global.b32": "sm_80", "ld.global.b16": "sm_80",
	"ld.global.u8": "sm_80", "ld.global.s8": "sm_80", "ld.global.s32": "sm_80",
	"st.global.b64": "sm_80", "st.global.b32": "sm_80", "st.global.b16": "sm_80", "st.global.u8": "sm_80",
	"mov.b64": "sm_80", "mov.b32": "sm_80", "mov.b16": "sm_80", "mov.f32": "sm_80",
	"add.rn.f64": "sm_80", "add.rn.f32": "sm_80", "div.rn.f64": "sm_80", "div.rn.f32": "sm_80",
	"add.s64": "sm_80", "div.s64": "sm_80", "cvt.s64.s32": "sm_80", "cvt.s64.s16": "sm_80",
	"cvt.s32.s16": "sm_80", "cvt.u32.u16": "sm_80", "cvt.u32.u64": "sm_80", "cvt.u16.u64": "sm_80",
	"cvt.u16.u32": "sm_80", "shl.b32": "sm_80", "cvt.f32.f16": "sm_80",
	"cvt.rn.f16.f32": "sm_80", "cvt.rn.bf16.f32": "sm_80",
	"cvt.rn.f16x2.e4m3x2": "sm_90", "cvt.rn.f16x2.e5m2x2": "sm_90",
	"cvt.rn.satfinite.e4m3x2.f32": "sm_90", "cvt.rn.satfinite.e5m2x2.f32": "sm_90",
	"setp.nan.f32": "sm_80", "setp.nan.f64": "sm_80",
	"selp.b64": "sm_80", "selp.b32": "sm_80", "selp.b16": "sm_80",
	"and.b32": "sm_80", "and.b64": "sm_80", "not.b32": "sm_80", "not.b64": "sm_80",
	"setp.ne.u32": "sm_80", "setp.ne.u64": "sm_80", "setp.gt.u32": "sm_80", "setp.gt.u64": "sm_80",
	"setp.eq.u32": "sm_80", "setp.eq.u64": "sm_80",
	"setp.gt.s32": "sm_80", "setp.gt.s64": "sm_80", "setp.lt.s32": "sm_80", "setp.lt.s64": "sm_80",
	"or.pred": "sm_80",
}

// emitter writes a kernel body with fresh virtual registers (ptxas allocates the real ones).
type emitter struct {
	w      *strings.Builder
	count  map[string]int
	labels *int
}

func newEmitter() *emitter {
	return &emitter{w: &strings.Builder{}, count: map[string]int{}, labels: new(int)}
}

// fork writes to its own buffer with the same register and label numbering.
func (e *emitter) fork() *emitter {
	return &emitter{w: &strings.Builder{}, count: e.count, labels: e.labels}
}

func (e *emitter) reg(prefix string) string {
	e.count[prefix]++
	return fmt.Sprintf("%%%s%d", prefix, e.count[prefix])
}

func (e *emitter) op(opcode string, args ...string) { e.opIf("", opcode, args...) }

func (e *emitter) opIf(pred, opcode string, args ...string) {
	if _, ok := Opcodes[opcode]; !ok {
		panic(fmt.Sprintf("devreduce emitter: opcode %q is not in the table", opcode))
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
	*e.labels++
	return fmt.Sprintf("$L%d", *e.labels)
}

func (e *emitter) place(l string) { e.w.WriteString(l + ":\n") }

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
