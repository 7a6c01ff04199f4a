package compiler

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func verifyTile(s *state) error {
	for _, k := range s.prog.Kernels {
		if _, err := tile.Verify(k); err != nil {
			return errs.New(errs.Internal, "%v", err)
		}
	}
	return nil
}

// FormatTile prints every kernel of a program with its schedule: the --dump=tile view.
func FormatTile(p *Program) string {
	var b strings.Builder
	for i, k := range p.Kernels {
		b.WriteString("// " + p.Schedules[i].String() + "\n")
		b.WriteString(tile.Format(k))
	}
	return b.String()
}
