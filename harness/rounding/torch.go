package rounding

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// torchScript converts little-endian f32 values from stdin to f16 and bf16 with torch and writes
// both as little-endian u16 patterns: torch rounds f32 to nearest even with IEEE overflow to
// Inf, as docs/numerics.md does. (From f64, torch's CPU half conversion goes through f32 first,
// a double rounding our rules refuse, and torch 1.13 has no fp8: those are checked against the
// Go encoder alone.)
const torchScript = `
import sys, numpy as np, torch
x = torch.from_numpy(np.frombuffer(sys.stdin.buffer.read(), dtype='<f4').copy())
for d in (torch.float16, torch.bfloat16):
    sys.stdout.buffer.write(x.to(d).view(torch.int16).numpy().astype('<u2').tobytes())
`

// Python is the interpreter with torch: $TESSERA_QA_PYTHON, else /usr/bin/python3 (where
// Debian's python3-torch installs), else python3 on PATH.
func Python() string {
	if p := os.Getenv("TESSERA_QA_PYTHON"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// TorchAvailable says why the torch cross-check cannot run here ("" when it can).
func TorchAvailable() string {
	out, err := exec.Command(Python(), "-c", "import torch, numpy").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("no torch under %s: %v %s", Python(), err, strings.TrimSpace(string(out)))
	}
	return ""
}

// CrossCheckTorch converts Inputs(f32, f16) and Inputs(f32, bf16) with torch and with this
// package's encoder and reports where they differ. NaN inputs only need a NaN back (torch keeps
// payloads and signs; our rule drops them, which the engine routes check).
func CrossCheckTorch() error {
	for _, d := range []numerics.DType{numerics.F16, numerics.BF16} {
		f, _ := FormatOf(d)
		xs := Inputs(numerics.F32, d)
		var in bytes.Buffer
		for _, x := range xs {
			binary.Write(&in, binary.LittleEndian, math.Float32bits(float32(x))) //nolint:errcheck // a bytes.Buffer
		}
		cmd := exec.Command(Python(), "-c", torchScript)
		cmd.Stdin = &in
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("torch: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		if len(out) != 4*len(xs) {
			return fmt.Errorf("torch returned %d bytes for %d values", len(out), len(xs))
		}
		off := 0
		if d == numerics.BF16 {
			off = 2 * len(xs)
		}
		bad, first := 0, ""
		for i, x := range xs {
			got := uint64(binary.LittleEndian.Uint16(out[off+2*i:]))
			want := f.Encode(x)
			if x != x {
				if !math.IsNaN(f.Decode(got)) {
					bad++
				}
				continue
			}
			if got != want {
				if bad == 0 {
					first = fmt.Sprintf("%v (f32 %#08x): torch %#04x, ours %#04x", x, math.Float32bits(float32(x)), got, want)
				}
				bad++
			}
		}
		if bad > 0 {
			return fmt.Errorf("f32 -> %s: torch and the independent encoder differ on %d of %d inputs; first %s", d, bad, len(xs), first)
		}
	}
	return nil
}
