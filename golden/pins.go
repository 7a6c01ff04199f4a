package golden

import (
	"embed"
	"io/fs"
)

// PinsRoot is the pins directory's path in the repository.
const PinsRoot = "golden/pins"

// The catalogue's output digests pinned per device class (package determinism/pins). They live
// beside data/ because they pin the same catalogue, and change when it does; they are embedded
// so that a test binary built here and copied to a GPU machine checks that machine's pins.
//
//go:embed pins
var pinsEmbedded embed.FS

// Pins returns the pin files compiled into this binary, rooted at the pins directory (so
// "cpu_amd64+fma.json" is a path in it).
func Pins() fs.FS {
	sub, err := fs.Sub(pinsEmbedded, "pins")
	if err != nil {
		panic("golden: embedded pins: " + err.Error()) // "pins" is a valid, embedded path
	}
	return sub
}
