// Package examples holds the example graphs of docs/ as files (read them with `tessera-qa
// exec`, `check`, `compile`) and embedded, for the main job's check suite.
package examples

import _ "embed"

// MLP is docs/examples/mlp.tg.
//
//go:embed mlp.tg
var MLP string

// MLPPath is where MLP lives in the repository.
const MLPPath = "docs/examples/mlp.tg"
