// Package tile is Tessera's Tile IR: per-kernel programs over 2-D tiles that every backend
// executes with the same semantics, so a tiling bug shows up on the CPU in CI, not only on a GPU.
//
// Execution model. A Kernel runs its Body once per grid point (pid0, pid1, ...). Grid points are
// independent: they write disjoint output elements, so any execution order gives the same bits.
// Within a grid point, instructions run in order; For loops run their iterations in increasing
// order. Registers hold 2-D tiles of float64 values; each arithmetic instruction rounds its
// result to the instruction's DType (f32 math is exact f32 math, ints wrap), so the float64
// register file is a representation, not extra precision.
package tile

import (
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Reg names a tile register of a kernel (0 .. Kernel.NumRegs-1).
type Reg int

// Var is an integer index variable: grid ids are Vars 0..len(Grid)-1, loop variables follow.
type Var int

// Term is Coef*Var.
type Term struct {
	Var  Var
	Coef int
}

// Expr is an affine integer expression Const + sum(Terms).
type Expr struct {
	Const int
	Terms []Term
}

// C is a constant expression.
func C(c int) Expr { return Expr{Const: c} }

// V is coef*v.
func V(v Var, coef int) Expr { return Expr{Terms: []Term{{Var: v, Coef: coef}}} }

// Plus returns e + f.
func (e Expr) Plus(f Expr) Expr {
	return Expr{Const: e.Const + f.Const, Terms: append(append([]Term{}, e.Terms...), f.Terms...)}
}

// Eval evaluates e with vars[i] the value of Var i.
func (e Expr) Eval(vars []int) int {
	s := e.Const
	for _, t := range e.Terms {
		s += t.Coef * vars[t.Var]
	}
	return s
}

// Access addresses a 2-D tile inside an N-D strided buffer. The tile has Rows x Cols elements;
// element (r, c) has row index i = RowStart+r and col index j = ColStart+c. The row index is
// unravelled row-major over RowDims and dotted with RowStrides, the col index likewise over
// ColDims/ColStrides; the element's offset in the buffer is Base + rowOffset(i) + colOffset(j).
// A stride of 0 broadcasts. Mask: elements with i >= prod(RowDims) or j >= prod(ColDims) are
// not read (they read Fill) and not written. Without Mask every element is accessed at its
// computed offset; a CPU backend then reads whatever lies there (NaN outside the buffer) and
// writes there (dropped outside the buffer), as unguarded GPU code would.
type Access struct {
	Param      int // index into Kernel.Params
	Base       Expr
	RowDims    []int
	RowStrides []int
	ColDims    []int
	ColStrides []int
	RowStart   Expr
	ColStart   Expr
	Rows, Cols int
	Mask       bool
}

// Instr is one Tile IR instruction.
type Instr interface{ isInstr() }

// Full sets Dst to a Rows x Cols tile of Value.
type Full struct {
	Dst        Reg
	Rows, Cols int
	Value      float64
}

// Load reads a tile, decoding the parameter's dtype exactly; masked-off elements get Fill.
type Load struct {
	Dst  Reg
	At   Access
	Fill float64
}

// Store writes Src (shape Rows x Cols of the access) encoding to the parameter's dtype with
// numerics.Encode (round to nearest even, fp8 saturating).
type Store struct {
	Src Reg
	At  Access
}

// Copy moves element bit patterns from one buffer to another of the same dtype without
// decoding them: what data movement (transpose, reshape, slice, concat) needs, since a decode
// and re-encode would canonicalise NaN payloads and saturate fp8 e5m2 ±Inf to ±max. Element
// (r, c) of From goes to element (r, c) of To; an element masked off in either access is not
// written. An unmasked From element outside its buffer writes the dtype's canonical NaN (what
// a Load would read there, stored).
type Copy struct {
	From, To Access
}

// UnaryOp names an elementwise function of one tile.
type UnaryOp string

const (
	Neg      UnaryOp = "neg"
	Abs      UnaryOp = "abs"
	Relu     UnaryOp = "relu"
	Exp      UnaryOp = "exp"
	Log      UnaryOp = "log"
	Sqrt     UnaryOp = "sqrt"
	Rsqrt    UnaryOp = "rsqrt"
	Tanh     UnaryOp = "tanh"
	Sigmoid  UnaryOp = "sigmoid"
	Silu     UnaryOp = "silu"
	GeluErf  UnaryOp = "gelu_erf"
	GeluTanh UnaryOp = "gelu_tanh"
	Recip    UnaryOp = "recip"
	Sign     UnaryOp = "sign" // -1, 0, +1; ±0 -> +0; NaN stays NaN
	Erf      UnaryOp = "erf"
)

// Unary sets Dst = op(Src), computed in float64 and rounded to DType.
type Unary struct {
	Dst, Src Reg
	Op       UnaryOp
	DType    numerics.DType
}

// BinaryOp names an elementwise function of two tiles.
type BinaryOp string

const (
	Add BinaryOp = "add"
	Sub BinaryOp = "sub"
	Mul BinaryOp = "mul"
	Div BinaryOp = "div"
	Max BinaryOp = "max"
	Min BinaryOp = "min"
	// DivTrunc and DivFloor are torch.div's rounding modes. Floats: the quotient is computed in
	// DType (f64 or f32; narrower DTypes compute in f32, and DivTrunc rounds the f32 quotient to
	// an f16 or bf16 DType first), then rounded toward zero (DivTrunc, as torch) or to the exact floor of a/b (DivFloor, the
	// result of torch's fmod-based algorithm: 1 floor-div 0.1 is 9); b = 0 gives a/b, an
	// infinite a gives NaN (DivFloor). Integers: exact, x/0 = 0, wrapped.
	DivTrunc BinaryOp = "div_trunc"
	DivFloor BinaryOp = "div_floor"
)

// Binary sets Dst = A op B rounded to DType. A and B broadcast: a dimension of size 1 stretches
// (so [R,C] op [R,1], [1,C] or [1,1] are allowed). Max/Min propagate NaN. For integer DTypes the
// result wraps at the dtype's width.
type Binary struct {
	Dst, A, B Reg
	Op        BinaryOp
	DType     numerics.DType
}

// Round sets Dst = numerics.Round(DType, Src): the cast semantics (RNE for floats with fp8
// saturation, truncate-and-saturate to ints, x != 0 to bool). Fused kernels use it to give
// every intermediate graph value its declared dtype. Wrap marks a cast whose source is an
// integer: an integer DType then wraps (two's complement) instead of saturating, as the
// cast op defines int -> int.
type Round struct {
	Dst, Src Reg
	DType    numerics.DType
	Wrap     bool
}

// ReduceOp names a reduction.
type ReduceOp string

const (
	Sum    ReduceOp = "sum"
	MaxRed ReduceOp = "max"
)

// Reduce sets Dst[r,0] to the reduction of row r of Src (an [R,C] tile -> [R,1]), folding the
// columns strictly left to right, rounding each step to DType. Max propagates NaN.
type Reduce struct {
	Dst, Src Reg
	Op       ReduceOp
	DType    numerics.DType
}

// MMA sets Acc += A x B for A [M,K], B [K,N], Acc [M,N]. For each output element the K products
// are added in increasing k order, each product and each sum rounded to AccDType (f32: plain f32
// arithmetic without fused multiply-add; 16-bit accumulators round after every add).
type MMA struct {
	Acc, A, B Reg
	AccDType  numerics.DType
}

// OnlineSoftmax advances the running softmax state of each row by one tile of scores X [R,C].
// M (running max) and L (running sum of exp) are [R,1] and updated in place; P [R,C] and Alpha
// [R,1] are outputs:
//
//	mNew  = max(M, rowmax(X))
//	Alpha = exp(M - mNew), or 0 where M = -Inf, or 1 where mNew = -Inf
//	P     = exp(X - mNew), or 0 where mNew = -Inf
//	L     = L*Alpha + rowsum(P)   (left to right)
//	M     = mNew
//
// all rounded to DType. Initialise M to -Inf and L to 0.
type OnlineSoftmax struct {
	M, L, X, P, Alpha Reg
	DType             numerics.DType
}

// MaskScores sets Dst = Src, with -Inf where the key index j = ColStart+c is >= ColLimit
// (a boundary mask) or, when Causal, where j > i for query index i = RowStart+r.
// KeysOnRows is the transposed tile of the attention backward (rows are keys, columns
// queries): then -Inf where the query index ColStart+c >= ColLimit or, when Causal, where the
// key index RowStart+r is greater than the query index.
type MaskScores struct {
	Dst, Src           Reg
	RowStart, ColStart Expr
	ColLimit           int
	Causal             bool
	KeysOnRows         bool
}

// MaskCols sets Dst = Src with Value wherever the col index j = ColStart+c is >= ColLimit,
// so padding columns of a ragged last tile drop out of a following reduction.
type MaskCols struct {
	Dst, Src Reg
	ColStart Expr
	ColLimit int
	Value    float64
}

// For runs Body for Var = 0 .. Count-1 in increasing order.
type For struct {
	Var   Var
	Count int
	Body  []Instr
}

func (Full) isInstr()          {}
func (Load) isInstr()          {}
func (Store) isInstr()         {}
func (Copy) isInstr()          {}
func (Unary) isInstr()         {}
func (Binary) isInstr()        {}
func (Round) isInstr()         {}
func (Reduce) isInstr()        {}
func (MMA) isInstr()           {}
func (OnlineSoftmax) isInstr() {}
func (MaskScores) isInstr()    {}
func (MaskCols) isInstr()      {}
func (For) isInstr()           {}

// Param is a kernel parameter: a program buffer and how the kernel uses it.
type Param struct {
	Buffer int // index into the program's buffers
	Name   string
	DType  numerics.DType
	Len    int // elements
	Output bool
}

// Kernel is one launch: a grid of independent tile programs.
type Kernel struct {
	Name string
	// Op is the graph op of a kernel that exists for one op alone (conv1d, conv2d), so that a
	// code generator can refuse an op it has not been validated on by name; "" otherwise.
	Op      string
	Grid    []int
	Params  []Param
	NumRegs int
	NumVars int // grid vars + loop vars
	Body    []Instr
}
