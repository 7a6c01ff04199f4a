package doctor

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/golden"
)

type pinOf = pins.Pin

func loadPins(class string) (pins.File, bool, error) {
	return pins.Load(golden.Pins(), golden.PinsRoot, class)
}

func pinsFS(t *testing.T, f pins.File) fstest.MapFS {
	t.Helper()
	b, err := pins.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{pins.FileName(f.DeviceClass): {Data: b}}
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }
