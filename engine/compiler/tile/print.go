package tile

import (
	"fmt"
	"strings"
)

func (e Expr) String() string {
	var parts []string
	for _, t := range e.Terms {
		switch t.Coef {
		case 0:
			continue
		case 1:
			parts = append(parts, fmt.Sprintf("v%d", t.Var))
		default:
			parts = append(parts, fmt.Sprintf("%d*v%d", t.Coef, t.Var))
		}
	}
	if e.Const != 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprint(e.Const))
	}
	return strings.Join(parts, "+")
}

func (a Access) String() string {
	mask := "mask"
	if !a.Mask {
		mask = "nomask"
	}
	return fmt.Sprintf("p%d[base=%s rows=%v/%v@%s cols=%v/%v@%s] %dx%d %s",
		a.Param, a.Base, a.RowDims, a.RowStrides, a.RowStart, a.ColDims, a.ColStrides, a.ColStart, a.Rows, a.Cols, mask)
}

// Format prints a kernel as text: the --dump=tile view and what schedule hashes are read from.
func Format(k *Kernel) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel %s grid=%v regs=%d vars=%d\n", k.Name, k.Grid, k.NumRegs, k.NumVars)
	for i, p := range k.Params {
		dir := "in"
		if p.Output {
			dir = "out"
		}
		fmt.Fprintf(&b, "  param p%d %s %%%s %s[%d] buf=%d\n", i, dir, p.Name, p.DType, p.Len, p.Buffer)
	}
	formatBody(&b, k.Body, "  ")
	return b.String()
}

func formatBody(b *strings.Builder, body []Instr, ind string) {
	for _, in := range body {
		switch x := in.(type) {
		case Full:
			fmt.Fprintf(b, "%sr%d = full %dx%d %g\n", ind, x.Dst, x.Rows, x.Cols, x.Value)
		case Load:
			fmt.Fprintf(b, "%sr%d = load %s fill=%g\n", ind, x.Dst, x.At, x.Fill)
		case Store:
			fmt.Fprintf(b, "%sstore %s <- r%d\n", ind, x.At, x.Src)
		case Copy:
			fmt.Fprintf(b, "%scopy %s <- %s (bits)\n", ind, x.To, x.From)
		case Unary:
			fmt.Fprintf(b, "%sr%d = %s.%s r%d\n", ind, x.Dst, x.Op, x.DType, x.Src)
		case Binary:
			fmt.Fprintf(b, "%sr%d = %s.%s r%d, r%d\n", ind, x.Dst, x.Op, x.DType, x.A, x.B)
		case Round:
			op := "round"
			if x.Wrap {
				op = "wrap"
			}
			fmt.Fprintf(b, "%sr%d = %s.%s r%d\n", ind, x.Dst, op, x.DType, x.Src)
		case Reduce:
			fmt.Fprintf(b, "%sr%d = reduce_%s.%s r%d (rows, left to right)\n", ind, x.Dst, x.Op, x.DType, x.Src)
		case MMA:
			fmt.Fprintf(b, "%sr%d += mma.acc=%s r%d, r%d\n", ind, x.Acc, x.AccDType, x.A, x.B)
		case OnlineSoftmax:
			fmt.Fprintf(b, "%sr%d, r%d = online_softmax.%s state(m=r%d, l=r%d) r%d\n", ind, x.P, x.Alpha, x.DType, x.M, x.L, x.X)
		case MaskScores:
			fmt.Fprintf(b, "%sr%d = mask_scores r%d rows@%s cols@%s limit=%d causal=%t", ind, x.Dst, x.Src, x.RowStart, x.ColStart, x.ColLimit, x.Causal)
			if x.KeysOnRows {
				b.WriteString(" keys-on-rows")
			}
			b.WriteByte('\n')
		case MaskCols:
			fmt.Fprintf(b, "%sr%d = mask_cols r%d cols@%s limit=%d value=%g\n", ind, x.Dst, x.Src, x.ColStart, x.ColLimit, x.Value)
		case FFT:
			fmt.Fprintf(b, "%sr%d = fft.%s.%s r%d n=%d scale=%g (%s)\n", ind, x.Dst, x.Kind, x.DType, x.Src, x.N, x.Scale, x.Op)
		case For:
			fmt.Fprintf(b, "%sfor v%d in 0..%d {\n", ind, x.Var, x.Count)
			formatBody(b, x.Body, ind+"  ")
			fmt.Fprintf(b, "%s}\n", ind)
		default:
			fmt.Fprintf(b, "%s<unknown %T>\n", ind, in)
		}
	}
}
