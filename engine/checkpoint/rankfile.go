package checkpoint

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// State is what one rank saves and gets back.
type State struct {
	Step    int                       // the number of optimizer steps applied
	Tensors map[string]*tensor.Tensor // this rank's parameters and optimizer state ("param/w1", "adam/m/w1", ...)
	RNG     []uint64                  // RNG state words, opaque; an empty slice loads as nil
	Meta    map[string]string         // free-form (model name, dtype, ...); an empty map loads as nil
}

// metaEntry is the reserved .npz entry holding rankMeta; tensor names may not start with "__".
const metaEntry = "__checkpoint__"

// rankMeta is the JSON inside a rank file's metaEntry.
type rankMeta struct {
	Format  int               `json:"format"`
	Step    int               `json:"step"`
	Rank    int               `json:"rank"`
	World   int               `json:"world"`
	RNG     []uint64          `json:"rng,omitempty"`
	Meta    map[string]string `json:"meta,omitempty"`
	Tensors []tensorMeta      `json:"tensors"` // in the archive's order
}

type tensorMeta struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// checkState rejects what could be written but not read back bit for bit.
func checkState(st State) error {
	if st.Step < 0 {
		return errs.New(errs.Input, "negative step %d", st.Step)
	}
	for name, t := range st.Tensors {
		switch {
		case name == "" || strings.HasPrefix(name, "__"):
			return errs.New(errs.Input, "tensor name %q: empty or starting with \"__\" (reserved)", name)
		case t == nil:
			return errs.New(errs.Input, "tensor %q is nil", name)
		case !t.DType.Valid():
			return errs.New(errs.DType, "tensor %q: invalid dtype %s", name, t.DType)
		case len(t.Data) != tensor.NumElems(t.Shape)*t.DType.Size():
			return errs.New(errs.Input, "tensor %q: %d data bytes for %s", name, len(t.Data), t.TypeString())
		}
		if t.DType == numerics.Bool {
			if i := slices.IndexFunc(t.Data, func(b byte) bool { return b > 1 }); i >= 0 {
				return errs.New(errs.Input, "tensor %q: bool element %d is byte 0x%02x (want 0 or 1)", name, i, t.Data[i])
			}
		}
	}
	return nil
}

// writeRankFile writes st as an .npz: the tensors in name order, then metaEntry.
func writeRankFile(w io.Writer, st State, rank, world int) error {
	names := make([]string, 0, len(st.Tensors)+1)
	for name := range st.Tensors {
		names = append(names, name)
	}
	slices.Sort(names)
	meta := rankMeta{Format: FormatVersion, Step: st.Step, Rank: rank, World: world, RNG: st.RNG, Meta: st.Meta,
		Tensors: make([]tensorMeta, len(names))}
	ts := make([]*tensor.Tensor, 0, len(names)+1)
	for i, name := range names {
		t := st.Tensors[name]
		meta.Tensors[i] = tensorMeta{Name: name, DType: t.DType.String(), Shape: t.Shape}
		ts = append(ts, t)
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return errs.New(errs.Internal, "encode rank metadata: %v", err)
	}
	ts = append(ts, &tensor.Tensor{DType: numerics.I8, Shape: []int{len(js)}, Data: js})
	return tensor.WriteNPZ(w, append(names, metaEntry), ts)
}

// readRankFile parses a rank file's bytes and checks it against (step, rank, world). Errors
// are E_CHECKPOINT and say what is wrong, not which file (the caller adds that).
func readRankFile(data []byte, step, rank, world int) (State, error) {
	bad := func(format string, args ...any) (State, error) {
		return State{}, errs.New(errs.Checkpoint, format, args...)
	}
	arrays, err := tensor.ReadNPZ(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return bad("not a readable .npz: %v", err)
	}
	if len(arrays) == 0 || arrays[len(arrays)-1].Name != metaEntry {
		return bad("no %q entry last", metaEntry)
	}
	raw, err := arrays[len(arrays)-1].As(numerics.I8)
	if err != nil || len(raw.Shape) != 1 {
		return bad("entry %q is not a 1-d int8 array", metaEntry)
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Data))
	dec.DisallowUnknownFields()
	var meta rankMeta
	if err := dec.Decode(&meta); err != nil {
		return bad("entry %q: %v", metaEntry, err)
	}
	switch {
	case meta.Format != FormatVersion:
		return bad("format %d (this build reads %d)", meta.Format, FormatVersion)
	case meta.Step != step || meta.Rank != rank || meta.World != world:
		return bad("holds step %d rank %d of %d, the manifest says step %d rank %d of %d",
			meta.Step, meta.Rank, meta.World, step, rank, world)
	case len(meta.Tensors) != len(arrays)-1:
		return bad("%d tensors listed, %d stored", len(meta.Tensors), len(arrays)-1)
	}
	st := State{Step: meta.Step, Tensors: make(map[string]*tensor.Tensor, len(meta.Tensors)), RNG: meta.RNG, Meta: meta.Meta}
	for i, tm := range meta.Tensors {
		a := arrays[i]
		dt, err := numerics.Parse(tm.DType)
		if err != nil || a.Name != tm.Name {
			return bad("tensor %d: listed as %q %q, stored as %q", i, tm.Name, tm.DType, a.Name)
		}
		t, err := a.As(dt)
		if err != nil {
			return bad("tensor %q: %v", tm.Name, err)
		}
		if !slices.Equal(t.Shape, tm.Shape) {
			return bad("tensor %q: shape %v stored, %v listed", tm.Name, t.Shape, tm.Shape)
		}
		st.Tensors[tm.Name] = t
	}
	return st, nil
}
