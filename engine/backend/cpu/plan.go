package cpu

import (
	"fmt"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// step is one instruction ready to run: pc numbers instructions in pre-order from 1, as
// tile.Verify does, so an error here and one from the verifier point at the same place.
type step struct {
	pc   int
	in   tile.Instr
	body []step
	at   *access // Load and Store; Copy's source
	to   *access // Copy's destination
}

// plan is a verified kernel bound to the program's buffers.
type plan struct {
	k      *tile.Kernel
	shapes []tile.Shape
	body   []step
	params []paramBuf
}

// paramBuf is a kernel parameter's buffer viewed in the parameter's dtype.
type paramBuf struct {
	data []byte
	n    int // elements
}

func internalf(k *tile.Kernel, pc int, format string, args ...any) error {
	return errs.New(errs.Internal, "cpu: kernel %s instr %d: %s", k.Name, pc, fmt.Sprintf(format, args...))
}

// newPlan verifies k (structure, register shapes, parameters against buffers) so that running
// it needs no further checks: anything that still goes wrong is a backend bug, caught by the
// recover in runPoints.
func newPlan(k *tile.Kernel, buffers []compiler.Buffer, bufs [][]byte) (*plan, error) {
	if k == nil {
		return nil, errs.New(errs.Internal, "cpu: nil kernel")
	}
	shapes, err := tile.Verify(k)
	if err != nil {
		return nil, errs.New(errs.Internal, "cpu: %v", err)
	}
	p := &plan{k: k, shapes: shapes}
	for i, pr := range k.Params {
		if pr.Buffer < 0 || pr.Buffer >= len(buffers) {
			return nil, errs.New(errs.Internal, "cpu: kernel %s: param %d (%s) names buffer %d of %d", k.Name, i, pr.Name, pr.Buffer, len(buffers))
		}
		bt := buffers[pr.Buffer].Type
		if bt.DType != pr.DType || bt.NumElems() != pr.Len {
			return nil, errs.New(errs.Internal, "cpu: kernel %s: param %d (%s) is %s x%d but buffer %d (%s) is %s", k.Name, i, pr.Name, pr.DType, pr.Len, pr.Buffer, buffers[pr.Buffer].Name, bt)
		}
		p.params = append(p.params, paramBuf{data: bufs[pr.Buffer], n: pr.Len})
	}
	pc := 0
	if p.body, err = p.build(k.Body, &pc); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *plan) build(body []tile.Instr, pc *int) ([]step, error) {
	out := make([]step, 0, len(body))
	for _, in := range body {
		*pc++
		s := step{pc: *pc, in: in}
		if err := p.check(in); err != nil {
			return nil, internalf(p.k, s.pc, "%s: %v", instrName(in), err)
		}
		switch x := in.(type) {
		case tile.Load:
			s.at = newAccess(x.At, p.k.Params[x.At.Param])
		case tile.Store:
			s.at = newAccess(x.At, p.k.Params[x.At.Param])
		case tile.Copy:
			s.at, s.to = newAccess(x.From, p.k.Params[x.From.Param]), newAccess(x.To, p.k.Params[x.To.Param])
		case tile.For:
			b, err := p.build(x.Body, pc)
			if err != nil {
				return nil, err
			}
			s.body = b
		}
		out = append(out, s)
	}
	return out, nil
}

// check covers what tile.Verify leaves to backends: op names, dtypes and variable indices.
func (p *plan) check(in tile.Instr) error {
	var exprs []tile.Expr
	switch x := in.(type) {
	case tile.Load:
		exprs = []tile.Expr{x.At.Base, x.At.RowStart, x.At.ColStart}
	case tile.Store:
		exprs = []tile.Expr{x.At.Base, x.At.RowStart, x.At.ColStart}
	case tile.Copy:
		exprs = []tile.Expr{x.From.Base, x.From.RowStart, x.From.ColStart, x.To.Base, x.To.RowStart, x.To.ColStart}
	case tile.Unary:
		if !knownUnary[x.Op] {
			return fmt.Errorf("unknown unary op %q", x.Op)
		}
	case tile.Binary:
		if !knownBinary[x.Op] || !x.DType.Valid() {
			return fmt.Errorf("unknown binary op %q or invalid dtype %s", x.Op, x.DType)
		}
	case tile.Reduce:
		if (x.Op != tile.Sum && x.Op != tile.MaxRed) || !x.DType.Valid() {
			return fmt.Errorf("unknown reduction %q or invalid dtype %s", x.Op, x.DType)
		}
	case tile.MMA:
		if !x.AccDType.Valid() {
			return fmt.Errorf("invalid accumulator dtype %s", x.AccDType)
		}
	case tile.OnlineSoftmax:
		if !x.DType.Valid() {
			return fmt.Errorf("invalid dtype %s", x.DType)
		}
		if x.M == x.L || x.P == x.Alpha || x.P == x.M || x.P == x.L || x.Alpha == x.M || x.Alpha == x.L {
			return fmt.Errorf("state and output registers must differ (M r%d L r%d P r%d Alpha r%d)", x.M, x.L, x.P, x.Alpha)
		}
	case tile.MaskScores:
		exprs = []tile.Expr{x.RowStart, x.ColStart}
	case tile.MaskCols:
		exprs = []tile.Expr{x.ColStart}
	}
	for _, e := range exprs {
		for _, t := range e.Terms {
			if t.Var < 0 || int(t.Var) >= p.k.NumVars {
				return fmt.Errorf("expression %s uses v%d of %d vars", e, t.Var, p.k.NumVars)
			}
		}
	}
	return nil
}

func instrName(in tile.Instr) string {
	return strings.ToLower(strings.TrimPrefix(fmt.Sprintf("%T", in), "tile."))
}
