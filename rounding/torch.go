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

// oracleScript converts little-endian f32 values from stdin with each library conversion
// that is installed, and writes for each of the pairs below one byte (1: converted, 0: not
// available) followed by the patterns (u16 or u8, little-endian). All round f32 to nearest
// even. From f64, torch's CPU half conversion goes through f32 first (a double rounding our
// rules refuse), so only f32 sources are sent; torch >= 2.1 and ml_dtypes (JAX's dtypes) have
// fp8, which overflow to NaN (e4m3fn) or Inf (e5m2) where we saturate, so fp8 is compared up
// to the largest finite value only.
const oracleScript = `
import sys
import numpy as np
x = np.frombuffer(sys.stdin.buffer.read(), dtype='<f4').copy()
out = sys.stdout.buffer
def emit(fn):
    try:
        b = fn()
    except Exception:
        out.write(b'\x00')
        return
    out.write(b'\x01')
    out.write(b)
def torch_to(name, width):
    import torch
    d = getattr(torch, name)
    y = torch.from_numpy(x).to(d)
    if width == 2:
        return y.view(torch.int16).numpy().astype('<u2').tobytes()
    return y.view(torch.uint8).numpy().tobytes()
def mld_to(name, width):
    import ml_dtypes
    y = x.astype(getattr(ml_dtypes, name)) if name != 'float16' else x.astype(np.float16)
    return y.view('<u2' if width == 2 else 'u1').tobytes()
emit(lambda: torch_to('float16', 2))
emit(lambda: torch_to('bfloat16', 2))
emit(lambda: torch_to('float8_e4m3fn', 1))
emit(lambda: torch_to('float8_e5m2', 1))
emit(lambda: mld_to('float16', 2))
emit(lambda: mld_to('bfloat16', 2))
emit(lambda: mld_to('float8_e4m3fn', 1))
emit(lambda: mld_to('float8_e5m2', 1))
`

// oracleConversions are the conversions oracleScript tries, in its order.
var oracleConversions = []struct {
	lib string
	dst numerics.DType
}{
	{"torch", numerics.F16}, {"torch", numerics.BF16}, {"torch", numerics.F8E4M3}, {"torch", numerics.F8E5M2},
	{"ml_dtypes", numerics.F16}, {"ml_dtypes", numerics.BF16}, {"ml_dtypes", numerics.F8E4M3}, {"ml_dtypes", numerics.F8E5M2},
}

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

// TorchAvailable says why the cross-check cannot run here ("" when it can): it needs numpy
// and torch (ml_dtypes is used when present).
func TorchAvailable() string {
	out, err := exec.Command(Python(), "-c", "import torch, numpy").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("no torch under %s: %v %s", Python(), err, strings.TrimSpace(string(out)))
	}
	return ""
}

// CrossCheckTorch converts, for each narrow float d, Inputs(f32, d) with every library
// conversion installed (torch; ml_dtypes, which JAX uses; fp8 where the library has it) and
// with this package's encoder, and reports where they differ. It returns the conversions it
// compared. NaN inputs only need a NaN back (the libraries keep payloads and signs; our rule
// drops them, which the engine routes check); fp8 is compared where |x| does not exceed the
// largest finite value (the libraries do not saturate).
func CrossCheckTorch() ([]string, error) {
	// One interpreter for everything: the inputs of every format, converted to every format.
	var xs []float64
	seg := map[numerics.DType][2]int{}
	for _, d := range Narrow {
		in := Inputs(numerics.F32, d)
		seg[d] = [2]int{len(xs), len(xs) + len(in)}
		xs = append(xs, in...)
	}
	var in bytes.Buffer
	for _, x := range xs {
		binary.Write(&in, binary.LittleEndian, math.Float32bits(float32(x))) //nolint:errcheck // a bytes.Buffer
	}
	cmd := exec.Command(Python(), "-c", oracleScript)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("python: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var compared []string
	for _, conv := range oracleConversions {
		if len(out) == 0 {
			return compared, fmt.Errorf("the oracle script stopped early")
		}
		ok := out[0] == 1
		out = out[1:]
		if !ok {
			continue
		}
		width := conv.dst.Size()
		if len(out) < width*len(xs) {
			return compared, fmt.Errorf("%s %s: %d bytes for %d values", conv.lib, conv.dst, len(out), len(xs))
		}
		data := out[:width*len(xs)]
		out = out[width*len(xs):]
		f, _ := FormatOf(conv.dst)
		bad, first := 0, ""
		for i := seg[conv.dst][0]; i < seg[conv.dst][1]; i++ {
			x := xs[i]
			var got uint64
			if width == 2 {
				got = uint64(binary.LittleEndian.Uint16(data[2*i:]))
			} else {
				got = uint64(data[i])
			}
			switch {
			case x != x:
				if !math.IsNaN(f.Decode(got)) {
					bad++
				}
				continue
			case f.Saturate && math.Abs(x) > f.MaxFinite():
				continue
			}
			if want := f.Encode(x); got != want {
				if bad == 0 {
					first = fmt.Sprintf("%v (f32 %#08x): %s %#x, ours %#x", x, math.Float32bits(float32(x)), conv.lib, got, want)
				}
				bad++
			}
		}
		if bad > 0 {
			return compared, fmt.Errorf("f32 -> %s: %s and the independent encoder differ on %d of %d inputs; first %s",
				conv.dst, conv.lib, bad, seg[conv.dst][1]-seg[conv.dst][0], first)
		}
		compared = append(compared, conv.lib+" f32->"+conv.dst.String())
	}
	return compared, nil
}
