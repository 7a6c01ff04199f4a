package graph

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// FuzzParse: Parse never panics; every error is one coded line naming the file; and whatever
// parses prints to text that parses back Equal and prints identically.
// Seeds live in testdata/fuzz/FuzzParse. Run: go test -run=^$ -fuzz=FuzzParse ./engine/graph
func FuzzParse(f *testing.F) {
	f.Add(specExample)
	f.Fuzz(func(t *testing.T, src string) {
		g, err := Parse(src, "fuzz.tg")
		if err != nil {
			msg := err.Error()
			if c := errs.CodeOf(err); c == errs.Internal || !strings.HasPrefix(msg, string(c)+": fuzz.tg") {
				t.Fatalf("error is not a coded error naming the file: %q", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Fatalf("error spans lines: %q", msg)
			}
			return
		}
		text := Print(g)
		g2, err := Parse(text, "printed.tg")
		if err != nil {
			t.Fatalf("printed graph does not parse: %v\n--- source\n%s\n--- printed\n%s", err, src, text)
		}
		if d := Diff(g, g2); d != "" {
			t.Fatalf("round trip differs: %s\n--- printed\n%s", d, text)
		}
		if text2 := Print(g2); text2 != text {
			t.Fatalf("printing is not stable:\n%s\nvs\n%s", text, text2)
		}
	})
}
