package differential

import (
	"slices"
	"strconv"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Protocol is the version of the oracle line protocol (docs/differential.md) that the embedded
// scripts speak. Version 2 added gradient cases (WireCase.Grad); a case without Grad is a
// version-1 case and is answered as before.
const Protocol = 2

// MinProtocol is the oldest protocol an oracle's hello may carry: a version-1 oracle still
// answers forward cases, and a gradient case sent to it is E_UNSUPPORTED.
const MinProtocol = 1

// WireUint8 is the one wire dtype that is not an engine dtype: fp8 bit patterns moved by
// movement ops travel as bytes, which every framework copies exactly.
const WireUint8 = "uint8"

// Hello is the oracle's first line: what it runs on, or why it cannot run.
type Hello struct {
	Type      string   `json:"type"`
	Protocol  int      `json:"protocol"`
	Framework string   `json:"framework"`
	Version   string   `json:"version,omitempty"`
	Python    string   `json:"python,omitempty"`
	Devices   []string `json:"devices,omitempty"`
	Float8    bool     `json:"float8,omitempty"`
	// CUDADevice names the GPU the framework sees ("" without one).
	CUDADevice string `json:"cuda_device,omitempty"`
	// Error is set when the framework cannot be imported; the oracle exits after saying so.
	Error string `json:"error,omitempty"`
}

// HasDevice reports whether the oracle can compute on device ("cpu", "cuda").
func (h Hello) HasDevice(device string) bool { return slices.Contains(h.Devices, device) }

// WireTensor is a tensor on the wire: dtype and shape explicit, data the little-endian element
// bytes (base64 in JSON). 16-bit floats travel as bit patterns, bool as one 0/1 byte.
type WireTensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Data  []byte `json:"data"`
}

// WireNode is one graph node: the op, its input and output value names, the declared output
// type and every attribute the op declares, defaults filled in (an optional attribute with no
// default and no value is absent). Attribute values are JSON numbers, booleans, strings, int
// lists, and dtype names for dtype attributes.
type WireNode struct {
	Op     string         `json:"op"`
	Inputs []string       `json:"inputs"`
	Output string         `json:"output"`
	DType  string         `json:"dtype"`
	Shape  []int          `json:"shape"`
	Attrs  map[string]any `json:"attrs"`
}

// WireCase is one graph with its inputs. The oracle evaluates the nodes in order, each rounded
// to its declared dtype, and returns the named outputs.
type WireCase struct {
	Name    string       `json:"name"`
	Inputs  []WireTensor `json:"inputs"`
	Nodes   []WireNode   `json:"nodes"`
	Outputs []string     `json:"outputs"`
	// Grad, when set, asks for a vector-Jacobian product as well (protocol 2).
	Grad *WireGrad `json:"grad,omitempty"`
}

// WireGrad turns a case into a gradient case: the oracle evaluates the graph with the WRT
// inputs as leaves of its autodiff and returns, beside the outputs, the gradient of
// sum_i <Cotangents[i], output i> with respect to each WRT input, in that input's dtype.
// Cotangents has one tensor per output, named after it, with its dtype and shape. Without
// Target.Native the oracle computes in f64 (inputs and cotangents upcast, every node in f64,
// results rounded once to their dtypes); with it, in the inputs' dtypes with the framework's
// own kernels (WireResult.Mode says which).
type WireGrad struct {
	WRT        []string     `json:"wrt"`
	Cotangents []WireTensor `json:"cotangents"`
}

// request is one line to the oracle.
type request struct {
	Type   string     `json:"type"` // "eval" or "quit"
	ID     int64      `json:"id,omitempty"`
	Device string     `json:"device,omitempty"`
	Native bool       `json:"native,omitempty"`
	Cases  []WireCase `json:"cases,omitempty"`
}

// response is one line from the oracle after the hello.
type response struct {
	Type    string       `json:"type"` // "result" or "error"
	ID      *int64       `json:"id"`
	Results []WireResult `json:"results"`
	Error   string       `json:"error"`
}

// WireResult is the oracle's answer for one case: outputs, or an error. Unsupported marks an
// op/dtype the framework cannot compute (reported per case, never dropped). Mode says how the
// outputs were computed when not natively ("f32, rounded once (...)", "emulated: ...").
//
// A gradient case's answer also has Grads, one per WireGrad.WRT input in that order, and
// Unused, the WRT inputs no gradient reaches (no output depends on them, or torch's autograd
// finds only paths without a gradient); their gradients are zeros, and Mode names them.
type WireResult struct {
	Name        string       `json:"name"`
	Outputs     []WireTensor `json:"outputs"`
	Grads       []WireTensor `json:"grads,omitempty"`
	Unused      []string     `json:"unused,omitempty"`
	Mode        string       `json:"mode"`
	Error       string       `json:"error"`
	Unsupported bool         `json:"unsupported"`
}

// WireOf puts a tensor on the wire under its engine dtype name.
func WireOf(name string, t *tensor.Tensor) WireTensor {
	// A scalar's shape must be [] on the wire, never null.
	return WireTensor{Name: name, DType: t.DType.String(), Shape: append([]int{}, t.Shape...), Data: t.Data}
}

// FromWire checks a wire tensor against the dtype and shape expected and returns it as an
// engine tensor of that dtype.
func FromWire(w WireTensor, dt numerics.DType, shape []int) (*tensor.Tensor, error) {
	data, err := wireData(w, dt.String(), shape, dt.Size())
	if err != nil {
		return nil, err
	}
	return &tensor.Tensor{DType: dt, Shape: slices.Clone(shape), Data: data}, nil
}

// wireData checks a wire tensor's dtype name, shape and byte count and returns its bytes.
func wireData(w WireTensor, dtype string, shape []int, elemSize int) ([]byte, error) {
	if w.DType != dtype || !slices.Equal(w.Shape, shape) {
		return nil, errs.New(errs.Input, "oracle output %%%s is %s, want %s", w.Name, wireType(w.DType, w.Shape), wireType(dtype, shape))
	}
	if need := tensor.NumElems(shape) * elemSize; len(w.Data) != need {
		return nil, errs.New(errs.Input, "oracle output %%%s (%s) holds %d bytes, needs %d", w.Name, wireType(w.DType, w.Shape), len(w.Data), need)
	}
	return w.Data, nil
}

func wireType(dtype string, shape []int) string {
	s := dtype + "["
	for i, d := range shape {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(d)
	}
	return s + "]"
}
