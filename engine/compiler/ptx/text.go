package ptx

import (
	"fmt"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// GenerateProgram compiles every kernel of a program, in launch order.
func GenerateProgram(p *compiler.Program, t Target) ([]*Module, error) {
	if p == nil {
		return nil, errs.New(errs.Input, "ptx: nil program")
	}
	mods := make([]*Module, 0, len(p.Kernels))
	for _, k := range p.Kernels {
		m, err := Generate(k, t)
		if err != nil {
			return nil, err
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// Text is the PTX of every kernel of a program, each preceded by a comment block with its
// launch shape and which program buffer each parameter is: what `tessera-qa compile
// --target ptx` prints.
func Text(p *compiler.Program, t Target) (string, error) {
	mods, err := GenerateProgram(p, t)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, m := range mods {
		k := p.Kernels[i]
		fmt.Fprintf(&b, "// ===== kernel %s: entry %s, path %s, grid (%d,%d,%d), %d threads, %d bytes shared\n",
			k.Name, m.Entry, m.Path, m.Grid[0], m.Grid[1], m.Grid[2], m.Threads, m.SharedBytes)
		for j, prm := range k.Params {
			dir := "in"
			if prm.Output {
				dir = "out"
			}
			fmt.Fprintf(&b, "// param %d: %s %%%s %s[%d] (buffer %d)\n", j, dir, prm.Name, prm.DType, prm.Len, prm.Buffer)
		}
		b.WriteString(m.PTX)
		b.WriteString("\n")
	}
	return b.String(), nil
}
