package rewrite

import (
	"fmt"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Gen draws random rewrite candidates: graphs shaped like a rewrite's pattern with each of the
// matcher's conditions drawn to hold or fail, biased towards the near misses (one condition
// failing) that hand-written tests forget. The entry's Expect predicts from the draws whether
// the pass must rewrite, so a property can check the matcher and the numbers at once.
func Gen() *rapid.Generator[Entry] {
	return rapid.Custom(func(t *rapid.T) Entry {
		switch rapid.IntRange(0, 2).Draw(t, "pass") {
		case 0:
			return genAttention(t)
		case 1:
			return genElementwise(t)
		}
		return genCanonical(t)
	})
}

// flip draws whether one condition fails; about one draw in three fails, so single near
// misses are common and full matches too.
func flip(t *rapid.T, label string) bool { return rapid.IntRange(0, 2).Draw(t, label) == 0 }

func genAttention(t *rapid.T) Entry {
	// f32 only: in 16-bit storage the fused kernel (probabilities kept in f32) and the unfused
	// graph (rounded to 16 bits twice) differ by more than a plain tolerance; agree/ref of the
	// property suite judges those with its noise model.
	dt := numerics.F32
	batched := rapid.Bool().Draw(t, "batched")
	noTB, ta, axis0, accum, readP, readS, hint := flip(t, "no-transpose-b"), flip(t, "transpose-a"), flip(t, "softmax-axis-0"),
		flip(t, "softmax-accum"), flip(t, "probabilities-read-twice"), flip(t, "scores-read-twice"), flip(t, "tile-hint")
	m, d, n, dv := rapid.IntRange(1, 12).Draw(t, "m"), rapid.IntRange(1, 9).Draw(t, "d"), rapid.IntRange(1, 12).Draw(t, "n"), rapid.IntRange(1, 6).Draw(t, "dv")
	if noTB {
		n = d // square k: the near miss that type inference cannot refuse
	}
	if ta || axis0 {
		m = n // square scores: transpose_a and axis 0 then still type-check
	}
	op := "matmul"
	lead := []int{}
	if batched {
		op, lead = "batch_matmul", []int{rapid.IntRange(1, 3).Draw(t, "batch")}
	}
	shape := func(dims ...int) []int { return append(append([]int{}, lead...), dims...) }
	rank := len(lead) + 2
	e := Entry{Pass: FuseAttention, Rewrite: !(noTB || ta || axis0 || accum || readP || readS || hint)}
	e.Name = fmt.Sprintf("fuse-attention/gen/%s/%s", op, dt)
	e.Build = func(b *graph.Builder) {
		q := b.Input("q", dt, shape(m, d)...)
		kShape := shape(n, d)
		if noTB {
			kShape = shape(d, n)
		}
		k, v := b.Input("k", dt, kShape...), b.Input("v", dt, shape(n, dv)...)
		qk := graph.Attrs{"transpose_b": graph.Bool(!noTB)}
		if hint {
			qk["tile"] = graph.Ints(16, 16, 16)
		}
		sm := graph.Attrs{}
		if axis0 {
			sm["axis"] = graph.Int(int64(rank - 2))
		}
		if accum {
			sm["accum"] = graph.DTypeAttr(numerics.F32)
		}
		s := b.Named("s", op, qk, q, k)
		p := b.Named("p", "softmax", sm, s)
		o := b.Named("o", op, graph.Attrs{"transpose_a": graph.Bool(ta)}, p, v)
		outs := []*graph.Value{o}
		if readP {
			outs = append(outs, b.Named("rp", "exp", nil, p))
		}
		if readS {
			outs = append(outs, b.Named("rs", "reduce_max", graph.Attrs{"axes": graph.Ints(int64(rank - 1))}, s))
		}
		b.Output(outs...)
	}
	if e.Rewrite {
		e.Expect = all(hasNode("o", "attention"), noNode("p"))
	} else {
		e.Expect = opCount("attention", 0)
	}
	return e
}

func genElementwise(t *rapid.T) Entry {
	dt := rapid.SampledFrom([]numerics.DType{numerics.F32, numerics.F16, numerics.BF16}).Draw(t, "dtype")
	second, output, bcast := flip(t, "second-reader"), flip(t, "graph-output"), flip(t, "broadcast-producer")
	r, c := rapid.IntRange(2, 40).Draw(t, "rows"), rapid.IntRange(1, 40).Draw(t, "cols")
	unary := []string{"relu", "exp", "tanh", "sigmoid", "neg", "abs", "silu"}
	u1, u2 := rapid.SampledFrom(unary).Draw(t, "first"), rapid.SampledFrom(unary).Draw(t, "second")
	e := Entry{Pass: FuseElementwise, Rewrite: !(second || output || bcast), Bitwise: true,
		Name: fmt.Sprintf("fuse-elementwise/gen/%s+%s/%s", u1, u2, dt)}
	e.Build = func(b *graph.Builder) {
		xs := []int{r, c}
		if bcast {
			xs = []int{1, c}
		}
		a := b.Named("a", u1, nil, b.Input("x", dt, xs...))
		var z *graph.Value
		if bcast {
			z = b.Named("z", "add", nil, a, b.Input("y", dt, r, c))
		} else {
			z = b.Named("z", u2, nil, a)
		}
		outs := []*graph.Value{z}
		if output {
			outs = append(outs, a)
		}
		if second {
			outs = append(outs, b.Named("rd", "reduce_sum", graph.Attrs{"axes": graph.Ints(1)}, a))
		}
		b.Output(outs...)
	}
	if e.Rewrite {
		e.Expect = fused("a", "z")
	} else {
		e.Expect = apart("a", "z")
	}
	return e
}

func genCanonical(t *rapid.T) Entry {
	dt := rapid.SampledFrom([]numerics.DType{numerics.F32, numerics.F16, numerics.I32}).Draw(t, "dtype")
	n := rapid.IntRange(1, 9).Draw(t, "n")
	kind := rapid.SampledFrom([]string{"cast", "transpose", "reshape", "slice"}).Draw(t, "no-op")
	output := flip(t, "graph-output")
	differs := flip(t, "not-a-no-op") // another dtype, a non-identity perm, ...
	e := Entry{Pass: Canonicalize, Bitwise: true, Name: fmt.Sprintf("canonicalize/gen/%s/%s", kind, dt)}
	if kind == "reshape" || (kind == "slice" && n == 1) {
		differs = false // nothing else to draw: a reshape to [n,-1] and a slice of a 1x1 are no-ops
	}
	e.Rewrite = !output && !differs
	e.Build = func(b *graph.Builder) {
		x := b.Input("x", dt, n, n)
		var y *graph.Value
		switch kind {
		case "cast":
			to := dt
			if differs {
				to = numerics.F64
			}
			y = b.Named("y", "cast", graph.Attrs{"to": graph.DTypeAttr(to)}, x)
		case "transpose":
			perm := graph.Ints(0, 1)
			if differs {
				perm = graph.Ints(1, 0)
			}
			y = b.Named("y", "transpose", graph.Attrs{"perm": perm}, x)
		case "reshape":
			y = b.Named("y", "reshape", graph.Attrs{"shape": graph.Ints(int64(n), -1)}, x)
		case "slice":
			end := int64(n)
			if differs {
				end--
			}
			y = b.Named("y", "slice", graph.Attrs{"starts": graph.Ints(0, 0), "ends": graph.Ints(int64(n), end)}, x)
		}
		if output {
			b.Output(y)
			return
		}
		b.Output(b.Named("z", "abs", nil, y))
	}
	e.Expect = func(dump string) error {
		if e.Rewrite {
			return noNode("y")(dump)
		}
		return hasNode("y", kind)(dump)
	}
	return e
}
