package golden

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// distFile encodes the golden file of all_to_all/int8 (multi-rank cases).
func distFile(t *testing.T) (*File, []byte) {
	t.Helper()
	f, err := Generate(SpecsFor("all_to_all", numerics.I8))
	if err != nil {
		t.Fatal(err)
	}
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, data
}

func TestMultiRankFileRoundTrip(t *testing.T) {
	f, data := distFile(t)
	g, err := Decode(f.Path, data)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range g.Cases {
		w := f.Cases[i]
		if c.World != w.World || c.World < 2 || c.Inputs != nil || c.Want != nil || len(c.RankInputs) != c.World || len(c.RankWant) != c.World {
			t.Fatalf("%s: decoded world %d with %d/%d ranks (single-device fields %v/%v), encoded world %d",
				c.Name, c.World, len(c.RankInputs), len(c.RankWant), c.Inputs != nil, c.Want != nil, w.World)
		}
		for r := range c.World {
			if !sameTensor(c.RankInputs[r]["x"], w.RankInputs[r]["x"]) || !sameTensor(c.RankWant[r][0], w.RankWant[r][0]) {
				t.Errorf("%s: rank %d's tensors differ after the round trip", c.Name, r)
			}
		}
	}
	if again, _ := Encode(g); !bytes.Equal(again, data) {
		t.Error("re-encoding a decoded multi-rank file changed its bytes")
	}
	// The single-device layout is untouched: no "world" or "ranks" key in a single-device file.
	_, single := smallFile(t)
	if bytes.Contains(single, []byte(`"world"`)) || bytes.Contains(single, []byte(`"ranks"`)) {
		t.Error("a single-device file carries multi-rank fields")
	}
}

// TestMultiRankFileInconsistencies: a multi-rank case whose stored rank count disagrees with
// its graph's mesh is corrupt, whatever the checksum says.
func TestMultiRankFileInconsistencies(t *testing.T) {
	f, _ := distFile(t)
	for _, tc := range []struct {
		name string
		edit func(c *GoldenCase)
		want string
	}{
		{"one rank missing", func(c *GoldenCase) { c.World--; c.RankInputs = c.RankInputs[1:]; c.RankWant = c.RankWant[1:] }, "stored for 1 ranks with 1 rank entries, the graph runs on 2"},
		{"stored as single-device", func(c *GoldenCase) {
			c.World, c.Inputs, c.Want, c.RankInputs, c.RankWant = 0, c.RankInputs[0], c.RankWant[0], nil, nil
		}, "stored for 0 ranks"},
	} {
		bad := *f
		bad.Cases = append([]GoldenCase(nil), f.Cases...)
		tc.edit(&bad.Cases[0])
		data, err := Encode(&bad)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err = Decode(f.Path, data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestVerifyReportsAStaleRank: one rank's input redrawn (what a changed RankSeed would leave
// behind) makes the file stale, naming the rank.
func TestVerifyReportsAStaleRank(t *testing.T) {
	f, _ := distFile(t)
	c := &f.Cases[1]
	x := c.RankInputs[2]["x"].Clone()
	x.Data[0] ^= 1
	ins := append([]map[string]*tensor.Tensor(nil), c.RankInputs...)
	ins[2] = map[string]*tensor.Tensor{"x": x}
	c.RankInputs = ins
	data, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := MapFS(Data())
	if err != nil {
		t.Fatal(err)
	}
	fsys[f.Path].Data = data
	ps, err := Verify(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Kind != "stale" || !strings.Contains(ps[0].Msg, "rank 2's input %x differs") {
		t.Errorf("problems %v, want one stale problem naming rank 2", ps)
	}
}
