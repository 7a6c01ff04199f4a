// Package cpu is the CPU backend: an interpreter of Tile IR that follows the IR's documented
// semantics literally (every result rounded to its instruction dtype, fixed accumulation
// order), so a tiling bug shows up in CI without a GPU. Grid points run on a static partition
// over goroutines; because grid points are independent, the bits do not depend on how many.
// A process may cap the memory its runs hold (memory.go: TESSERA_CPU_MEM_LIMIT, SetMemLimit);
// a run past the cap fails with E_OOM before it allocates.
package cpu

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func init() { backend.Register(&Backend{}) }

// Backend runs programs on this machine's cores. The zero value is ready to use.
type Backend struct {
	// Workers is the number of goroutines that run grid points; 0 means GOMAXPROCS at each Run.
	Workers int
	// ID tells instances of the backend apart (doctor names the CPU device "cpu:ID"); it
	// changes nothing in what runs, except under the failpoint CPUSDCBitFlipOneDevice.
	ID int
}

var (
	_ backend.Backend  = (*Backend)(nil)
	_ backend.Profiler = (*Backend)(nil)
)

// Name is "cpu".
func (*Backend) Name() string { return "cpu" }

// Available is always nil: a CPU is always there.
func (*Backend) Available() error { return nil }

// Device describes the host, e.g. "cpu linux/amd64 x2 (GOMAXPROCS 2)".
func (*Backend) Device() string {
	return fmt.Sprintf("cpu %s/%s x%d (GOMAXPROCS %d)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
}

// DeviceClass is "cpu/"+GOARCH plus what else changes bits on that architecture (see
// deviceClass). The backend's own arithmetic is written so that no platform contracts it into
// fused multiply-adds.
func (*Backend) DeviceClass() string { return deviceClass() }

func (b *Backend) workers() int {
	if b.Workers > 0 {
		return b.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Run checks inputs against the program's graph, runs every kernel in order and returns a
// fresh copy of each output buffer.
func (b *Backend) Run(p *compiler.Program, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return b.RunProfiled(p, inputs, nil)
}

// RunProfiled is Run reporting each kernel's wall clock and grid points to sink (nil: off).
func (b *Backend) RunProfiled(p *compiler.Program, inputs map[string]*tensor.Tensor, sink profile.Sink) ([]*tensor.Tensor, error) {
	if p == nil || p.Graph == nil {
		return nil, errs.New(errs.Input, "cpu: nil program or program without graph")
	}
	if err := graph.CheckInputs(p.Graph, inputs); err != nil {
		return nil, err
	}
	if err := checkProgram(p); err != nil {
		return nil, err
	}
	need := runBytes(p)
	if err := reserve(need, "run of graph "+p.Graph.Name); err != nil {
		return nil, err
	}
	defer unreserve(need)
	bufs := make([][]byte, len(p.Buffers))
	for i, bf := range p.Buffers {
		bufs[i] = make([]byte, bf.Type.NumElems()*bf.Type.DType.Size())
	}
	for i, v := range p.Graph.Inputs {
		copy(bufs[p.Inputs[i]], inputs[v.Name].Data)
	}
	if failpoint.Enabled(failpoint.CPUBuffersKeptPerRun) {
		keepBuffers(bufs)
	}
	ws := newWorkers(b.workers())
	defer releaseWorkers(ws)
	doubled := false
	for i, k := range p.Kernels {
		runs := 1
		if !doubled && failpoint.Enabled(failpoint.CPUMatmulKernelRunsTwice) && hasMMA(k.Body) {
			runs, doubled = 2, true // the first matmul kernel of the program does its work twice
		}
		var start time.Time
		if sink != nil {
			start = time.Now()
		}
		var points int64
		for range runs {
			n, err := runKernel(k, p.Buffers, bufs, ws)
			if err != nil {
				return nil, err
			}
			points += n
		}
		if sink != nil {
			sink.Launch(profile.Launch{Kernel: k.Name, Index: i, Grid: slices.Clone(k.Grid), Block: []int{min(len(ws), gridSize(k.Grid))},
				Start: start, Dur: time.Since(start), Points: points, Stream: "cpu"})
		}
		if failpoint.Enabled(failpoint.CPUSDCBitFlipOneDevice) && b.ID == failpoint.SDCDevice {
			flipOneBit(p, k, bufs)
		}
	}
	out := make([]*tensor.Tensor, len(p.Outputs))
	for i, bi := range p.Outputs {
		t := p.Buffers[bi].Type
		out[i] = &tensor.Tensor{DType: t.DType, Shape: slices.Clone(t.Shape), Data: slices.Clone(bufs[bi])}
	}
	return out, nil
}

// runBytes is what a run of p takes from the memory budget: its buffers and its output copies.
func runBytes(p *compiler.Program) int64 {
	var n int64
	for _, bf := range p.Buffers {
		n += int64(bf.Type.NumElems() * bf.Type.DType.Size())
	}
	for _, bi := range p.Outputs {
		n += int64(p.Buffers[bi].Type.NumElems() * p.Buffers[bi].Type.DType.Size())
	}
	return n
}

// kept holds the buffers of every run while the fault CPUBuffersKeptPerRun is on.
var (
	keptMu sync.Mutex
	kept   [][][]byte
)

func keepBuffers(bufs [][]byte) {
	keptMu.Lock()
	kept = append(kept, bufs)
	keptMu.Unlock()
}

// checkProgram verifies what Run relies on beyond the kernels: buffer types and the mapping of
// graph inputs and outputs to buffers.
func checkProgram(p *compiler.Program) error {
	for i, bf := range p.Buffers {
		if !bf.Type.DType.Valid() || slices.ContainsFunc(bf.Type.Shape, func(d int) bool { return d < 0 }) {
			return errs.New(errs.Internal, "cpu: program buffer %d (%s) has invalid type %s", i, bf.Name, bf.Type)
		}
	}
	check := func(kind string, idx []int, vals []*graph.Value) error {
		if len(idx) != len(vals) {
			return errs.New(errs.Internal, "cpu: program maps %d %ss to buffers, graph %s has %d", len(idx), kind, p.Graph.Name, len(vals))
		}
		for i, bi := range idx {
			if bi < 0 || bi >= len(p.Buffers) {
				return errs.New(errs.Internal, "cpu: graph %s %s %%%s maps to buffer %d of %d", p.Graph.Name, kind, vals[i].Name, bi, len(p.Buffers))
			}
			if !p.Buffers[bi].Type.Equal(vals[i].Type) {
				return errs.New(errs.Internal, "cpu: graph %s %s %%%s is %s but its buffer %d is %s", p.Graph.Name, kind, vals[i].Name, vals[i].Type, bi, p.Buffers[bi].Type)
			}
		}
		return nil
	}
	if err := check("input", p.Inputs, p.Graph.Inputs); err != nil {
		return err
	}
	return check("output", p.Outputs, p.Graph.Outputs)
}

// flipOneBit is the failpoint CPUSDCBitFlipOneDevice: the lowest bit of the middle element of
// k's first output, when p's schedule says k is a matmul kernel.
func flipOneBit(p *compiler.Program, k *tile.Kernel, bufs [][]byte) {
	if !slices.ContainsFunc(p.Schedules, func(s compiler.Schedule) bool { return s.Kernel == k.Name && s.Kind == "matmul" }) {
		return
	}
	for _, prm := range k.Params {
		if prm.Output && prm.Len > 0 {
			bufs[prm.Buffer][(prm.Len/2)*prm.DType.Size()] ^= 1
			return
		}
	}
}

// hasMMA reports whether a kernel body holds a tile matmul.
func hasMMA(body []tile.Instr) bool {
	for _, in := range body {
		switch x := in.(type) {
		case tile.MMA:
			return true
		case tile.For:
			if hasMMA(x.Body) {
				return true
			}
		}
	}
	return false
}

func gridSize(grid []int) int {
	n := 1
	for _, g := range grid {
		n *= g
	}
	return n
}
