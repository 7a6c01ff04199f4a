// Package all links every backend into a binary or test: import it for its side effect.
package all

import (
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cuda"
)
