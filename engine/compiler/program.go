package compiler

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Buffer is one array the program reads or writes: a graph input, output or intermediate.
type Buffer struct {
	Name string
	Type graph.Type
}

// Program is the compiler's result: the graph after graph-level rewrites, the chosen schedules,
// and Tile IR kernels over numbered buffers, run in order.
type Program struct {
	Graph     *graph.Graph // after rewrites (fusions); its inputs/outputs are the source graph's
	Buffers   []Buffer
	Inputs    []int // buffer index per graph input, in graph order
	Outputs   []int // buffer index per graph output, in graph order
	Schedules []Schedule
	Kernels   []*tile.Kernel
	// ScheduleHash identifies the chosen schedules (tile shapes, loop orders, placement):
	// two programs with the same hash run the same tile decomposition.
	ScheduleHash string
	// KernelNodes lists, per kernel, the output names of the Graph IR nodes (of Graph, after
	// fusion) the kernel computes, in graph order.
	KernelNodes [][]string
	// Log is the driver's record of the compilation when Options.Profile asked for one.
	Log *CompileLog
}
