package report

import "github.com/tessera-qa/tessera-qa/report/parse"

// The bench JSON (docs/reporter.md) is defined in package parse, which reads it; these names
// are for writers such as the bench verb.
type (
	BenchReport = parse.BenchReport
	BenchRow    = parse.BenchRow
)

// Bench JSON markers.
const (
	BenchSchema = parse.BenchSchema
	BenchKind   = parse.BenchKind
)

// ShapeString is the series' shape string of dims ("4096x4096", "scalar").
func ShapeString(dims []int) string { return parse.ShapeString(dims) }
