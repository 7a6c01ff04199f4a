package checkpoint

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func validManifest() *Manifest {
	m := &Manifest{Format: FormatVersion, Step: 40, World: 2, Layout: "dp=2",
		Created: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	for r := range 2 {
		m.Files = append(m.Files, File{Rank: r, Name: RankFileName(r), Bytes: 1234, SHA256: strings.Repeat("ab", 32)})
	}
	return m
}

func TestParseManifestRejects(t *testing.T) {
	good, err := validManifest().encode()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ParseManifest(good); err != nil || !reflect.DeepEqual(m, validManifest()) {
		t.Fatalf("valid manifest: %+v, %v", m, err)
	}
	edit := func(old, new string) []byte { return bytes.Replace(good, []byte(old), []byte(new), 1) }
	for name, data := range map[string][]byte{
		"empty":          nil,
		"null":           []byte("null"),
		"array":          []byte("[]"),
		"trailing":       append(append([]byte{}, good...), '{', '}'),
		"format 2":       edit(`"format": 1`, `"format": 2`),
		"negative step":  edit(`"step": 40`, `"step": -40`),
		"world 0":        edit(`"world": 2`, `"world": 0`),
		"world 3":        edit(`"world": 2`, `"world": 3`),
		"rank swapped":   edit(`"rank": 0`, `"rank": 1`),
		"file name":      edit(`"rank-0.npz"`, `"../rank-0.npz"`),
		"negative bytes": edit(`"bytes": 1234`, `"bytes": -1`),
		"short digest":   edit(strings.Repeat("ab", 32), "abab"),
		"upper digest":   edit(strings.Repeat("ab", 32), strings.Repeat("AB", 32)),
		"unknown field":  edit(`"layout"`, `"layuot"`),
		"huge step":      edit(`"step": 40`, `"step": 1e99`),
		"bad time":       edit(`"2026-11-24T12:00:00Z"`, `"yesterday"`),
		"too big":        bytes.Repeat([]byte(" "), maxManifestBytes+1),
	} {
		m, err := ParseManifest(data)
		if m != nil || errs.CodeOf(err) != errs.Checkpoint || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, %v; want a one-line E_CHECKPOINT error", name, m, err)
		}
	}
}

// FuzzManifest: ParseManifest never panics; what it rejects is E_CHECKPOINT, what it accepts
// encodes and parses back to the same manifest.
func FuzzManifest(f *testing.F) {
	good, _ := validManifest().encode()
	f.Add(good)
	f.Add([]byte(`{"format":1,"step":0,"world":1,"created":"2026-01-01T00:00:00Z","files":[{"rank":0,"name":"rank-0.npz","bytes":0,"sha256":"` + strings.Repeat("0", 64) + `"}]}`))
	f.Add([]byte(`{"format":1,"world":65536,"files":null}`))
	f.Add([]byte(`{"files":[{}]}`))
	f.Add([]byte("\x00\xff{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			if m != nil || errs.CodeOf(err) != errs.Checkpoint {
				t.Fatalf("rejection %v with manifest %v, want E_CHECKPOINT and nil", err, m)
			}
			return
		}
		again, err := m.encode()
		if err != nil {
			t.Fatalf("accepted manifest does not encode: %v", err)
		}
		m2, err := ParseManifest(again)
		if err != nil || !reflect.DeepEqual(m.Files, m2.Files) || m.Step != m2.Step || m.World != m2.World ||
			m.Layout != m2.Layout || !m.Created.Equal(m2.Created) {
			t.Fatalf("re-parse: %+v, %v; want %+v", m2, err, m)
		}
	})
}

// FuzzRankFile: a rank file's parser never panics on any bytes (the loader only parses files
// whose digest matches, but List and commit parse what is there).
func FuzzRankFile(f *testing.F) {
	// A small seed: the fuzzer minimizes every new input byte by byte, which takes minutes on
	// a full testState file.
	st := State{Step: 3, RNG: []uint64{1, 2}, Meta: map[string]string{"m": "x"}, Tensors: map[string]*tensor.Tensor{
		"w": tensor.FromFloat64(numerics.BF16, []int{2}, []float64{1, -2}),
		"b": tensor.FromFloat64(numerics.F8E4M3, []int{}, []float64{0.5}),
	}}
	var buf bytes.Buffer
	if err := writeRankFile(&buf, st, 0, 1); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := readRankFile(data, 3, 0, 1)
		if err != nil && errs.CodeOf(err) != errs.Checkpoint {
			t.Fatalf("error %v is not E_CHECKPOINT", err)
		}
		if err == nil && st.Step != 3 {
			t.Fatalf("step %d", st.Step)
		}
	})
}
