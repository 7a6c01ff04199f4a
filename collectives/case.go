package collectives

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Case is one collective call: op, reduction, dtype, element count and root. The world size,
// mode and transport belong to the run (Config, the communicator), so one Case list runs on
// every world and transport and the rows line up.
type Case struct {
	Op    Op
	Red   dist.RedOp // dist.RedNone for the data-movement ops
	DType numerics.DType
	// Count is the elements of the op's whole buffer, nccl-tests' "count": the buffer of
	// all_reduce and broadcast, all_gather's receive buffer, reduce_scatter's send buffer,
	// all_to_all's buffer. Ops that give each rank a chunk round it down to a multiple of the
	// world size, as nccl-tests does (Buffers).
	Count int
	Root  int // broadcast's root; 0 for the other ops
}

// Name is the case's stable name: op/dtype/redop/count, with the root for broadcast
// ("broadcast/f32/root1/1021"). It does not depend on the world size.
func (c Case) Name() string {
	mid := c.Red.String()
	switch {
	case c.Op.Rooted():
		mid = "root" + strconv.Itoa(c.Root)
	case !c.Op.Reduces():
		mid = "none"
	}
	return fmt.Sprintf("%s/%s/%s/%d", c.Op, c.DType, mid, c.Count)
}

// Buffers returns, for world n, the elements of each rank's send and receive buffers and the
// effective count (Count rounded down for the ops that split their buffer).
func (c Case) Buffers(n int) (send, recv, count int) {
	if c.Op.Splits() {
		per := c.Count / n
		switch c.Op {
		case AllGather:
			return per, per * n, per * n
		case ReduceScatter:
			return per * n, per, per * n
		}
		return per * n, per * n, per * n
	}
	return c.Count, c.Count, c.Count
}

// Bytes is nccl-tests' "size" of the case on n ranks: the effective count times the element
// size.
func (c Case) Bytes(n int) int64 {
	_, _, count := c.Buffers(n)
	return int64(count) * int64(c.DType.Size())
}

// check validates the case for world n; errors are E_INPUT or E_DTYPE.
func (c Case) check(n int) error {
	switch {
	case !c.Op.valid():
		return errs.New(errs.Input, "collectives: unknown op %q", c.Op)
	case !c.DType.Valid() || c.DType == numerics.Bool:
		return errs.New(errs.DType, "collectives %s: dtype %s cannot be used (want a float or int dtype)", c.Name(), c.DType)
	case c.Count < 0:
		return errs.New(errs.Input, "collectives %s: negative count", c.Name())
	case c.Op.Reduces() && (c.Red < dist.Sum || c.Red > dist.Avg):
		return errs.New(errs.Input, "collectives %s: %s needs a reduction (sum, max, min, avg)", c.Name(), c.Op)
	case !c.Op.Reduces() && c.Red != dist.RedNone:
		return errs.New(errs.Input, "collectives %s: %s takes no reduction", c.Name(), c.Op)
	case c.Root < 0 || c.Root >= n || (!c.Op.Rooted() && c.Root != 0):
		return errs.New(errs.Input, "collectives %s: root %d outside world %d", c.Name(), c.Root, n)
	case c.Bytes(n) > MaxBytes:
		return errs.New(errs.Input, "collectives %s: %d bytes exceed the %d-byte limit of one case", c.Name(), c.Bytes(n), int64(MaxBytes))
	}
	return nil
}

// MaxBytes bounds one case's buffer: 1 GiB, far above the 64 MiB the CPU runs use.
const MaxBytes = 1 << 30

// DTypes lists every dtype the checks run, in the tables' order.
var DTypes = []numerics.DType{numerics.F64, numerics.F32, numerics.BF16, numerics.F16, numerics.I32, numerics.I8,
	numerics.F8E4M3, numerics.F8E5M2}

var dtypeAliases = map[string]numerics.DType{
	"double": numerics.F64, "float": numerics.F32, "half": numerics.F16, "bfloat16": numerics.BF16,
	"int": numerics.I32, "e4m3": numerics.F8E4M3, "e5m2": numerics.F8E5M2,
}

// ParseDTypes reads dtype names as the engine prints them (f64 f32 bf16 f16 int32 int8
// fp8e4m3 fp8e5m2) or as nccl-tests does (double float half bfloat16 int); "fp8" is both fp8
// formats and "all" every dtype. Empty means f32, nccl-tests' default.
func ParseDTypes(names []string) ([]numerics.DType, error) {
	names = splitList(names)
	if len(names) == 0 {
		return []numerics.DType{numerics.F32}, nil
	}
	var out []numerics.DType
	for _, n := range names {
		switch n {
		case "all":
			return DTypes, nil
		case "fp8":
			out = appendNew(appendNew(out, numerics.F8E4M3), numerics.F8E5M2)
			continue
		}
		dt, ok := dtypeAliases[n]
		if !ok {
			var err error
			if dt, err = numerics.Parse(n); err != nil {
				return nil, err
			}
		}
		if dt == numerics.Bool {
			return nil, errs.New(errs.DType, "collectives: bool cannot be reduced or checked against a float64 reference (want a float or int dtype)")
		}
		out = appendNew(out, dt)
	}
	return out, nil
}

// ParseSize reads a byte size as nccl-tests' -b/-e take it: a number with an optional K, M or
// G suffix (powers of 1024; "KiB", "MB" and the like are read the same way).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "i")
	if t != "" {
		switch t[len(t)-1] {
		case 'K', 'k':
			mult = 1 << 10
		case 'M', 'm':
			mult = 1 << 20
		case 'G', 'g':
			mult = 1 << 30
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > MaxBytes/mult {
		return 0, errs.New(errs.Input, "size %q: want a byte count like 8, 64K or 32M, at most 1G", s)
	}
	return v * mult, nil
}

// Sweep is nccl-tests' size scan: min, min*factor, ... up to max inclusive. factor must be
// at least 2; min 0 gives 0 and then continues from 1.
func Sweep(min, max int64, factor int) ([]int64, error) {
	switch {
	case factor < 2:
		return nil, errs.New(errs.Input, "size factor -f %d: want at least 2", factor)
	case min < 0 || max < min:
		return nil, errs.New(errs.Input, "sizes -b %d -e %d: want 0 <= MIN <= MAX", min, max)
	}
	var out []int64
	s := min
	if s == 0 {
		out = append(out, 0)
		s = 1
	}
	for ; s <= max; s *= int64(factor) {
		out = append(out, s)
		if s > math.MaxInt64/int64(factor) {
			break
		}
	}
	return out, nil
}

// DefaultCounts are the element counts every run adds to its size sweep: zero, one and
// primes, which no world size above 1 divides.
var DefaultCounts = []int{0, 1, 7, 1021}

// Matrix is a cross product of cases: every op x reduction (for the reducing ops) x dtype
// x count, where the counts are Counts followed by Sizes (bytes) turned into elements of
// each dtype.
type Matrix struct {
	Ops    []Op
	RedOps []dist.RedOp
	DTypes []numerics.DType
	Counts []int   // element counts
	Sizes  []int64 // byte sizes
	Root   int     // broadcast's root
}

// Cases lists the matrix's cases for world n, ops in Ops order, sizes ascending. Every
// case's Count is already the effective count for n (Buffers); a count that repeats an
// earlier one of the same op, reduction and dtype is dropped, so a table never shows the
// same row twice.
func (m Matrix) Cases(n int) []Case {
	var out []Case
	for _, op := range Ops {
		if !contains(m.Ops, op) {
			continue
		}
		reds := []dist.RedOp{dist.RedNone}
		if op.Reduces() {
			reds = m.RedOps
		}
		for _, dt := range m.DTypes {
			for _, red := range reds {
				seen := map[int]bool{}
				var counts []int
				counts = append(counts, m.Counts...)
				for _, b := range m.Sizes {
					counts = append(counts, int(b/int64(dt.Size())))
				}
				var group []Case
				for _, cnt := range counts {
					c := Case{Op: op, Red: red, DType: dt, Count: cnt}
					if op.Rooted() {
						c.Root = m.Root
					}
					_, _, eff := c.Buffers(n)
					if seen[eff] {
						continue
					}
					seen[eff] = true
					c.Count = eff
					group = append(group, c)
				}
				sortByBytes(group, n)
				out = append(out, group...)
			}
		}
	}
	return out
}

func sortByBytes(cs []Case, n int) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Bytes(n) < cs[j-1].Bytes(n); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
