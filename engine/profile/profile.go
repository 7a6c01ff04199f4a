// Package profile is the engine's one hook for profilers: a backend that is handed a Sink
// reports every kernel launch and every host<->device copy of a run to it. The engine knows
// nothing of what a profiler does with them (the harness's package profiling writes traces
// and summaries); a nil Sink means profiling is off and costs one nil check per kernel.
package profile

import "time"

// Launch is one kernel launch as the backend saw it.
type Launch struct {
	// Kernel is the kernel's name in the program (k0, k1, ...); Index its position.
	Kernel string
	Index  int
	// Grid and Block are the launch shape: the Tile IR grid, and the threads per block (the
	// CPU backend reports its worker goroutines as the block).
	Grid, Block []int
	// Start and Dur: wall clock on the CPU; on CUDA, Start is the host time of the launch
	// call and Dur the time between CUDA events recorded around it on the launching stream.
	Start time.Time
	Dur   time.Duration
	// Points is the number of grid points the backend ran (0 when it cannot count them, as
	// on a GPU): a kernel that ran its grid twice shows 2x its grid here.
	Points int64
	// Stream names the queue the kernel ran on ("cpu", "stream0").
	Stream string
	// Attrs are backend facts about the compiled kernel: on CUDA registers per thread,
	// static shared and local (spill) bytes, max threads per block, theoretical active
	// blocks per SM. Nil when the backend has none.
	Attrs map[string]int64
}

// Copy is one host<->device transfer ("h2d", "d2h").
type Copy struct {
	Dir   string
	Bytes int64
	Start time.Time
	Dur   time.Duration
}

// Collective is one collective a rank took part in (distributed runs, engine/dist/run).
type Collective struct {
	Op    string // all_reduce, all_gather, ...
	Bytes int64  // this rank's input bytes
	Peers int    // the other ranks of its group
	Mode  string // deterministic, exact, fast
	Start time.Time
	Dur   time.Duration
	// Wait is the part of Dur the rank spent blocked waiting for a peer's frames (its peers
	// were late), as opposed to moving and reducing bytes (dist.Comm.Waited).
	Wait time.Duration
}

// Sink receives a run's records. Calls come from the goroutine that runs the program, in
// launch order; a Sink used by concurrent runs must lock.
type Sink interface {
	Launch(Launch)
	Copy(Copy)
	Collective(Collective)
}
