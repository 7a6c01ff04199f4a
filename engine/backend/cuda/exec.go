package cuda

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// checkProgram verifies what execution relies on beyond the kernels' own code: buffer types,
// the graph's inputs and outputs mapped onto buffers, and kernel params that fit their buffers
// (a param longer than its buffer would let a correct kernel write out of bounds).
func checkProgram(p *compiler.Program) error {
	for i, bf := range p.Buffers {
		if !bf.Type.DType.Valid() || slices.ContainsFunc(bf.Type.Shape, func(d int) bool { return d < 0 }) {
			return errs.New(errs.Internal, "cuda: program buffer %d (%s) has invalid type %s", i, bf.Name, bf.Type)
		}
	}
	check := func(kind string, idx []int, vals []*graph.Value) error {
		if len(idx) != len(vals) {
			return errs.New(errs.Internal, "cuda: program maps %d %ss to buffers, graph %s has %d", len(idx), kind, p.Graph.Name, len(vals))
		}
		for i, bi := range idx {
			if bi < 0 || bi >= len(p.Buffers) || !p.Buffers[bi].Type.Equal(vals[i].Type) {
				return errs.New(errs.Internal, "cuda: graph %s %s %%%s (%s) maps to buffer %d of %d that does not match", p.Graph.Name, kind, vals[i].Name, vals[i].Type, bi, len(p.Buffers))
			}
		}
		return nil
	}
	if err := check("input", p.Inputs, p.Graph.Inputs); err != nil {
		return err
	}
	if err := check("output", p.Outputs, p.Graph.Outputs); err != nil {
		return err
	}
	for _, k := range p.Kernels {
		for i, pa := range k.Params {
			if pa.Buffer < 0 || pa.Buffer >= len(p.Buffers) {
				return errs.New(errs.Internal, "cuda: kernel %s param %d (%s) names buffer %d of %d", k.Name, i, pa.Name, pa.Buffer, len(p.Buffers))
			}
			bt := p.Buffers[pa.Buffer].Type
			if pa.DType != bt.DType || pa.Len < 0 || pa.Len > bt.NumElems() {
				return errs.New(errs.Internal, "cuda: kernel %s param %d (%s) is %s[%d] but buffer %d is %s", k.Name, i, pa.Name, pa.DType, pa.Len, pa.Buffer, bt)
			}
		}
	}
	return nil
}

// execution is one program bound to one device: loaded kernels and device buffers. All its
// methods run on the owner thread.
type execution struct {
	o    *owner
	p    *compiler.Program
	mods []*ptx.Module
	fns  []*kernelFn
	bufs []uint64 // device address per program buffer; 0 = not allocated
	// extra[i] holds kernel i's launcher-provided buffers (ptx.Module.Extra: FFT tables and
	// scratch), passed after its params; 0 = not allocated.
	extra [][]uint64
}

// prepare loads every kernel and allocates every buffer.
func (o *owner) prepare(p *compiler.Program, mods []*ptx.Module) (*execution, error) {
	e := &execution{o: o, p: p, mods: mods, bufs: make([]uint64, len(p.Buffers)), extra: make([][]uint64, len(mods))}
	for _, m := range mods {
		fn, err := o.function(m.PTX, m.Entry)
		if err != nil {
			return nil, err
		}
		e.fns = append(e.fns, fn)
	}
	for i, m := range mods {
		e.extra[i] = make([]uint64, len(m.Extra))
		for j, x := range m.Extra {
			ptr, err := o.mem.alloc(uint64(max(x.Bytes, 1)))
			e.extra[i][j] = ptr // 0 when the allocation failed; release skips it
			if err == nil && x.Data != nil {
				err = o.h2d(ptr, x.Data)
			}
			if err != nil {
				_ = e.release() // the allocation or upload error is the one to report
				return nil, errs.Wrap(errs.Internal, err, "%s: kernel %s: %s (%d bytes)", o.where(), m.Entry, x.Name, x.Bytes)
			}
		}
	}
	for i, bf := range p.Buffers {
		ptr, err := o.mem.alloc(bufBytes(bf))
		if err != nil {
			_ = e.release() // the allocation error is the one to report
			return nil, errs.Wrap(errs.Internal, err, "%s: buffer %d (%%%s %s)", o.where(), i, bf.Name, bf.Type)
		}
		e.bufs[i] = ptr
	}
	return e, nil
}

func bufBytes(bf compiler.Buffer) uint64 {
	return uint64(bf.Type.NumElems() * bf.Type.DType.Size())
}

// upload copies the graph inputs into their buffers.
func (e *execution) upload(inputs map[string]*tensor.Tensor) error {
	for i, v := range e.p.Graph.Inputs {
		if err := e.o.h2d(e.bufs[e.p.Inputs[i]], inputs[v.Name].Data); err != nil {
			return errs.Wrap(errs.Internal, err, "input %%%s", v.Name)
		}
	}
	return nil
}

// shapeOf is kernel i's launch shape.
func (e *execution) shapeOf(i int) shape {
	m := e.mods[i]
	return shape{Grid: m.Grid, Threads: m.Threads, Shared: m.SharedBytes}
}

// launchOne enqueues kernel i with its params bound to buffers.
func (e *execution) launchOne(i int) error {
	k := e.p.Kernels[i]
	args := make([]uint64, len(k.Params), len(k.Params)+len(e.extra[i]))
	for j, pa := range k.Params {
		args[j] = e.bufs[pa.Buffer]
	}
	args = append(args, e.extra[i]...)
	return e.o.launch(e.fns[i], e.shapeOf(i), args)
}

// runAll launches every kernel in order on the one stream. With syncEach it waits after each
// kernel, so an asynchronous fault (illegal address, ...) names the kernel that caused it;
// otherwise it synchronises once at the end and the fault names the launched kernels.
func (e *execution) runAll(syncEach bool) error {
	for i := range e.p.Kernels {
		if err := e.launchOne(i); err != nil {
			return err
		}
		if syncEach {
			if err := e.o.sync(fmt.Sprintf("kernel %s %s", e.mods[i].Entry, e.shapeOf(i))); err != nil {
				return err
			}
		}
	}
	if syncEach {
		return nil
	}
	return e.o.sync(e.kernelList() + " (asynchronous error; TESSERA_CUDA_SYNC=1 names the kernel)")
}

func (e *execution) kernelList() string {
	names := make([]string, len(e.mods))
	for i, m := range e.mods {
		names[i] = m.Entry + " " + e.shapeOf(i).String()
	}
	return "kernels [" + strings.Join(names, "; ") + "]"
}

// download copies every graph output into a fresh tensor.
func (e *execution) download() ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, len(e.p.Outputs))
	for i, bi := range e.p.Outputs {
		t := e.p.Buffers[bi].Type
		out[i] = tensor.New(t.DType, slices.Clone(t.Shape))
		if err := e.o.d2h(out[i].Data, e.bufs[bi]); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "output %%%s", e.p.Graph.Outputs[i].Name)
		}
	}
	return out, nil
}

// release returns every buffer to the allocator. After a sticky fault the memory is gone with
// the context anyway; it is still returned so the books balance.
func (e *execution) release() error {
	var first error
	for i, p := range e.bufs {
		if p != 0 {
			if err := e.o.mem.release(p); err != nil && first == nil {
				first = err
			}
			e.bufs[i] = 0
		}
	}
	for _, ex := range e.extra {
		for j, p := range ex {
			if p != 0 {
				if err := e.o.mem.release(p); err != nil && first == nil {
					first = err
				}
				ex[j] = 0
			}
		}
	}
	return first
}

// forget drops the execution's buffers without returning them: the planted leak
// failpoint.CUDABuffersKeptPerRun.
func (e *execution) forget() error {
	clear(e.bufs)
	for _, ex := range e.extra {
		clear(ex)
	}
	return nil
}
