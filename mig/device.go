package mig

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/tessera-qa/tessera-qa/mig/green"
)

// MIG modes as reported.
const (
	ModeEnabled     = "enabled"
	ModeDisabled    = "disabled"
	ModeUnsupported = "unsupported" // the GPU has no MIG
	ModeUnknown     = "unknown"     // nvidia-smi -L does not say; a GPU listed with MIG devices is enabled
)

// GPU is one physical GPU.
type GPU struct {
	Index       int         `json:"index"`
	Name        string      `json:"name"`
	UUID        string      `json:"uuid"`
	MIGMode     string      `json:"mig_mode"`
	SMs         int         `json:"sms,omitempty"`          // 0: unknown
	MemoryBytes uint64      `json:"memory_bytes,omitempty"` // 0: unknown
	Partitions  []Partition `json:"partitions,omitempty"`
}

// Partition is one MIG device of a GPU.
type Partition struct {
	// Device is the MIG device's index within its GPU ("Device  0" in nvidia-smi -L).
	Device  int    `json:"device"`
	Profile string `json:"profile"` // "3g.40gb", or with a compute instance "1c.3g.40gb"
	UUID    string `json:"uuid"`
	// GPUInstance and ComputeInstance are the instance ids (-1: unknown, as from nvidia-smi).
	GPUInstance     int    `json:"gpu_instance"`
	ComputeInstance int    `json:"compute_instance"`
	SMs             int    `json:"sms,omitempty"`
	MemoryBytes     uint64 `json:"memory_bytes,omitempty"`
}

// Slices is the number of GPU slices of the partition's profile ("3g.40gb": 3), 0 when the
// profile does not name them.
func (p Partition) Slices() int {
	m := profileRE.FindStringSubmatch(p.Profile)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[2])
	return n
}

// profileRE matches MIG profile names: [Nc.]Ng.MMgb with optional suffixes (+me, -me, +gfx).
var profileRE = regexp.MustCompile(`^(?:(\d+)c\.)?(\d+)g\.(\d+)gb(?:[+-][a-z]+)*$`)

// Target is what a job can be placed on: a whole GPU, one MIG partition of it, or (MIG off) an
// SM partition made with a green context.
type Target struct {
	Kind        string `json:"kind"` // "gpu", "mig" or "sm"
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	GPU         int    `json:"gpu"`
	Profile     string `json:"profile,omitempty"`
	MIGMode     string `json:"mig_mode"`
	SMs         int    `json:"sms,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	// Visible is the CUDA_VISIBLE_DEVICES value that gives a process exactly this target.
	Visible string `json:"cuda_visible_devices"`
	// SM partitions: Env places a process's CUDA backend on a green context of SMs SMs
	// (TESSERA_CUDA_SMS), Count is how many such partitions the GPU's SMs make. Memory is
	// shared with the rest of the GPU, so MemoryBytes is left out.
	Env   string `json:"env,omitempty"`
	Count int    `json:"count,omitempty"`
}

// SMPartitionWays are the SM partition plans listed for a GPU without MIG: halves and quarters
// (2 x 64 and 4 x 32 SMs on an H100, design.md §10).
var SMPartitionWays = []int{2, 4}

// Targets lists the devices jobs can be placed on: each MIG partition of a GPU with MIG
// enabled, else the GPU itself. A GPU in MIG mode with no partitions has no target (CUDA sees
// no device there).
func Targets(gpus []GPU) []Target {
	var out []Target
	for _, g := range gpus {
		if len(g.Partitions) == 0 {
			if g.MIGMode == ModeEnabled {
				continue
			}
			out = append(out, Target{Kind: "gpu", Name: g.Name, UUID: g.UUID, GPU: g.Index, MIGMode: g.MIGMode,
				SMs: g.SMs, MemoryBytes: g.MemoryBytes, Visible: g.UUID})
			out = append(out, smTargets(g)...)
			continue
		}
		for _, p := range g.Partitions {
			out = append(out, Target{Kind: "mig", Name: fmt.Sprintf("MIG %s on %s", p.Profile, g.Name), UUID: p.UUID,
				GPU: g.Index, Profile: p.Profile, MIGMode: g.MIGMode, SMs: p.SMs, MemoryBytes: p.MemoryBytes, Visible: p.UUID})
		}
	}
	return out
}

// smTargets lists the SM partitions of g (none when its SM count is unknown). A green context
// splits the SMs of one process's context: two processes placed on partitions of the same size
// are not given disjoint SMs (without MPS their kernels time-slice), so SM isolation holds
// between partitions of one process.
func smTargets(g GPU) []Target {
	var out []Target
	for _, n := range SMPartitionWays {
		size, err := green.Plan(g.SMs, n, 0)
		if err != nil { // an unknown SM count (0) plans nothing
			continue
		}
		out = append(out, Target{Kind: "sm", Name: fmt.Sprintf("%d-SM partition of %s", size, g.Name), UUID: g.UUID, GPU: g.Index,
			MIGMode: g.MIGMode, SMs: size, Visible: g.UUID, Env: fmt.Sprintf("TESSERA_CUDA_SMS=%d", size), Count: n})
	}
	return out
}
