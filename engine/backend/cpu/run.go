package cpu

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
)

// worker owns everything one goroutine mutates: registers, index variables and scratch.
type worker struct {
	p    *plan
	regs []treg
	vars []int
	pc   int
	ld   loadScratch
	mm   mmaScratch
	// points counts the grid points this worker ran in the current kernel (the profiler's
	// Launch.Points).
	points int64
}

// workerPool keeps workers, with their grown register storage, between runs.
var workerPool = sync.Pool{New: func() any { return &worker{} }}

func newWorkers(n int) []*worker {
	ws := make([]*worker, max(n, 1))
	for i := range ws {
		ws[i] = workerPool.Get().(*worker)
	}
	return ws
}

func releaseWorkers(ws []*worker) {
	for _, w := range ws {
		w.p = nil // do not keep the program's buffers alive
		workerPool.Put(w)
	}
}

// runKernel runs every grid point of k. Worker w takes points w, w+W, w+2W, ... of the visiting
// order (gridPoint): a static partition, and since grid points write disjoint elements the
// bits do not depend on W. It returns the number of grid points run.
func runKernel(k *tile.Kernel, buffers []compiler.Buffer, bufs [][]byte, ws []*worker) (int64, error) {
	p, err := newPlan(k, buffers, bufs)
	if err != nil {
		return 0, err
	}
	for _, w := range ws {
		w.points = 0
	}
	err = runPlan(p, ws)
	var points int64
	for _, w := range ws {
		points += w.points
	}
	return points, err
}

func runPlan(p *plan, ws []*worker) error {
	total := 1
	for _, g := range p.k.Grid {
		total *= g
	}
	nw := min(len(ws), total)
	// firstFail is the lowest failing grid point so far: workers skip only points above it, so
	// the error reported is always the one at the lowest failing point, whatever W is.
	var firstFail atomic.Int64
	firstFail.Store(int64(total))
	errsAt := make([]error, nw)
	var wg sync.WaitGroup
	for w := range nw {
		ws[w].bind(p)
		if nw == 1 {
			errsAt[w] = ws[w].runPoints(w, nw, total, &firstFail)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errsAt[w] = ws[w].runPoints(w, nw, total, &firstFail)
		}()
	}
	wg.Wait()
	if f := firstFail.Load(); f < int64(total) {
		return errsAt[int(f)%nw]
	}
	return nil
}

// bind sizes the worker's registers for p, keeping storage from earlier kernels.
func (w *worker) bind(p *plan) {
	w.p = p
	w.points = 0
	if cap(w.regs) < p.k.NumRegs {
		w.regs = append(w.regs[:cap(w.regs)], make([]treg, p.k.NumRegs-cap(w.regs))...)
	}
	w.regs = w.regs[:p.k.NumRegs]
	for i, s := range p.shapes {
		w.regs[i].rows, w.regs[i].cols = s[0], s[1]
		w.regs[i].has64, w.regs[i].has32 = false, false
	}
	if cap(w.vars) < p.k.NumVars {
		w.vars = make([]int, p.k.NumVars)
	}
	w.vars = w.vars[:p.k.NumVars]
}

func (w *worker) runPoints(first, stride, total int, firstFail *atomic.Int64) (err error) {
	g := first
	defer func() {
		if r := recover(); r != nil {
			err = internalf(w.p.k, w.pc, "%s at grid point %v: backend panic: %v", instrName(w.instrAt(w.pc)), w.vars[:len(w.p.k.Grid)], r)
			for {
				cur := firstFail.Load()
				if int64(g) >= cur || firstFail.CompareAndSwap(cur, int64(g)) {
					break
				}
			}
		}
	}()
	grid := w.p.k.Grid
	for ; g < total; g += stride {
		if int64(g) > firstFail.Load() {
			return nil
		}
		gridPoint(grid, g, w.vars)
		w.pc = 0
		w.exec(w.p.body)
		w.points++
	}
	return nil
}

// groupRows is how many rows of the last two grid dims are visited together; see gridPoint.
const groupRows = 8

// gridPoint sets vars to the g-th grid point in visiting order. Dims before the last two are
// row-major; the last two (for a matmul: row block, col block) are visited in groups of
// groupRows row blocks, column by column, so consecutive points share B panels and a group's A
// panels stay in cache. Any order gives the same bits; this one is just kinder to caches.
func gridPoint(grid []int, g int, vars []int) {
	n := len(grid)
	if n < 2 {
		vars[0] = g
		return
	}
	rows, cols := grid[n-2], grid[n-1]
	in := g % (rows * cols)
	for d, rem := n-3, g/(rows*cols); d >= 0; d-- {
		vars[d] = rem % grid[d]
		rem /= grid[d]
	}
	first := in / (groupRows * cols) * groupRows
	size := min(rows-first, groupRows)
	r := in - first*cols
	vars[n-2], vars[n-1] = first+r%size, r/size
}

// instrAt finds the instruction with pre-order number pc, for error messages.
func (w *worker) instrAt(pc int) tile.Instr {
	var find func([]step) tile.Instr
	find = func(body []step) tile.Instr {
		for i := range body {
			if body[i].pc == pc {
				return body[i].in
			}
			if in := find(body[i].body); in != nil {
				return in
			}
		}
		return nil
	}
	return find(w.p.body)
}

func (w *worker) exec(body []step) {
	for i := range body {
		s := &body[i]
		w.pc = s.pc
		switch in := s.in.(type) {
		case tile.Full:
			w.full(in)
		case tile.Load:
			w.load(s.at, in.Dst, in.Fill)
		case tile.Store:
			w.store(s.at, in.Src)
		case tile.Copy:
			w.copyBits(s.at, s.to)
		case tile.Unary:
			w.unary(in)
		case tile.Binary:
			w.binary(in)
		case tile.Round:
			w.round(in)
		case tile.Reduce:
			w.reduce(in)
		case tile.MMA:
			w.mma(in)
		case tile.OnlineSoftmax:
			w.onlineSoftmax(in)
		case tile.MaskScores:
			w.maskScores(in)
		case tile.MaskCols:
			w.maskCols(in)
		case tile.FFT:
			w.fft(in)
		case tile.For:
			for it := range in.Count {
				w.vars[in.Var] = it
				w.exec(s.body)
			}
		default:
			panic(fmt.Sprintf("unknown instruction %T", in))
		}
	}
}
