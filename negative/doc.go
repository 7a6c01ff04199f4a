// Package negative holds the harness's negative tests: graphs that break one verifier rule
// each and must be refused, and graphs one edit away from a valid one, which must be refused
// or run and agree with the golden model.
//
// Every other methodology feeds the engine valid graphs only, so a verifier rule that is
// dropped (an index range, a bound, a shape condition) lets an invalid graph through to a
// kernel that reads out of bounds, and nothing notices. Here the catalogue (catalogue.go,
// edits.go) lists, as data, an invalid graph per rule with the error code design.md §9 gives
// it and the names its one-line message must carry; Refuse (refuse.go) runs a case through the
// real entry points. OneEdit (oneedit.go) draws a single edit of a valid graph text (one dim,
// one attribute, one dtype, one operand) and Judge decides whether what the engine did with it
// is acceptable. suites/verifier holds the specs; FuzzOneEdit the fuzz target.
package negative
