package ptx

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// checkPTX is a small static checker for the generator's output, standing in for ptxas on
// machines without the CUDA toolkit: balanced braces, declared registers only (each .func and
// the entry declare their own), every operand of the register class its opcode's type demands,
// opcodes from knownOps, calls only to routines defined above with the classes of their
// signature, labels defined once and every branch target defined, and as many .param entries
// as the kernel has params.
func checkPTX(text string, params int) error {
	if strings.Count(text, "{") != strings.Count(text, "}") {
		return fmt.Errorf("unbalanced braces")
	}
	if got := strings.Count(text, ".param .u64 "); got != params {
		return fmt.Errorf("%d .param entries for %d params", got, params)
	}
	funcs := map[string][2]string{} // .func name -> classes of its result and argument
	sc := &scope{declared: map[string]int{}}
	labels := map[string]bool{}
	var targets []string
	for n, line := range strings.Split(text, "\n") {
		where := func(err error) error { return fmt.Errorf("line %d %q: %w", n+1, strings.TrimSpace(line), err) }
		if m := funcDecl.FindStringSubmatch(line); m != nil {
			if _, twice := funcs[m[2]]; twice {
				return where(fmt.Errorf(".func %s defined twice", m[2]))
			}
			funcs[m[2]] = [2]string{classOfDecl[m[1]], classOfDecl[m[3]]}
			sc = &scope{declared: map[string]int{}, named: map[string]string{"%ret": classOfDecl[m[1]], "%arg": classOfDecl[m[3]]}}
			continue
		}
		if strings.HasPrefix(line, ".visible .entry ") {
			sc = &scope{declared: map[string]int{}}
			continue
		}
		if m := regDecl.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[3])
			if want := classOfDecl[m[1]]; want != m[2] {
				return where(fmt.Errorf("register file %%%s declared %s, want %s", m[2], m[1], want))
			}
			sc.declared[m[2]] = n
			continue
		}
		if m := labelDef.FindStringSubmatch(line); m != nil {
			if labels[m[1]] {
				return where(fmt.Errorf("label defined twice"))
			}
			labels[m[1]] = true
			continue
		}
		if !strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "\t//") ||
			strings.HasPrefix(line, "\t.param") || strings.HasPrefix(line, "\t0x") {
			continue
		}
		ins := strings.TrimSpace(line)
		if !strings.HasSuffix(ins, ";") {
			return where(fmt.Errorf("instruction without ';'"))
		}
		ins = strings.TrimSuffix(ins, ";")
		if strings.HasPrefix(ins, "@") {
			guard, rest, _ := strings.Cut(ins, " ")
			if err := sc.checkReg(strings.TrimPrefix(strings.TrimPrefix(guard, "@"), "!"), "p"); err != nil {
				return where(err)
			}
			ins = rest
		}
		opcode, rest, _ := strings.Cut(ins, " ")
		if !knownOps[opcode] {
			return where(fmt.Errorf("opcode %q not in the emitter's table", opcode))
		}
		var ops []string
		if rest != "" {
			ops = strings.Split(rest, ", ")
		}
		switch opcode {
		case "bra":
			targets = append(targets, ops[0])
			continue
		case "call":
			if err := sc.checkCall(ops, funcs); err != nil {
				return where(err)
			}
			continue
		}
		want := operandClasses(opcode, len(ops))
		for i, o := range ops {
			isDst := i == 0 && !strings.HasPrefix(opcode, "st.") && !strings.HasPrefix(opcode, "bar.") && want[i] != "imm"
			if err := sc.checkOperand(o, want[i], isDst); err != nil {
				return where(fmt.Errorf("operand %d: %w", i, err))
			}
		}
	}
	for _, t := range targets {
		if !labels[t] {
			return fmt.Errorf("branch to undefined label %s", t)
		}
	}
	return nil
}

// scope is what the body of one .func or of the entry may name: its register files and, in a
// .func, its parameters.
type scope struct {
	declared map[string]int    // register file prefix -> count
	named    map[string]string // parameter -> register class
}

// checkCall checks "call (%d), name, (%a)" against a routine defined above.
func (sc *scope) checkCall(ops []string, funcs map[string][2]string) error {
	if len(ops) != 3 {
		return fmt.Errorf("call with %d operands, want (result), name, (argument)", len(ops))
	}
	sig, ok := funcs[ops[1]]
	if !ok {
		return fmt.Errorf("call to %s, which no .func above defines", ops[1])
	}
	for i, o := range []string{ops[0], ops[2]} {
		if !strings.HasPrefix(o, "(") || !strings.HasSuffix(o, ")") {
			return fmt.Errorf("call operand %q not in parentheses", o)
		}
		if err := sc.checkReg(strings.Trim(o, "()"), sig[i]); err != nil {
			return err
		}
	}
	return nil
}

var (
	regDecl    = regexp.MustCompile(`^\t\.reg (\.\w+) %([a-z]+)<(\d+)>;$`)
	funcDecl   = regexp.MustCompile(`^\.func \(\.reg (\.\w+) %ret\) (\w+)\(\.reg (\.\w+) %arg\)$`)
	labelDef   = regexp.MustCompile(`^(\$L\d+):$`)
	regRef     = regexp.MustCompile(`^%([a-z]+)(\d+)$`)
	immediate  = regexp.MustCompile(`^(-?\d+|0x[0-9A-F]+|0d[0-9A-F]{16}|0f[0-9A-F]{8})$`)
	addressArg = regexp.MustCompile(`^\[(%[a-z]+\d+|[A-Za-z_]\w*)(\+\d+)?\]$`)
)

var classOfDecl = map[string]string{".pred": "p", ".b16": "h", ".b32": "r", ".b64": "rd", ".f32": "f", ".f64": "fd"}

// classOfType maps a PTX type suffix to the register file holding it.
var classOfType = map[string]string{
	"f64": "fd", "f32": "f", "s64": "rd", "u64": "rd", "b64": "rd", "s32": "r", "u32": "r", "b32": "r",
	"b16": "h", "u16": "h", "s16": "h", "f16": "h", "bf16": "h", "u8": "h", "s8": "h", "pred": "p",
}

// operandClasses is the register file each operand of an opcode must come from; "*" takes
// either of two files (bit moves), "addr" an address, "sym" a symbol or special register.
func operandClasses(opcode string, n int) []string {
	parts := strings.Split(opcode, ".")
	last := classOfType[parts[len(parts)-1]]
	fill := func(c string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = c
		}
		return out
	}
	switch {
	case parts[0] == "setp":
		out := fill(last)
		out[0] = "p"
		return out
	case parts[0] == "selp":
		out := fill(last)
		out[n-1] = "p"
		return out
	case parts[0] == "cvta":
		return fill(last)
	case strings.HasSuffix(opcode, "x2.f32") && parts[0] == "cvt":
		return []string{"r", "f", "f"}
	case parts[0] == "cvt":
		return []string{classOfType[parts[len(parts)-2]], last}
	case parts[0] == "ld":
		return []string{last, "addr"}
	case parts[0] == "st":
		return []string{"addr", last}
	case opcode == "mad.wide.s32":
		return []string{"rd", "r", "r", "rd"}
	case opcode == "mul.wide.s32":
		return []string{"rd", "r", "r"}
	case opcode == "mov.b64":
		return []string{"rd|fd", "rd|fd"}
	case opcode == "mov.b32":
		return []string{"r|f", "r|f"}
	case opcode == "mov.u64" || opcode == "mov.u32":
		return []string{last, last + "|sym"}
	case parts[0] == "shl" || parts[0] == "shr":
		return []string{last, last, "r"}
	case opcode == "cp.async.cg.shared.global":
		return []string{"addr", "addr", "imm", "r"}
	case strings.HasPrefix(opcode, "mbarrier.try_wait"):
		return []string{"p", "addr", "r"}
	case strings.HasPrefix(opcode, "mbarrier.init"):
		return []string{"addr", "imm"}
	case strings.HasPrefix(opcode, "mbarrier.arrive"):
		return []string{"rd", "addr"}
	case strings.HasPrefix(opcode, "cp.async.mbarrier.arrive"):
		return []string{"addr"}
	case strings.HasPrefix(opcode, "setmaxnreg"):
		return []string{"imm"}
	case strings.HasPrefix(opcode, "wgmma.mma_async.") && n == 7: // A from registers
		return []string{"f", "r", "rd", "p", "imm", "imm", "imm"}
	case strings.HasPrefix(opcode, "wgmma.mma_async."):
		return []string{"f", "rd", "rd", "p", "imm", "imm", "imm", "imm"}
	case strings.HasPrefix(opcode, "wgmma.") || strings.HasPrefix(opcode, "cp.async.") || strings.HasPrefix(opcode, "fence."):
		return fill("imm")
	case parts[0] == "ldmatrix":
		return []string{"r", "addr"}
	case parts[0] == "mma":
		return []string{"f", "r", "r", "f"}
	case opcode == "bfe.u32":
		return []string{"r", "r", "r", "r"}
	case opcode == "bar.sync" || opcode == "bar.arrive": // barrier id and count: immediates or registers
		return fill("r")
	case opcode == "ret":
		return fill("imm")
	}
	return fill(last)
}

func (sc *scope) checkOperand(o, want string, isDst bool) error {
	if strings.HasPrefix(o, "{") && strings.HasSuffix(o, "}") {
		for _, r := range strings.Split(strings.Trim(o, "{}"), ",") {
			if err := sc.checkReg(r, want); err != nil {
				return err
			}
		}
		return nil
	}
	if want == "addr" {
		m := addressArg.FindStringSubmatch(o)
		if m == nil {
			return fmt.Errorf("%q is not an address", o)
		}
		if strings.HasPrefix(m[1], "%") {
			return sc.checkReg(m[1], "r|rd")
		}
		return nil
	}
	if immediate.MatchString(o) {
		if isDst {
			return fmt.Errorf("immediate %s as destination", o)
		}
		return nil
	}
	if strings.Contains(want, "sym") && (o == "%tid.x" || o == "%ctaid.x" || o == "%ctaid.y" || regexp.MustCompile(`^tq_\w+$`).MatchString(o)) {
		return nil
	}
	return sc.checkReg(o, want)
}

func (sc *scope) checkReg(o, want string) error {
	class, ok := sc.named[o]
	if !ok {
		m := regRef.FindStringSubmatch(o)
		if m == nil {
			return fmt.Errorf("%q is not a register", o)
		}
		n, _ := strconv.Atoi(m[2])
		if lim, ok := sc.declared[m[1]]; !ok || n >= lim {
			return fmt.Errorf("register %s not declared", o)
		}
		class = m[1]
	}
	for _, w := range strings.Split(want, "|") {
		if w == class {
			return nil
		}
	}
	return fmt.Errorf("register %s where %s is needed", o, want)
}
