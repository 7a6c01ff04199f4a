// Package ptx is Tessera's Target IR: it turns Tile IR kernels into PTX text that the CUDA
// backend loads with the driver (cuModuleLoadData / cuLink*), for NVIDIA GPUs of compute
// capability 9.0 (H100/H200) and up.
package ptx

import "strconv"

// Target selects the instruction set a module is generated for.
type Target struct {
	SM         int    // compute capability x10: 90 for sm_90
	ArchSuffix string // "" or "a" (sm_90a: wgmma, setmaxnreg)
	PTXVersion string // ".version" line, e.g. "8.0"
	// SIMTOnly keeps every instruction on the SIMT path, whose results are bit-identical to
	// the CPU backend's; otherwise MMAs on f16/bf16 tiles use tensor cores (mma.sync), which
	// add each group of 16 products in the hardware's own order (docs/ptx.md).
	SIMTOnly bool
	// SMs is the device's multiprocessor count, which sizes the grids of grid-stride kernels
	// (stream.go) whose results do not depend on the grid; 0 means the H100's 132.
	SMs int
}

// H100 is the default target: sm_90 with PTX ISA 8.0 (CUDA 12.0+ drivers accept it).
var H100 = Target{SM: 90, PTXVersion: "8.0", SMs: 132}

// Arch is the .target string, e.g. "sm_90" or "sm_90a".
func (t Target) Arch() string { return "sm_" + itoa(t.SM) + t.ArchSuffix }

// Module is one Tile IR kernel compiled to PTX, with everything a launcher needs.
//
// Launch contract: grid = (Grid[0], Grid[1], Grid[2]) CTAs of Threads threads each (1-D
// blocks), SharedBytes of dynamic shared memory (the launcher raises
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES when it exceeds 48 KiB), and one .u64 global
// pointer parameter per tile.Param of the kernel, in Kernel.Params order, then one per Extra. How Tile IR grid
// points map to CTAs is the generator's business: the SIMT and mma.sync paths launch a linear
// grid (prod(Kernel.Grid), 1, 1) and unfold %ctaid.x into the grid vars themselves; the
// dedicated matmul kernels launch (tiles of C, batch, 1).
type Module struct {
	PTX         string
	Entry       string // the .entry name to look up with cuModuleGetFunction
	Grid        [3]int
	Threads     int
	SharedBytes int
	Path        string // "simt", "mma.sync", "wgmma", "simt-rows", "simt-stream", "simt-reduce", "simt-transpose": which code path produced it
	// Tile names the tiling of a dedicated kernel (gemm_*.go), e.g. "wgmma 128x256x64
	// stages=4 wait=1", which may differ from the Tile IR's own tile (the schedule's BM/BN/BK):
	// the dedicated kernels compute the same function with the tile they support. Empty for
	// kernels that follow the Tile IR's tiling.
	Tile string
	// Extra are buffers the launcher allocates for the module beyond the kernel's params and
	// passes after them, one .u64 global pointer each, in order: read-only tables (Data, uploaded
	// before the first launch) and scratch (Data nil: contents undefined at launch, never read
	// before the kernel writes them).
	Extra []Extra
}

// Extra is one launcher-provided buffer of a module (Module.Extra).
type Extra struct {
	Name  string // what it holds, for messages: "fft twiddles n=64 f32", "fft scratch"
	Bytes int
	Data  []byte // len(Data) == Bytes for a table; nil for scratch
}

func itoa(n int) string { return strconv.Itoa(n) }
