package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// ManifestVersion is the replay manifest format this build writes and reads. Manifests are
// read strictly, so any change to the fields bumps it.
const ManifestVersion = 1

// Manifest kinds.
const (
	KindRef    = "ref"    // compare the outputs with the golden model under Tolerances
	KindDigest = "digest" // expect exactly ExpectDigests (a determinism failure)
)

// Manifest holds everything needed to re-run a failing case anywhere: the graph as text, the
// exact input bytes, how the outputs were judged, and where it failed. `tessera-qa replay
// FILE` loads one with LoadManifest and runs it with Replay.
type Manifest struct {
	Version int    `json:"version"`
	Suite   string `json:"suite"`
	Case    string `json:"case"`
	Kind    string `json:"kind"`
	// Graph is the graph in the text format (docs/graph-format.md).
	Graph string `json:"graph"`
	// InputsNPZ is an .npz archive of the inputs (base64 in JSON), one array per graph input.
	InputsNPZ []byte `json:"inputs_npz"`
	// InputDigests maps each input name to its tensor digest; loading verifies them.
	InputDigests  map[string]string `json:"input_digests"`
	Seed          uint64            `json:"seed,string"`
	Labels        []string          `json:"labels,omitempty"`
	Backend       string            `json:"backend"`
	ScheduleHash  string            `json:"schedule_hash,omitempty"`
	Tolerances    []Tolerance       `json:"tolerances,omitempty"`
	ExpectDigests []string          `json:"expect_digests,omitempty"`
	Env           Env               `json:"env"`
	Failure       string            `json:"failure"`
}

// ManifestFor builds the manifest of case c whose run gave r. Tolerances are resolved (a nil
// Case.Tolerances becomes the per-dtype defaults of this build), so a replay judges the
// outputs the way the original run did. A case with ExpectDigests gives a KindDigest manifest.
func ManifestFor(c Case, r Result) (Manifest, error) {
	tols, err := c.resolve()
	if err != nil {
		return Manifest{}, err
	}
	names := slices.Sorted(maps.Keys(c.Inputs))
	ts := make([]*tensor.Tensor, len(names))
	for i, n := range names {
		ts[i] = c.Inputs[n]
	}
	var npz bytes.Buffer
	if err := tensor.WriteNPZ(&npz, names, ts); err != nil {
		return Manifest{}, errs.Wrap(errs.Input, err, "manifest %s/%s: inputs", c.Suite, c.Name)
	}
	m := Manifest{
		Version: ManifestVersion, Suite: c.Suite, Case: c.Name, Kind: KindRef,
		Graph: graph.Print(c.Graph), InputsNPZ: npz.Bytes(), InputDigests: inputDigests(c.Inputs),
		Seed: c.Seed, Labels: slices.Clone(c.Labels), Backend: r.Backend, ScheduleHash: r.ScheduleHash,
		Tolerances: tols, Env: r.Env, Failure: r.Reason,
	}
	if c.ExpectDigests != nil {
		m.Kind, m.Tolerances, m.ExpectDigests = KindDigest, nil, slices.Clone(c.ExpectDigests)
	}
	return m, nil
}

// WriteManifest writes m atomically into dir (created if needed) under a name derived from
// its suite, case and backend, and returns the file's path.
func WriteManifest(dir string, m Manifest) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", errs.New(errs.Input, "replay dir %s: %v", dir, err)
	}
	data, err := indentJSON(m)
	if err != nil {
		return "", errs.New(errs.Internal, "manifest %s/%s: encode: %v", m.Suite, m.Case, err)
	}
	path := filepath.Join(dir, ManifestFileName(m))
	if err := writeAtomic(path, data); err != nil {
		return "", err
	}
	return path, nil
}

// ManifestFileName is "SUITE--CASE--BACKEND.replay.json" with every character outside
// [A-Za-z0-9._-] replaced by '_'. When that changed or shortened a part, 8 hex digits of the
// SHA-256 of the exact names are appended, so distinct cases never share a file.
func ManifestFileName(m Manifest) string {
	var parts []string
	changed := false
	for _, s := range []string{m.Suite, m.Case, m.Backend} {
		p, ch := sanitize(s)
		parts = append(parts, p)
		changed = changed || ch
	}
	name := strings.Join(parts, "--")
	if changed {
		sum := sha256.Sum256([]byte(m.Suite + "\x00" + m.Case + "\x00" + m.Backend))
		name += "-" + hex.EncodeToString(sum[:4])
	}
	return name + ".replay.json"
}

// maxNamePart keeps a manifest file name well under the usual 255-byte limit.
const maxNamePart = 64

func sanitize(s string) (string, bool) {
	var b strings.Builder
	changed := false
	for i, r := range s {
		ok := r == '-' || r == '_' || r == '.' && i > 0 ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
		if !ok {
			r, changed = '_', true
		}
		b.WriteRune(r)
	}
	out := b.String()
	if out == "" {
		out, changed = "_", true
	}
	if len(out) > maxNamePart {
		out, changed = out[:maxNamePart], true
	}
	return out, changed
}

// LoadManifest reads and validates a manifest file strictly: unknown fields, trailing data and
// other versions are rejected, the graph must parse and verify, and the inputs must decode to
// the graph's input types with the recorded digests. Errors are E_PARSE (the file or graph
// text) or E_INPUT (the inputs) and name the file.
func LoadManifest(path string) (Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, errs.New(errs.Input, "manifest %s: %v", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, errs.New(errs.Parse, "manifest %s: %s", path, jsonErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Manifest{}, errs.New(errs.Parse, "manifest %s: trailing data after the JSON object (byte %d)", path, dec.InputOffset())
	}
	if _, err := m.decode(path); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at byte " + itoa(se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "field " + te.Field + ": " + te.Error() + " at byte " + itoa(te.Offset)
	}
	return err.Error()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// BuildCase rebuilds the case the manifest describes, validated as LoadManifest does.
func (m Manifest) BuildCase() (Case, error) { return m.decode("manifest " + m.Suite + "/" + m.Case) }

// decode validates m and rebuilds its case; where names the source in errors.
func (m Manifest) decode(where string) (Case, error) {
	if m.Version != ManifestVersion {
		return Case{}, errs.New(errs.Parse, "%s: manifest version %d, this build reads version %d", where, m.Version, ManifestVersion)
	}
	if m.Kind != KindRef && m.Kind != KindDigest {
		return Case{}, errs.New(errs.Parse, "%s: kind %q (want %q or %q)", where, m.Kind, KindRef, KindDigest)
	}
	if m.Backend == "" {
		return Case{}, errs.New(errs.Parse, "%s: no backend", where)
	}
	g, err := graph.Parse(m.Graph, where)
	if err != nil {
		return Case{}, errs.Wrap(errs.Parse, err, "%s: graph", where)
	}
	inputs, err := m.inputs(g, where)
	if err != nil {
		return Case{}, err
	}
	c := Case{Suite: m.Suite, Name: m.Case, Graph: g, Inputs: inputs, Seed: m.Seed, Labels: m.Labels}
	switch m.Kind {
	case KindRef:
		c.Tolerances = m.Tolerances
	case KindDigest:
		c.ExpectDigests = m.ExpectDigests
		if c.ExpectDigests == nil {
			return Case{}, errs.New(errs.Parse, "%s: kind digest without expect_digests", where)
		}
	}
	if _, err := c.resolve(); err != nil {
		// A tolerance or digest list that does not fit the graph is a malformed manifest,
		// whatever code the case check uses.
		msg := err.Error()
		var e *errs.Error
		if errors.As(err, &e) {
			msg = e.Msg
		}
		return Case{}, &errs.Error{Code: errs.Parse, Msg: where + ": " + msg, Err: err}
	}
	return c, nil
}

// inputs decodes the NPZ against g's input types and verifies every digest.
func (m Manifest) inputs(g *graph.Graph, where string) (map[string]*tensor.Tensor, error) {
	arrays, err := tensor.ReadNPZ(bytes.NewReader(m.InputsNPZ), int64(len(m.InputsNPZ)))
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "%s: inputs_npz", where)
	}
	byName := map[string]*tensor.Array{}
	for _, a := range arrays {
		if g.Value(a.Name) == nil || !isInput(g, g.Value(a.Name)) {
			return nil, errs.New(errs.Input, "%s: inputs_npz holds %q, which is not an input of graph %s", where, a.Name, g.Name)
		}
		byName[a.Name] = a
	}
	for name := range m.InputDigests {
		if v := g.Value(name); v == nil || !isInput(g, v) {
			return nil, errs.New(errs.Input, "%s: input_digests names %q, which is not an input of graph %s", where, name, g.Name)
		}
	}
	out := make(map[string]*tensor.Tensor, len(g.Inputs))
	for _, v := range g.Inputs {
		a, ok := byName[v.Name]
		if !ok {
			return nil, errs.New(errs.Input, "%s: inputs_npz lacks input %%%s", where, v.Name)
		}
		t, err := a.As(v.Type.DType)
		if err != nil {
			return nil, errs.Wrap(errs.Input, err, "%s: input %%%s", where, v.Name)
		}
		want, ok := m.InputDigests[v.Name]
		if !ok {
			return nil, errs.New(errs.Input, "%s: input_digests lacks input %%%s", where, v.Name)
		}
		if got := t.Digest(); got != want {
			return nil, errs.New(errs.Input, "%s: input %%%s digest mismatch: data gives %s, manifest records %s", where, v.Name, short(got), short(want))
		}
		out[v.Name] = t
	}
	if err := graph.CheckInputs(g, out); err != nil {
		return nil, errs.Wrap(errs.Input, err, "%s", where)
	}
	return out, nil
}

// Replay re-runs the manifest's case on its backend. The result's verdict says whether it
// still fails (fail or error) or no longer does (pass). The error is for replays that cannot
// run at all: an invalid manifest, an unknown backend, or one not available here
// (E_NO_DEVICE). A schedule hash that differs from the recorded one is noted in the reason,
// since the failure may then hide behind a different tiling.
func Replay(m Manifest) (Result, error) {
	c, err := m.BuildCase()
	if err != nil {
		return Result{}, err
	}
	b, err := backend.Get(m.Backend)
	if err != nil {
		return Result{}, errs.Wrap(errs.Unsupported, err, "replay %s/%s", m.Suite, m.Case)
	}
	if err := b.Available(); err != nil {
		return Result{}, errs.Wrap(errs.NoDevice, err, "replay %s/%s on %s", m.Suite, m.Case, m.Backend)
	}
	r := Runner{Backend: b}.Run(c)
	if m.ScheduleHash != "" && r.ScheduleHash != "" && r.ScheduleHash != m.ScheduleHash {
		note := "schedule hash changed: recorded " + m.ScheduleHash + ", now " + r.ScheduleHash
		if r.Reason == "" {
			r.Reason = note
		} else {
			r.Reason += "; " + note
		}
	}
	return r, nil
}
