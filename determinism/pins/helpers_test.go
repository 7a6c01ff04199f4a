package pins

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/golden"
)

// digest makes a well-formed output digest from a label.
func digest(label string) string {
	h := sha256.Sum256([]byte(label))
	return hex.EncodeToString(h[:])
}

// file pins cases given as name -> output labels.
func file(class string, cases map[string][]string) File {
	f := File{Format: Format, Version: Version, DeviceClass: class, Cases: map[string]Pin{}}
	for name, labels := range cases {
		var outs []string
		for _, l := range labels {
			outs = append(outs, digest(l))
		}
		f.Cases[name] = Pin{Outputs: outs}
	}
	return f
}

// wantCode fails unless err has the code and mentions every part.
func wantCode(t *testing.T, err error, code errs.Code, parts ...string) {
	t.Helper()
	if errs.CodeOf(err) != code {
		t.Fatalf("error %v, want %s", err, code)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

// specsOf picks the catalogue specs with the given names, failing on a name it lacks.
func specsOf(t *testing.T, names ...string) []golden.Spec {
	t.Helper()
	var out []golden.Spec
	for _, n := range names {
		found := false
		for _, s := range golden.Catalogue() {
			if s.Name == n {
				out, found = append(out, s), true
			}
		}
		if !found {
			t.Fatalf("no catalogue spec %s", n)
		}
	}
	return out
}
