package graph

// OpAdder appends one node and returns its output value (typed): Builder.Op, or a compiler
// pass's inserter. The helpers below build with either, so a VJP rule and a rewrite pass
// share one way to pad and crop.
type OpAdder func(op string, attrs Attrs, ins ...*Value) *Value

// SliceAxis is v[s:e] on axis ax.
func SliceAxis(add OpAdder, v *Value, ax, s, e int) *Value {
	st, en := make([]int64, v.Type.Rank()), ints64(v.Type.Shape)
	st[ax], en[ax] = int64(s), int64(e)
	return add("slice", Attrs{"starts": Ints(st...), "ends": Ints(en...)}, v)
}

// PadAxis gives axis ax of v `before` elements in front and `after` behind: zeros where the
// count is positive (blocks of a full_like of v, the last one cropped, one concat), a crop
// where it is negative. v's axis must not be empty when something is added.
func PadAxis(add OpAdder, v *Value, ax, before, after int) *Value {
	have := v.Type.Shape[ax]
	lo, hi := max(0, -before), have-max(0, -after)
	if lo > 0 || hi < have {
		v = SliceAxis(add, v, ax, lo, max(lo, hi))
		have = max(0, hi-lo)
	}
	before, after = max(0, before), max(0, after)
	if (before == 0 && after == 0) || have == 0 {
		return v // nothing to add, or no block to make zeros from: the caller's types then disagree
	}
	var zero *Value
	blocks := func(count int) []*Value {
		var out []*Value
		for rest := count; rest > 0; rest -= min(rest, have) {
			if zero == nil {
				zero = add("full_like", Attrs{"value": Float(0)}, v)
			}
			if rest >= have {
				out = append(out, zero)
			} else {
				out = append(out, SliceAxis(add, zero, ax, 0, rest))
			}
		}
		return out
	}
	pieces := append(blocks(before), v)
	pieces = append(pieces, blocks(after)...)
	return add("concat", Attrs{"axis": Int(int64(ax))}, pieces...)
}
