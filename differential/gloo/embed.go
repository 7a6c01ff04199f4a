package gloo

import _ "embed"

// script is the rank script; it is written into each group's temporary directory, so the
// binary needs nothing beside itself but a Python with torch.
//
//go:embed gloo_rank.py
var script []byte

// Script returns the embedded rank script (for docs and tests).
func Script() []byte { return append([]byte(nil), script...) }
