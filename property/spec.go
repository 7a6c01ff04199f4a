package property

import (
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Step is the raw material of one op of a random graph: fixed-size choices that Build
// interprets against the graph built so far. Every field shrinks towards 0, and 0 always
// means the simplest choice (first op, fresh input, storage dtype, dims of 1, no attribute,
// normal values), so rapid's shrinker turns a failing graph into fewer, smaller, plainer ops:
// deleting a step from the list leaves a list that still builds a valid graph.
type Step struct {
	Op    int    // index into the op table (graph.Ops(), sorted by name), modulo its length
	Src   int    // first operand: 0 a fresh input, k > 0 the k-th most recent value that fits
	Src2  int    // second operand where the template can reuse one, same encoding
	DType int    // 0: the graph's storage dtype when the op takes it; else an index into the op's dtypes
	Rank  int    // 0..2: rank 1..3 of a fresh primary input (templates raise it where an op needs more)
	Dims  [4]int // indices into dimPool
	Attr  [4]int // template-specific attribute choices
	Accum int    // 0..4: no accum attribute; 5..7: an accumulator from AccumChoices
	Class int    // value class of fresh float inputs
	Seed  uint64 // seeds the values of fresh inputs
	// Empty == EmptyDraw gives the step's fresh primary input a leading dim of 0 (an empty
	// batch) where the op takes empty tensors (empty.go); 0, what shrinking reaches, never.
	Empty int
}

// Spec is a whole random graph before interpretation: a storage dtype and 1..MaxOps steps.
type Spec struct {
	Storage numerics.DType
	Steps   []Step
	// Edge, when set, is the scheduled tile-crossing case (edges.go) the first step builds.
	Edge *Edge
}

// storageChoices weights the graph-level storage dtype: f32 most, then f64, f16 and bf16,
// then the ints and fp8. Index 0 (what shrinking reaches) is f32.
var storageChoices = []numerics.DType{
	numerics.F32, numerics.F32, numerics.F32, numerics.F32, numerics.F32, numerics.F32,
	numerics.F64, numerics.F64, numerics.F16, numerics.F16, numerics.BF16, numerics.BF16,
	numerics.I32, numerics.I8, numerics.F8E4M3, numerics.F8E5M2,
}

// StepGen draws one Step. Attribute and dim draws are labelled so that rapid's report of a
// failing case reads as a recipe.
func StepGen() *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		var s Step
		// rapid favours small and extreme integers; the sum of two draws modulo the table
		// spreads ops evenly and still shrinks to op 0.
		n := len(opTable())
		s.Op = (rapid.IntRange(0, n-1).Draw(t, "op") + rapid.IntRange(0, n-1).Draw(t, "op+")) % n
		s.Src = rapid.IntRange(0, 4).Draw(t, "src")
		s.Src2 = rapid.IntRange(0, 4).Draw(t, "src2")
		s.DType = rapid.IntRange(0, 7).Draw(t, "dtype")
		s.Rank = rapid.IntRange(0, 2).Draw(t, "rank")
		for i := range s.Dims {
			s.Dims[i] = rapid.IntRange(0, len(dimPool)-1).Draw(t, "dim")
		}
		for i := range s.Attr {
			s.Attr[i] = rapid.IntRange(0, 15).Draw(t, "attr")
		}
		s.Accum = rapid.IntRange(0, 7).Draw(t, "accum")
		s.Class = rapid.IntRange(0, int(numClasses)-1).Draw(t, "class")
		s.Seed = rapid.Uint64().Draw(t, "seed")
		s.Empty = rapid.IntRange(0, EmptyDraw).Draw(t, "empty")
		return s
	})
}

// SpecGen draws a Spec of 1..maxOps steps.
func SpecGen(maxOps int) *rapid.Generator[Spec] {
	return rapid.Custom(func(t *rapid.T) Spec {
		st := storageChoices[rapid.IntRange(0, len(storageChoices)-1).Draw(t, "storage")]
		return Spec{Storage: st, Steps: rapid.SliceOfN(StepGen(), 1, max(maxOps, 1)).Draw(t, "steps")}
	})
}
