package sanitizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzSanitizerOutput: any text, for any tool, parses without a panic into findings of that tool with a
// kind, a summary of -1 or more, and a verdict that is never a pass while something was
// reported or while the summary line is missing.
func FuzzSanitizerOutput(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), uint8(0))
	}
	f.Add("=========\n=========     at x+0x1\n", uint8(1))
	f.Add("========= Error: Race reported between Write access at [3 hazards]\n=========     and Read access at 0x1 in :1:( [x hazards]\n", uint8(1))
	f.Fuzz(func(t *testing.T, text string, k uint8) {
		tool := Tools()[int(k)%len(Tools())]
		o := Parse(tool, text)
		if o.Summary < -1 {
			t.Fatalf("summary %d", o.Summary)
		}
		for _, fd := range o.Findings {
			if fd.Tool != tool || fd.Kind == "" || fd.Access == "" {
				t.Fatalf("finding %+v", fd)
			}
			if strings.ContainsAny(fd.Kernel, "()") {
				t.Fatalf("kernel %q keeps its parameter list", fd.Kernel)
			}
		}
		r := Judge(Run{Tool: tool, Output: text}, []string{"c"})
		if r.Status == Pass && (len(o.Findings) > 0 || o.Summary != 0) {
			t.Fatalf("pass with %d findings and summary %d", len(o.Findings), o.Summary)
		}
		if len(o.Findings) > 0 && r.Status != Fail {
			t.Fatalf("%d findings judged %s", len(o.Findings), r.Status)
		}
	})
}
