package golden

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// The golden file format (docs/golden.md):
//
//	tessera-golden v1 sha256:<64 hex digits>\n   magic, format version, checksum
//	<header JSON>\n                              generator, engine, op, dtype, cases, content_bytes
//	<content>                                    content_bytes bytes
//
// The checksum is the SHA-256 of everything after the first line (header line and content),
// so an edit anywhere but the first line is a checksum mismatch, and an edit of the first line
// breaks the magic, the version or the checksum itself.
//
// content is one line of meta JSON (names, seeds, graph texts, dists, tolerances, and for each
// tensor its dtype, shape and place in the blob), a '\n', then the blob: every tensor's raw
// little-endian bytes, back to back, in the order the meta lists them.
//
// A multi-rank case (a collective op's graph, which has a mesh line) adds "world" and "ranks":
// ranks[r] holds rank r's inputs and outputs in the same form, and the case's own "inputs" and
// "outputs" are empty. Single-device cases omit both fields, so their bytes are unchanged.
const (
	// FormatVersion is the layout version this build reads and writes.
	FormatVersion = 1
	// GeneratorVersion names how cases are turned into files: bump it when input drawing,
	// tolerances rules or the case layout change, so every file reads as stale.
	GeneratorVersion = "tessera-golden-gen/1"

	magic = "tessera-golden "
	// maxLineBytes bounds the first two lines so a hostile file cannot make us scan far.
	maxLineBytes = 4096
)

// header is the second line of a golden file.
type header struct {
	Generator    string `json:"generator"`
	Engine       string `json:"engine"`
	Op           string `json:"op"`
	DType        string `json:"dtype"`
	Cases        int    `json:"cases"`
	ContentBytes int    `json:"content_bytes"`
}

type metaDoc struct {
	Cases []metaCase `json:"cases"`
}

type metaCase struct {
	Name       string                  `json:"name"`
	Seed       uint64                  `json:"seed,string"`
	Graph      string                  `json:"graph"`
	Dists      map[string]harness.Dist `json:"dists"`
	Tolerances []harness.Tolerance     `json:"tolerances"`
	Inputs     []metaTensor            `json:"inputs"`
	Outputs    []metaTensor            `json:"outputs"`
	// World and Ranks are set for multi-rank cases only (omitted otherwise).
	World int        `json:"world,omitempty"`
	Ranks []metaRank `json:"ranks,omitempty"`
}

// metaRank is one rank's tensors in a multi-rank case.
type metaRank struct {
	Inputs  []metaTensor `json:"inputs"`
	Outputs []metaTensor `json:"outputs"`
}

type metaTensor struct {
	Name   string `json:"name"`
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Offset int    `json:"offset"`
	Bytes  int    `json:"bytes"`
}

// File is one decoded golden file: every case of one (op, dtype).
type File struct {
	Path      string // inside the data directory: "matmul/bf16.golden"
	Format    int
	Generator string
	Engine    string // engine version that generated it (informative)
	Op        string
	DType     numerics.DType
	Cases     []GoldenCase
}

// GoldenCase is one case as stored: the graph, its inputs, the golden model's outputs at
// generation time and the tolerances to judge an engine by.
type GoldenCase struct {
	File       string // display path of the file it came from
	Name       string
	Op         string
	DType      numerics.DType
	Seed       uint64
	GraphText  string
	Graph      *graph.Graph
	Dists      map[string]harness.Dist
	Inputs     map[string]*tensor.Tensor
	Want       []*tensor.Tensor // one per graph output
	Tolerances []harness.Tolerance
	// World > 0 marks a multi-rank case (a graph with a mesh, run on every rank of it): then
	// RankInputs[r] and RankWant[r] are rank r's inputs and expected outputs, and Inputs and
	// Want are nil. Single-device cases have World 0.
	World      int
	RankInputs []map[string]*tensor.Tensor
	RankWant   [][]*tensor.Tensor
}

// Encode renders f in the golden file format. The bytes depend only on f: JSON with fixed field order and sorted map
// keys, no timestamps, so regenerating unchanged cases rewrites identical files.
func Encode(f *File) ([]byte, error) {
	var blob bytes.Buffer
	doc := metaDoc{Cases: make([]metaCase, 0, len(f.Cases))}
	put := func(name string, t *tensor.Tensor) metaTensor {
		m := metaTensor{Name: name, DType: t.DType.String(), Shape: slices.Clone(t.Shape), Offset: blob.Len(), Bytes: len(t.Data)}
		if m.Shape == nil {
			m.Shape = []int{}
		}
		blob.Write(t.Data)
		return m
	}
	// tensors lists one rank's (or the single device's) inputs and outputs in graph order.
	tensors := func(c GoldenCase, in map[string]*tensor.Tensor, want []*tensor.Tensor) (ins, outs []metaTensor, err error) {
		ins, outs = []metaTensor{}, []metaTensor{}
		for _, v := range c.Graph.Inputs {
			t, ok := in[v.Name]
			if !ok {
				return nil, nil, errs.New(errs.Internal, "golden: case %s has no input %%%s", c.Name, v.Name)
			}
			ins = append(ins, put(v.Name, t))
		}
		if len(want) != len(c.Graph.Outputs) {
			return nil, nil, errs.New(errs.Internal, "golden: case %s has %d outputs for %d graph outputs", c.Name, len(want), len(c.Graph.Outputs))
		}
		for i, v := range c.Graph.Outputs {
			outs = append(outs, put(v.Name, want[i]))
		}
		return ins, outs, nil
	}
	for _, c := range f.Cases {
		mc := metaCase{Name: c.Name, Seed: c.Seed, Graph: c.GraphText, Dists: c.Dists, Tolerances: c.Tolerances}
		if mc.Dists == nil {
			mc.Dists = map[string]harness.Dist{}
		}
		var err error
		if c.World == 0 {
			if mc.Inputs, mc.Outputs, err = tensors(c, c.Inputs, c.Want); err != nil {
				return nil, err
			}
		} else {
			if len(c.RankInputs) != c.World || len(c.RankWant) != c.World {
				return nil, errs.New(errs.Internal, "golden: case %s on %d ranks has inputs for %d and outputs for %d", c.Name, c.World, len(c.RankInputs), len(c.RankWant))
			}
			mc.Inputs, mc.Outputs, mc.World = []metaTensor{}, []metaTensor{}, c.World
			for r := range c.World {
				var mr metaRank
				if mr.Inputs, mr.Outputs, err = tensors(c, c.RankInputs[r], c.RankWant[r]); err != nil {
					return nil, errs.Wrap(errs.Internal, err, "rank %d", r)
				}
				mc.Ranks = append(mc.Ranks, mr)
			}
		}
		doc.Cases = append(doc.Cases, mc)
	}
	meta, err := json.Marshal(doc)
	if err != nil {
		return nil, errs.New(errs.Internal, "golden: encode %s: %v", f.Path, err)
	}
	content := slices.Concat(meta, []byte{'\n'}, blob.Bytes())
	hb, err := json.Marshal(header{Generator: f.Generator, Engine: f.Engine, Op: f.Op,
		DType: f.DType.String(), Cases: len(f.Cases), ContentBytes: len(content)})
	if err != nil {
		return nil, errs.New(errs.Internal, "golden: encode %s: %v", f.Path, err)
	}
	body := slices.Concat(hb, []byte{'\n'}, content)
	sum := sha256.Sum256(body)
	first := fmt.Sprintf("%sv%d sha256:%s\n", magic, FormatVersion, hex.EncodeToString(sum[:]))
	return slices.Concat([]byte(first), body), nil
}

// problemKind classifies why a file cannot be read; Verify reports it, Load wraps it.
type problemKind string

const (
	kindFormat   problemKind = "format"   // not a golden file, or an unknown format version
	kindChecksum problemKind = "checksum" // content does not match its checksum
	kindCorrupt  problemKind = "corrupt"  // checksum fine but the content does not decode
	kindStale    problemKind = "stale"    // decodes, but differs from the catalogue
	kindMissing  problemKind = "missing"  // the catalogue has cases and no file exists
	kindExtra    problemKind = "extra"    // a file the catalogue does not produce
	kindRead     problemKind = "read"     // the file system refused
)

// decodeError is a decode failure with its kind, so Verify can report checksum mismatches and
// format versions distinctly.
type decodeError struct {
	kind problemKind
	msg  string
}

func (e *decodeError) Error() string { return e.msg }

func derr(kind problemKind, format string, args ...any) *decodeError {
	return &decodeError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Decode parses a golden file, checking its format version and checksum first. path is its
// place in the data directory; messages do not include it (Load and Verify prefix the display
// path).
func Decode(path string, data []byte) (*File, error) {
	version, want, body, err := firstLine(data)
	if err != nil {
		return nil, err
	}
	if version != FormatVersion {
		return nil, derr(kindFormat, "format version %d, this build reads version %d", version, FormatVersion)
	}
	sum := sha256.Sum256(body)
	if want != hex.EncodeToString(sum[:]) {
		return nil, derr(kindChecksum, "checksum mismatch (file corrupted or edited by hand)")
	}
	hl, content, ok := bytes.Cut(body, []byte{'\n'})
	if !ok {
		return nil, derr(kindCorrupt, "no header line")
	}
	var h header
	if err := strictJSON(hl, &h); err != nil {
		return nil, derr(kindCorrupt, "header line: %v", err)
	}
	if len(content) != h.ContentBytes {
		return nil, derr(kindCorrupt, "content is %d bytes, the header says %d", len(content), h.ContentBytes)
	}
	dt, err := numerics.Parse(h.DType)
	if err != nil {
		return nil, derr(kindCorrupt, "header dtype %q: %v", h.DType, err)
	}
	f := &File{Path: path, Format: version, Generator: h.Generator, Engine: h.Engine, Op: h.Op, DType: dt}
	meta, blob, ok := bytes.Cut(content, []byte{'\n'})
	if !ok {
		return nil, derr(kindCorrupt, "content has no meta line")
	}
	var doc metaDoc
	if err := strictJSON(meta, &doc); err != nil {
		return nil, derr(kindCorrupt, "meta is not valid JSON: %v", err)
	}
	if len(doc.Cases) != h.Cases {
		return nil, derr(kindCorrupt, "header says %d cases, meta lists %d", h.Cases, len(doc.Cases))
	}
	for _, mc := range doc.Cases {
		c, err := decodeCase(f, mc, blob)
		if err != nil {
			return nil, err
		}
		f.Cases = append(f.Cases, c)
	}
	return f, nil
}

// firstLine splits off "tessera-golden v<N> sha256:<hex>" and returns N, the hex and the rest.
func firstLine(data []byte) (version int, sum string, body []byte, err error) {
	line, body, ok := bytes.Cut(data[:min(len(data), maxLineBytes)], []byte{'\n'})
	rest, isGolden := bytes.CutPrefix(line, []byte(magic))
	if !ok || !isGolden {
		return 0, "", nil, derr(kindFormat, "not a golden file (the first line must be \"%sv<N> sha256:<hex>\")", magic)
	}
	body = data[len(line)+1:]
	fields := append(strings.Fields(string(rest)), "")
	v, vok := strings.CutPrefix(fields[0], "v")
	n, perr := strconv.Atoi(v)
	fields = fields[:len(fields)-1]
	if !vok || perr != nil || n < 1 {
		return 0, "", nil, derr(kindFormat, "first line %q has no format version \"v<N>\"", line)
	}
	if n == FormatVersion {
		hex, hok := "", len(fields) == 2
		if hok {
			hex, hok = strings.CutPrefix(fields[1], "sha256:")
		}
		if !hok {
			return 0, "", nil, derr(kindFormat, "first line %q has no \"sha256:<hex>\" checksum", line)
		}
		sum = hex
	}
	return n, sum, body, nil
}

func decodeCase(f *File, mc metaCase, blob []byte) (GoldenCase, error) {
	c := GoldenCase{Name: mc.Name, Op: f.Op, DType: f.DType, Seed: mc.Seed, GraphText: mc.Graph, Dists: mc.Dists,
		Tolerances: mc.Tolerances, Inputs: map[string]*tensor.Tensor{}}
	g, err := graph.Parse(mc.Graph, mc.Name)
	if err != nil {
		return c, derr(kindCorrupt, "case %s: graph: %v", mc.Name, err)
	}
	c.Graph = g
	world := 0
	if g.Mesh != nil {
		world = g.Mesh.World()
	}
	if mc.World != world || len(mc.Ranks) != world {
		return c, derr(kindCorrupt, "case %s: stored for %d ranks with %d rank entries, the graph runs on %d", mc.Name, mc.World, len(mc.Ranks), max(world, 1))
	}
	if world == 0 {
		if err := decodeTensors(mc.Name, "", mc.Inputs, mc.Outputs, len(mc.Tolerances), g, blob, c.Inputs, &c.Want); err != nil {
			return c, err
		}
	} else {
		c.Inputs = nil
		if len(mc.Inputs) != 0 || len(mc.Outputs) != 0 {
			return c, derr(kindCorrupt, "case %s: a multi-rank case stores its tensors per rank, not in inputs/outputs", mc.Name)
		}
		c.World = world
		for r, mr := range mc.Ranks {
			in := map[string]*tensor.Tensor{}
			var want []*tensor.Tensor
			if err := decodeTensors(mc.Name, fmt.Sprintf(" (rank %d)", r), mr.Inputs, mr.Outputs, len(mc.Tolerances), g, blob, in, &want); err != nil {
				return c, err
			}
			c.RankInputs = append(c.RankInputs, in)
			c.RankWant = append(c.RankWant, want)
		}
	}
	for i, t := range c.Tolerances {
		if err := t.Validate(); err != nil {
			return c, derr(kindCorrupt, "case %s: tolerance %d: %v", mc.Name, i, err)
		}
	}
	return c, nil
}

// decodeTensors reads one rank's (or the single device's) stored inputs into in and outputs
// into want, checking the counts against the graph; where follows the case name in messages
// (" (rank 1)" for a multi-rank case).
func decodeTensors(cname, where string, ins, outs []metaTensor, tols int, g *graph.Graph, blob []byte, in map[string]*tensor.Tensor, want *[]*tensor.Tensor) error {
	if len(ins) != len(g.Inputs) || len(outs) != len(g.Outputs) || tols != len(g.Outputs) {
		return derr(kindCorrupt, "case %s%s: %d inputs, %d outputs and %d tolerances stored for a graph of %d inputs and %d outputs",
			cname, where, len(ins), len(outs), tols, len(g.Inputs), len(g.Outputs))
	}
	for i, v := range g.Inputs {
		t, err := sliceTensor(cname+where, ins[i], v, blob)
		if err != nil {
			return err
		}
		in[v.Name] = t
	}
	for i, v := range g.Outputs {
		t, err := sliceTensor(cname+where, outs[i], v, blob)
		if err != nil {
			return err
		}
		*want = append(*want, t)
	}
	return nil
}

// sliceTensor reads one stored tensor and checks it against the graph value it belongs to.
func sliceTensor(cname string, m metaTensor, v *graph.Value, blob []byte) (*tensor.Tensor, error) {
	what := fmt.Sprintf("case %s: tensor %%%s", cname, m.Name)
	if m.Name != v.Name || m.DType != v.Type.DType.String() || !slices.Equal(m.Shape, v.Type.Shape) {
		return nil, derr(kindCorrupt, "%s is stored as %s, the graph declares %%%s: %s", what, tensor.TypeString(mustDType(m.DType), m.Shape), v.Name, v.Type)
	}
	need := v.Type.NumElems() * v.Type.DType.Size()
	if m.Bytes != need || m.Offset < 0 || m.Offset > len(blob) || len(blob)-m.Offset < need {
		return nil, derr(kindCorrupt, "%s: %d bytes at offset %d do not fit (need %d, blob holds %d)", what, m.Bytes, m.Offset, need, len(blob))
	}
	data := slices.Clone(blob[m.Offset : m.Offset+need])
	return &tensor.Tensor{DType: v.Type.DType, Shape: slices.Clone(v.Type.Shape), Data: data}, nil
}

// strictJSON decodes exactly one JSON value with no unknown fields.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

func mustDType(s string) numerics.DType {
	d, _ := numerics.Parse(s)
	return d
}
