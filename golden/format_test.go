package golden

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// smallFile encodes the (small) golden file of neg/int8.
func smallFile(t *testing.T) (*File, []byte) {
	t.Helper()
	f, err := Generate(SpecsFor("neg", numerics.I8))
	if err != nil {
		t.Fatal(err)
	}
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, data
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	f, data := smallFile(t)
	g, err := Decode(f.Path, data)
	if err != nil {
		t.Fatal(err)
	}
	if g.Op != "neg" || g.DType != numerics.I8 || g.Generator != GeneratorVersion || len(g.Cases) != len(f.Cases) {
		t.Fatalf("decoded header %s/%s %q with %d cases", g.Op, g.DType, g.Generator, len(g.Cases))
	}
	for i, c := range g.Cases {
		w := f.Cases[i]
		if c.Name != w.Name || c.Seed != w.Seed || c.GraphText != w.GraphText || !slices.Equal(c.Tolerances, w.Tolerances) {
			t.Errorf("case %d: decoded %s differs from encoded %s", i, c.Name, w.Name)
		}
		for name, x := range w.Inputs {
			if !sameTensor(c.Inputs[name], x) {
				t.Errorf("%s: input %s differs after the round trip", c.Name, name)
			}
		}
		for j := range w.Want {
			if !sameTensor(c.Want[j], w.Want[j]) {
				t.Errorf("%s: output %d differs after the round trip", c.Name, j)
			}
		}
	}
	again, _ := Encode(g)
	if !bytes.Equal(again, data) {
		t.Error("re-encoding a decoded file changed its bytes")
	}
}

// TestEveryByteIsProtected flips each byte of a file in turn: every flip must be rejected
// with an error (never accepted, never a panic).
func TestEveryByteIsProtected(t *testing.T) {
	f, data := smallFile(t)
	contentStart := bytes.IndexByte(data[len(magic):], '\n') + len(magic) + 1
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x20
		_, err := Decode(f.Path, bad)
		if err == nil {
			t.Fatalf("flipping byte %d of %d was accepted", i, len(data))
		}
		var de *decodeError
		if !errors.As(err, &de) {
			t.Fatalf("byte %d: error %v carries no problem kind", i, err)
		}
		if i >= contentStart && de.kind != kindChecksum {
			t.Fatalf("byte %d (content): kind %s (%v), want checksum", i, de.kind, err)
		}
	}
	for n := range len(data) {
		if _, err := Decode(f.Path, data[:n]); err == nil {
			t.Fatalf("file truncated to %d of %d bytes was accepted", n, len(data))
		}
	}
}

func TestDecodeRejectsOtherFormatVersions(t *testing.T) {
	f, data := smallFile(t)
	bad := bytes.Replace(data, []byte("tessera-golden v1 "), []byte("tessera-golden v2 "), 1)
	_, err := Decode(f.Path, bad)
	var de *decodeError
	if !errors.As(err, &de) || de.kind != kindFormat || !strings.Contains(err.Error(), "format version 2, this build reads version 1") {
		t.Fatalf("format 2: got %v", err)
	}
	if _, err := Decode(f.Path, []byte("PK\x03\x04 not a golden file")); err == nil || !strings.Contains(err.Error(), "not a golden file") {
		t.Fatalf("foreign file: got %v", err)
	}
}
