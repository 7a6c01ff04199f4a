package ptx

import (
	"fmt"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// simtThreads is the CTA size of the SIMT path: thread t handles elements t, t+256, ...
const simtThreads = 256

// gen generates one kernel on the SIMT path: one CTA per Tile IR grid point, every tile
// register in shared memory, every instruction a strided loop over its elements followed by
// a barrier. It is the reference GPU lowering: slow, but it follows the CPU backend's
// semantics step for step, so both give the same bits wherever the math routines agree.
type gen struct {
	k       *tile.Kernel
	t       Target
	entry   string
	shapes  []tile.Shape
	lay     *layout
	threads int

	e, pro *emitter // body and prologue, sharing register numbering
	tid    string   // %tid.x
	smem   string   // shared-memory base address
	vars   []string // .s32 register of each tile Var
	params []string // global base address of each param
	bases  map[tile.Reg]string
	pc     int // pre-order number of the instruction being generated, for errors

	lane, warp      string // lane and warp index, once a tensor-core MMA needs them
	usedTensorCores bool

	extra     []Extra       // launcher-provided buffers (tables, scratch), params after the kernel's
	extraAddr []string      // their global addresses
	fftWork   fftKernelWork // where its FFTs keep their work rows (fft_work.go)
	scratch   string        // this CTA's FFT scratch address, once used
}

// Generate compiles one Tile IR kernel to PTX for target t. Anything it cannot compile
// faithfully is an E_UNSUPPORTED error naming the kernel and the instruction.
func Generate(k *tile.Kernel, t Target) (mod *Module, err error) {
	if k == nil {
		return nil, errs.New(errs.Input, "ptx: nil kernel")
	}
	if t.SM < 80 {
		return nil, errs.New(errs.Unsupported, "ptx: kernel %s: target %s: the SIMT path needs sm_80 or newer (cvt.rn.bf16.f32)", k.Name, t.Arch())
	}
	shapes, err := tile.Verify(k)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "ptx: kernel %s", k.Name)
	}
	if m, ok := dedicated(k, t); ok {
		return m, nil
	}
	if m := generateRows(k, t); m != nil {
		return m, nil
	}
	if m, err := generateReduce(k, t, shapes); m != nil || err != nil {
		return m, err
	}
	if m, err := generateTranspose(k, t, shapes); m != nil || err != nil {
		return m, err
	}
	if m, err := generateStream(k, t, shapes); m != nil || err != nil {
		return m, err
	}
	g := &gen{k: k, t: t, entry: entryName(k.Name), shapes: shapes, threads: simtThreads, bases: map[tile.Reg]string{}}
	if err := g.checkLimits(); err != nil {
		return nil, err
	}
	fo, err := fftOptionsNow()
	if err != nil {
		return nil, err
	}
	g.fftWork = planFFTWork(k, shapes, fo)
	g.lay = planLayoutWithout(k, shapes, !t.SIMTOnly, g.fftWork.absent)
	if g.lay.bytes > maxShared {
		return nil, errs.New(errs.Unsupported, "ptx: kernel %s: tile registers need %d bytes of shared memory, over the %d a CTA may have",
			k.Name, g.lay.bytes, maxShared)
	}
	g.fftWork.place(shapes, g.lay)
	g.threads = fftThreads(k, shapes, fo, g.lay.bytes)
	if g.fftWork.scratch > maxIndex/2 {
		return nil, errs.New(errs.Unsupported, "ptx: kernel %s: its FFT needs %d bytes of scratch a CTA, beyond .s32 offsets", k.Name, g.fftWork.scratch)
	}
	defer func() {
		if r := recover(); r != nil {
			mod, err = nil, errs.New(errs.Internal, "ptx: kernel %s instr %d: generator bug: %v", k.Name, g.pc, r)
		}
	}()
	text, err := g.kernel()
	if err != nil {
		return nil, err
	}
	total := 1
	for _, d := range k.Grid {
		total *= d
	}
	path := "simt"
	if g.usedTensorCores {
		path = "mma.sync"
	}
	return &Module{PTX: text, Entry: g.entry, Grid: [3]int{total, 1, 1}, Threads: g.threads, SharedBytes: g.lay.bytes, Path: path, Extra: g.extra}, nil
}

// entryName makes a PTX identifier from a kernel name.
func entryName(name string) string {
	return "tq_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, name)
}

func (g *gen) unsupported(format string, args ...any) error {
	return errs.New(errs.Unsupported, "ptx: kernel %s instr %d: %s", g.k.Name, g.pc, fmt.Sprintf(format, args...))
}

func (g *gen) kernel() (string, error) {
	g.e = newEmitter()
	g.pro = g.e.fork()
	g.prologue()
	if err := g.body(g.k.Body); err != nil {
		return "", err
	}
	g.e.op("ret")

	return g.entryText("", gridTotal(g.k.Grid), g.threads, g.lay.bytes, true, g.pro.w.String(), g.e.w.String()), nil
}

func gridTotal(grid []int) int {
	t := 1
	for _, d := range grid {
		t *= d
	}
	return t
}

// prologue reads the thread and block ids, the parameters, and unfolds the linear block id
// into the Tile IR grid vars (last dim fastest, so neighbouring CTAs share the panels of a
// matmul's row block).
func (g *gen) prologue() {
	p := g.pro
	g.tid = p.reg("r")
	p.op("mov.u32", g.tid, "%tid.x")
	g.smem = p.reg("r")
	p.op("mov.u32", g.smem, "tq_smem")
	for i := range g.k.Params {
		raw := p.reg("rd")
		p.op("ld.param.u64", raw, fmt.Sprintf("[%s_p%d]", g.entry, i))
		glob := p.reg("rd")
		p.op("cvta.to.global.u64", glob, raw)
		g.params = append(g.params, glob)
	}
	g.vars = make([]string, g.k.NumVars)
	rest := p.reg("r")
	p.op("mov.u32", rest, "%ctaid.x")
	for d := len(g.k.Grid) - 1; d >= 0; d-- {
		v := p.reg("r")
		if d == 0 {
			p.op("mov.u32", v, rest)
		} else {
			p.op("rem.u32", v, rest, itoa(g.k.Grid[d]))
			q := p.reg("r")
			p.op("div.u32", q, rest, itoa(g.k.Grid[d]))
			rest = q
		}
		g.vars[d] = v
	}
	for v := len(g.k.Grid); v < g.k.NumVars; v++ {
		g.vars[v] = p.reg("r")
	}
}

func (g *gen) body(body []tile.Instr) error {
	for _, in := range body {
		g.pc++
		g.e.comment("%d: %s", g.pc, describe(in))
		if g.fftWork.skip[g.pc-1] {
			continue // an FFT next to it does its work (fft_work.go)
		}
		var err error
		switch x := in.(type) {
		case tile.Full:
			g.full(x)
		case tile.Load:
			g.load(x)
		case tile.Store:
			g.store(x)
		case tile.Copy:
			g.copyBits(x)
		case tile.Unary:
			err = g.unary(x)
		case tile.Binary:
			err = g.binary(x)
		case tile.Round:
			g.round(x)
		case tile.Reduce:
			err = g.reduce(x)
		case tile.MMA:
			err = g.mma(x)
		case tile.OnlineSoftmax:
			err = g.onlineSoftmax(x)
		case tile.MaskScores:
			g.maskScores(x)
		case tile.MaskCols:
			g.maskCols(x)
		case tile.FFT:
			err = g.fft(x)
		case tile.For:
			err = g.loop(x)
			continue // the loop body ends with its own barrier
		default:
			return g.unsupported("instruction %T", in)
		}
		if err != nil {
			return err
		}
		// A generator that forgets the barrier after a load lets threads read tile elements
		// other threads have not written yet.
		if _, isLoad := in.(tile.Load); isLoad && failpoint.Enabled(failpoint.PTXLoadBarrierDropped) {
			continue
		}
		g.e.op("bar.sync", "0")
	}
	return nil
}

// loop is a counted loop; the count is uniform, so every thread reaches every barrier.
func (g *gen) loop(f tile.For) error {
	v := g.vars[f.Var]
	g.e.op("mov.u32", v, "0")
	head := g.e.label()
	g.e.place(head)
	if err := g.body(f.Body); err != nil {
		return err
	}
	g.e.op("add.s32", v, v, "1")
	p := g.e.reg("p")
	g.e.op("setp.lt.s32", p, v, itoa(f.Count))
	g.e.opIf(p, "bra", head)
	return nil
}

// forEach runs body(idx) for idx = tid, tid+T, ... < n.
func (g *gen) forEach(n int, body func(idx string)) {
	e := g.e
	p := e.reg("p")
	if n <= g.threads {
		skip := e.label()
		e.op("setp.ge.u32", p, g.tid, itoa(n))
		e.opIf(p, "bra", skip)
		body(g.tid)
		e.place(skip)
		return
	}
	idx := e.reg("r")
	e.op("mov.u32", idx, g.tid)
	head, done := e.label(), e.label()
	e.place(head)
	e.op("setp.ge.u32", p, idx, itoa(n))
	e.opIf(p, "bra", done)
	body(idx)
	e.op("add.s32", idx, idx, itoa(g.threads))
	e.op("bra", head)
	e.place(done)
}

// count emits a sequential loop c = from .. to-1 inside one thread (a row fold, a dot product).
func (g *gen) count(from, to int, body func(c string)) {
	if from >= to {
		return
	}
	e := g.e
	c := e.reg("r")
	e.op("mov.u32", c, itoa(from))
	head := e.label()
	e.place(head)
	body(c)
	e.op("add.s32", c, c, "1")
	p := e.reg("p")
	e.op("setp.lt.s32", p, c, itoa(to))
	e.opIf(p, "bra", head)
}

// rowCol splits a flat element index of a tile with cols columns.
func (g *gen) rowCol(idx string, cols int) (string, string) {
	if cols == 1 {
		c := g.e.reg("r")
		g.e.op("mov.u32", c, "0")
		return idx, c
	}
	r, c := g.e.reg("r"), g.e.reg("r")
	g.e.op("div.u32", r, idx, itoa(cols))
	g.e.op("rem.u32", c, idx, itoa(cols))
	return r, c
}

// lin is r*cols + c.
func (g *gen) lin(r string, cols int, c string) string {
	d := g.e.reg("r")
	g.e.op("mad.lo.s32", d, r, itoa(cols), c)
	return d
}

// expr evaluates an affine expression of the tile vars into an .s32 register.
func (g *gen) expr(x tile.Expr) string {
	r := g.e.reg("r")
	g.e.op("mov.u32", r, itoa(x.Const))
	for _, t := range x.Terms {
		if t.Coef != 0 {
			g.e.op("mad.lo.s32", r, g.vars[t.Var], itoa(t.Coef), r)
		}
	}
	return r
}

// describe is the one-line Tile IR form of an instruction, for comments in the PTX.
func describe(in tile.Instr) string {
	k := &tile.Kernel{Name: "x", Grid: []int{1}}
	if f, ok := in.(tile.For); ok {
		return fmt.Sprintf("for v%d in 0..%d", f.Var, f.Count)
	}
	k.Body = []tile.Instr{in}
	lines := strings.Split(strings.TrimSpace(tile.Format(k)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// entryText wraps a kernel's instructions in its module: what made it and how to launch it,
// the PTX version and target, the constant tables, the dynamic shared memory (smem), and the
// entry with one u64 global address per kernel param. lowering names a dedicated lowering ("":
// the general path).
func (g *gen) entryText(lowering string, grid, threads, shared int, smem bool, bodies ...string) string {
	m := module{generated: " from Tile IR kernel " + g.k.Name, version: g.t.PTXVersion, arch: g.t.Arch(), entry: g.entry,
		params: len(g.k.Params) + len(g.extra), threads: threads,
		launch: fmt.Sprintf("grid (%d,1,1), %d threads, %d bytes of dynamic shared memory", grid, threads, shared)}
	if lowering != "" {
		m.generated = " (" + lowering + ")" + m.generated
	}
	if smem {
		m.smemAlign = 16
	}
	return moduleText(m, g.e, bodies...)
}
