package differential

import "io"

// What differential/gloo shares with the oracle: it starts its own interpreters (one per rank),
// but finds them and keeps their stderr the same way.

// SystemPython is the interpreter Debian's python3-torch installs into.
const SystemPython = systemPython

// Tail keeps the last bytes written to it and forwards everything to an optional log; String
// is the kept tail on one line (the last 600 bytes), for error messages.
type Tail = tail

// NewTail returns a Tail that keeps the last n bytes.
func NewTail(n int, log io.Writer) *Tail { return newTail(n, log) }
