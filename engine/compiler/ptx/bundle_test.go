package ptx

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
)

// The GPU bundle lets the generated kernels run on a GPU machine that has no Go: for every
// catalogue spec (with its catalogue inputs, and again with random bit patterns, which are
// full of NaN, Inf, subnormals and out-of-range values) it holds the PTX, the input bytes and
// the CPU backend's output bytes. testdata/gpucheck.py launches the kernels with CuPy and
// compares bit for bit. See docs/ptx.md.

type bundleKernel struct {
	PTX     string `json:"ptx"`
	Entry   string `json:"entry"`
	Grid    [3]int `json:"grid"`
	Threads int    `json:"threads"`
	Shared  int    `json:"shared"`
	Params  []int  `json:"params"` // buffer index per parameter
}

type bundleBuffer struct {
	Bytes int    `json:"bytes"`
	DType string `json:"dtype"`
}

type bundleCase struct {
	Name    string         `json:"name"`
	Data    string         `json:"data"` // stem of the .in and .out files
	Buffers []bundleBuffer `json:"buffers"`
	Inputs  []int          `json:"inputs"`  // buffer indices, in the order of the .in file
	Outputs []int          `json:"outputs"` // buffer indices, in the order of the .out file
	Kernels []bundleKernel `json:"kernels"`
}

// TestWriteGPUBundle writes the bundle to $TESSERA_PTX_BUNDLE (skips without it).
func TestWriteGPUBundle(t *testing.T) {
	dir := os.Getenv("TESSERA_PTX_BUNDLE")
	if dir == "" {
		t.Skip("TESSERA_PTX_BUNDLE not set: nothing to write")
	}
	if err := os.MkdirAll(filepath.Join(dir, "ptx"), 0o755); err != nil {
		t.Fatal(err)
	}
	var cases []bundleCase
	be := &cpu.Backend{}
	for _, s := range golden.Catalogue() {
		p, err := compiler.Compile(s.Graph, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(p.Kernels, holdsFFT) {
			continue // its tables and scratch are launcher buffers (Module.Extra), which the bundle has no field for; the cuda backend runs it
		}
		base := strings.NewReplacer("/", "__", ".", "_").Replace(s.Name)
		simt := H100
		simt.SIMTOnly = true
		kernels := writeBundleKernels(t, dir, base, p, simt)
		tensorKernels := writeBundleKernels(t, dir, base+"-tc", p, H100)
		inputs, err := s.Inputs()
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(s.Seed, 77))
		randomBits := map[string]*tensor.Tensor{}
		for name, in := range inputs {
			r := &tensor.Tensor{DType: in.DType, Shape: in.Shape, Data: make([]byte, len(in.Data))}
			for i := range r.Data {
				r.Data[i] = byte(rng.Uint32())
			}
			randomBits[name] = r
		}
		for vi, in := range []map[string]*tensor.Tensor{inputs, randomBits} {
			variant := []string{"catalogue", "randombits"}[vi]
			outs, err := be.Run(p, in)
			if err != nil {
				t.Fatalf("%s %s: cpu: %v", s.Name, variant, err)
			}
			c := bundleCase{Name: s.Name + "@" + variant, Data: "data/" + base + "@" + variant, Inputs: p.Inputs, Outputs: p.Outputs, Kernels: kernels}
			for _, b := range p.Buffers {
				c.Buffers = append(c.Buffers, bundleBuffer{Bytes: b.Type.NumElems() * b.Type.DType.Size(), DType: b.Type.DType.String()})
			}
			var inBytes, outBytes []byte
			for _, v := range p.Graph.Inputs {
				inBytes = append(inBytes, in[v.Name].Data...)
			}
			for _, o := range outs {
				outBytes = append(outBytes, o.Data...)
			}
			stem := filepath.Join(dir, "data", base+"@"+variant)
			if err := os.MkdirAll(filepath.Dir(stem), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(stem+".in", inBytes, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(stem+".out", outBytes, 0o644); err != nil {
				t.Fatal(err)
			}
			cases = append(cases, c)
			if tensorKernels != nil {
				tc := c
				tc.Name, tc.Kernels = s.Name+"@"+variant+"-tensorcores", tensorKernels
				cases = append(cases, tc)
			}
		}
	}
	js, err := json.MarshalIndent(cases, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d cases to %s", len(cases), dir)
}

// writeBundleKernels writes the program's PTX for target t; with the default target it
// returns nil unless some kernel took a path other than SIMT.
func writeBundleKernels(t *testing.T, dir, base string, p *compiler.Program, target Target) []bundleKernel {
	var kernels []bundleKernel
	other := false
	for _, k := range p.Kernels {
		m, err := Generate(k, target)
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		other = other || m.Path != "simt"
		file := base + "." + k.Name + ".ptx"
		if err := os.WriteFile(filepath.Join(dir, "ptx", file), []byte(m.PTX), 0o644); err != nil {
			t.Fatal(err)
		}
		bk := bundleKernel{PTX: "ptx/" + file, Entry: m.Entry, Grid: m.Grid, Threads: m.Threads, Shared: m.SharedBytes}
		for _, prm := range k.Params {
			bk.Params = append(bk.Params, prm.Buffer)
		}
		kernels = append(kernels, bk)
	}
	if !target.SIMTOnly && !other && !strings.Contains(base, "bench") && os.Getenv("TESSERA_PTX_BENCH") == "" {
		for _, k := range p.Kernels {
			os.Remove(filepath.Join(dir, "ptx", base+"."+k.Name+".ptx"))
		}
		return nil
	}
	return kernels
}

func holdsFFT(k *tile.Kernel) bool {
	found := false
	walk(k.Body, func(in tile.Instr) {
		_, ok := in.(tile.FFT)
		found = found || ok
	})
	return found
}
