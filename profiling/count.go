package profiling

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Cost is the work one launch of a kernel does, counted from its Tile IR.
type Cost struct {
	FLOPs int64 `json:"flops"`
	// Bytes moved between memory and registers: every Load, Store and Copy counted as the
	// Tile IR issues it, so a panel that several grid points load counts once per load.
	Bytes int64 `json:"bytes"`
}

// maxCountSteps bounds the instructions Count visits (grid points x loop trips x body); a
// kernel past it is E_UNSUPPORTED rather than a minute of counting.
const maxCountSteps = 50_000_000

// Count walks every grid point and loop trip of k, as the backends execute it, and adds up
// per instruction (the register shapes come from tile.Verify; R x C is the destination tile):
//
//	Load, Store      bytes: in-bounds elements x the parameter's dtype size (a masked access
//	                 counts only elements inside the buffer's dims; an unmasked one all R*C)
//	Copy             bytes: in-bounds elements x size, read plus write
//	MMA              FLOPs: 2*M*N*K for A [M,K] x B [K,N] (a multiply and an add per term)
//	Unary, Binary    FLOPs: R*C (one per element; exp, tanh ... count one each)
//	Reduce           FLOPs: R*C of the source (one fold per element)
//	OnlineSoftmax    FLOPs: 4*R*C + 4*R (row max, subtract, exp and sum per score; rescale
//	                 and update of the row state)
//	Full, Round, MaskScores, MaskCols, For
//	                 0 (constants, conversions, selects and control)
//
// FLOPs include the padding lanes of a ragged last tile: it is the work the kernel does, not
// the work the graph needs; for tile-aligned shapes a matmul counts exactly 2*M*N*K.
func Count(k *tile.Kernel) (Cost, error) {
	shapes, err := tile.Verify(k)
	if err != nil {
		return Cost{}, errs.New(errs.Input, "profiling: %v", err)
	}
	c := &counter{k: k, shapes: shapes, vars: make([]int, k.NumVars)}
	total := 1
	for _, g := range k.Grid {
		total *= g
	}
	for g := range total {
		rem := g
		for d := len(k.Grid) - 1; d >= 0; d-- {
			c.vars[d] = rem % k.Grid[d]
			rem /= k.Grid[d]
		}
		c.walk(k.Body)
		if c.steps > maxCountSteps {
			return Cost{}, errs.New(errs.Unsupported, "profiling: kernel %s takes more than %d steps to count", k.Name, maxCountSteps)
		}
	}
	return c.cost, nil
}

type counter struct {
	k      *tile.Kernel
	shapes []tile.Shape
	vars   []int
	cost   Cost
	steps  int64
}

func (c *counter) elems(r tile.Reg) int64 {
	s := c.shapes[r]
	return int64(s[0]) * int64(s[1])
}

// inBounds is the number of elements an access touches at the current vars.
func (c *counter) inBounds(a tile.Access) int64 {
	if !a.Mask {
		return int64(a.Rows) * int64(a.Cols)
	}
	span := func(start, n int, dims []int) int64 {
		lim := 1
		for _, d := range dims {
			lim *= d
		}
		return int64(max(0, min(n, lim-start)))
	}
	return span(a.RowStart.Eval(c.vars), a.Rows, a.RowDims) * span(a.ColStart.Eval(c.vars), a.Cols, a.ColDims)
}

func (c *counter) size(a tile.Access) int64 { return int64(c.k.Params[a.Param].DType.Size()) }

func (c *counter) walk(body []tile.Instr) {
	for _, in := range body {
		c.steps++
		switch x := in.(type) {
		case tile.Load:
			c.cost.Bytes += c.inBounds(x.At) * c.size(x.At)
		case tile.Store:
			c.cost.Bytes += c.inBounds(x.At) * c.size(x.At)
		case tile.Copy:
			n := min(c.inBounds(x.From), c.inBounds(x.To))
			c.cost.Bytes += n * (c.size(x.From) + c.size(x.To))
		case tile.MMA:
			a, b := c.shapes[x.A], c.shapes[x.B]
			c.cost.FLOPs += 2 * int64(a[0]) * int64(b[1]) * int64(a[1])
		case tile.Unary:
			c.cost.FLOPs += c.elems(x.Dst)
		case tile.Binary:
			c.cost.FLOPs += c.elems(x.Dst)
		case tile.Reduce:
			c.cost.FLOPs += c.elems(x.Src)
		case tile.OnlineSoftmax:
			c.cost.FLOPs += 4*c.elems(x.X) + 4*int64(c.shapes[x.X][0])
		case tile.For:
			for it := range x.Count {
				c.vars[x.Var] = it
				c.walk(x.Body)
			}
		}
	}
}
