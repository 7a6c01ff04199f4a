package devreduce

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/devreduce/ptxsim"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// hostReduce is engine/dist's own answer: n inproc ranks all-reduce their buffers in
// deterministic mode, which is what every transport must reproduce bit for bit.
func hostReduce(t *testing.T, dt numerics.DType, op dist.RedOp, ins [][]byte) []byte {
	t.Helper()
	n := len(ins)
	ts := dist.NewInproc(n)
	outs := make([][]byte, n)
	errsOut := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		outs[r] = make([]byte, len(ins[r]))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dist.NewComm(ts[r], dist.Options{Mode: dist.Deterministic})
			errsOut[r] = c.AllReduce(context.Background(), dt, ins[r], outs[r], op)
		}()
	}
	wg.Wait()
	for r, err := range errsOut {
		if err != nil {
			t.Fatalf("host all_reduce rank %d: %v", r, err)
		}
	}
	return outs[0]
}

// simReduce runs the generated kernel in ptxsim with outputs in a buffer of exactly count
// elements (a store past it is a fault) on a small grid, so the grid-stride loop wraps.
func simReduce(t *testing.T, k *Kernel, ins [][]byte, grid, threads int) []byte {
	t.Helper()
	kern, err := ptxsim.Parse(k.PTX)
	if err != nil {
		t.Fatalf("%s: parse: %v", k.Entry, err)
	}
	var mem ptxsim.Memory
	size := k.DType.Size()
	count := len(ins[0]) / size
	ptrs := make([]uint64, len(ins))
	for i, b := range ins {
		ptrs[i] = mem.Map(append([]byte(nil), b...))
	}
	out := bytes.Repeat([]byte{0xA5}, count*size)
	args, err := k.Args(mem.Map(out), count, ptrs)
	if err != nil {
		t.Fatal(err)
	}
	if err := kern.Run(&mem, grid, threads, args); err != nil {
		t.Fatalf("%s: %v", k.Entry, err)
	}
	return out
}

// specials are the bit patterns that make reductions interesting: zeros of both signs,
// infinities, NaNs with payloads and signs, the extremes, subnormals.
func specials(dt numerics.DType) []uint64 {
	switch dt {
	case numerics.F64:
		return []uint64{0, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0x7FF0000000000001,
			0xFFF8000000000123, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 1, 0x800FFFFFFFFFFFFF, 0x3FF0000000000000}
	case numerics.F32:
		return []uint64{0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFC00123,
			0x7F7FFFFF, 0xFF7FFFFF, 1, 0x807FFFFF, 0x3F800000}
	case numerics.F16:
		return []uint64{0, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE12, 0x7BFF, 0xFBFF, 1, 0x83FF, 0x3C00}
	case numerics.BF16:
		return []uint64{0, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFC1, 0x7F7F, 0xFF7F, 1, 0x807F, 0x3F80}
	case numerics.F8E4M3:
		return []uint64{0, 0x80, 0x7F, 0xFF, 0x7E, 0xFE, 1, 0x87, 0x38}
	case numerics.F8E5M2:
		return []uint64{0, 0x80, 0x7C, 0xFC, 0x7E, 0x7D, 0xFF, 0x7B, 0xFB, 1, 0x83, 0x3C}
	case numerics.I8:
		return []uint64{0, 0x7F, 0x80, 0xFF, 1}
	case numerics.I32:
		return []uint64{0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1}
	}
	return nil
}

// randomInputs fills n buffers of count elements: a third ordinary values (sums that round),
// a third raw bit patterns, a third specials.
func randomInputs(rng *rand.Rand, dt numerics.DType, n, count int) [][]byte {
	size := dt.Size()
	sp := specials(dt)
	ins := make([][]byte, n)
	for r := range ins {
		b := make([]byte, count*size)
		for i := range count {
			var v uint64
			switch rng.IntN(3) {
			case 0:
				if dt.IsFloat() {
					v = numerics.Encode(dt, rng.NormFloat64()*math.Pow(2, float64(rng.IntN(9)-4)))
				} else {
					v = uint64(rng.IntN(201) - 100)
				}
			case 1:
				v = rng.Uint64()
			default:
				v = sp[rng.IntN(len(sp))]
			}
			for k := range size {
				b[i*size+k] = byte(v >> (8 * k))
			}
		}
		ins[r] = b
	}
	return ins
}

func TestKernelBitsEqualHostReduction(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2026))
	for _, dt := range Dtypes {
		for _, op := range Ops {
			for _, n := range []int{1, 2, 3, 4, 7} {
				for _, count := range []int{0, 1, 5, 97} {
					name := fmt.Sprintf("%s/%s/n%d/count%d", dt, op, n, count)
					k, err := Generate(dt, op, n)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					ins := randomInputs(rng, dt, n, count)
					want := hostReduce(t, dt, op, ins)
					got := simReduce(t, k, ins, 3, 8)
					if !bytes.Equal(got, want) {
						size := dt.Size()
						for i := 0; i < count; i++ {
							g, w := got[i*size:(i+1)*size], want[i*size:(i+1)*size]
							if !bytes.Equal(g, w) {
								var in []string
								for _, b := range ins {
									in = append(in, fmt.Sprintf("%x", b[i*size:(i+1)*size]))
								}
								t.Errorf("%s: element %d: kernel %x, host %x (inputs little-endian %v)", name, i, g, w, in)
								break
							}
						}
					}
				}
			}
		}
	}
}

// Every finite pair of 8- and 16-bit floats is too many for CI; every 8-bit pair is not: the
// fp8 sums, which round through the satfinite conversion, are checked exhaustively for n=2.
func TestFP8SumExhaustive(t *testing.T) {
	for _, dt := range []numerics.DType{numerics.F8E4M3, numerics.F8E5M2} {
		a, b := make([]byte, 256*256), make([]byte, 256*256)
		for i := range 256 * 256 {
			a[i], b[i] = byte(i), byte(i>>8)
		}
		for _, op := range []dist.RedOp{dist.Sum, dist.Avg} {
			k, err := Generate(dt, op, 2)
			if err != nil {
				t.Fatal(err)
			}
			want := hostReduce(t, dt, op, [][]byte{a, b})
			got := simReduce(t, k, [][]byte{a, b}, 64, 32)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s %s: %02x + %02x: kernel %02x, host %02x", dt, op, a[i], b[i], got[i], want[i])
				}
			}
		}
	}
}

func TestLargeNUsesEveryInputInOrder(t *testing.T) {
	// With n = MaxInputs, input k holds 2^-k scaled so that the order of the adds shows in the
	// rounding: a reversed or skipped input changes the f32 result.
	n := MaxInputs
	ins := make([][]byte, n)
	for k := range ins {
		v := float32(math.Ldexp(1+float64(k)/7, 24-k%30))
		ins[k] = []byte{0, 0, 0, 0, 0, 0, 0, 0}
		bits := math.Float32bits(v)
		for i := range 2 {
			b := bits
			if i == 1 {
				b = math.Float32bits(-v / 3)
			}
			ins[k][4*i], ins[k][4*i+1], ins[k][4*i+2], ins[k][4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
		}
	}
	k, err := Generate(numerics.F32, dist.Sum, n)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := simReduce(t, k, ins, 1, 4), hostReduce(t, numerics.F32, dist.Sum, ins); !bytes.Equal(got, want) {
		t.Fatalf("n=%d: kernel %x, host %x", n, got, want)
	}
}

var (
	regDecl = regexp.MustCompile(`^\.reg \.(\w+) %(\w+)<(\d+)>;$`)
	regUse  = regexp.MustCompile(`%([a-z]+)(\d+)\b`)
)

// The text is checked for what ptxas would reject before a GPU ever sees it: header lines,
// every register declared with a type and a range covering its uses, every opcode in the table
// and available on the kernel's target, the parameter list matching Args.
func TestKernelTextWellFormed(t *testing.T) {
	for _, dt := range Dtypes {
		for _, op := range Ops {
			for _, n := range []int{1, 2, 8, MaxInputs} {
				k, err := Generate(dt, op, n)
				if err != nil {
					t.Fatal(err)
				}
				checkText(t, k)
			}
		}
	}
}

func checkText(t *testing.T, k *Kernel) {
	t.Helper()
	lines := strings.Split(k.PTX, "\n")
	if lines[0] != ".version "+PTXVersion || lines[1] != ".target "+k.Arch || lines[2] != ".address_size 64" {
		t.Fatalf("%s: header %q", k.Entry, lines[:3])
	}
	if strings.Count(k.PTX, "{") != 1 || strings.Count(k.PTX, "}") != 1 {
		t.Errorf("%s: braces", k.Entry)
	}
	declared := map[string]int{}
	for _, l := range lines {
		if m := regDecl.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			declared[m[2]], _ = strconv.Atoi(m[3])
		}
	}
	archOf := func(s string) int { v, _ := strconv.Atoi(strings.TrimPrefix(s, "sm_")); return v }
	body := false
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "{" {
			body = true
			continue
		}
		if !body || l == "}" || l == "" || strings.HasPrefix(l, ".reg") || strings.HasSuffix(l, ":") {
			continue
		}
		ins := l
		if strings.HasPrefix(ins, "@") {
			_, ins, _ = strings.Cut(ins, " ")
		}
		opcode, _, _ := strings.Cut(strings.TrimSuffix(ins, ";"), " ")
		need, ok := Opcodes[opcode]
		if !ok {
			t.Errorf("%s: opcode %s not in the table", k.Entry, opcode)
		} else if archOf(need) > archOf(k.Arch) {
			t.Errorf("%s: %s needs %s, the module targets %s", k.Entry, opcode, need, k.Arch)
		}
		for _, m := range regUse.FindAllStringSubmatch(l, -1) {
			if m[1] == "ctaid" || m[1] == "ntid" || m[1] == "tid" || m[1] == "nctaid" {
				continue
			}
			i, _ := strconv.Atoi(m[2])
			if lim, ok := declared[m[1]]; !ok || i >= lim {
				t.Errorf("%s: register %%%s%d used but declared %%%s<%d>", k.Entry, m[1], i, m[1], lim)
			}
		}
	}
	kern, err := ptxsim.Parse(k.PTX)
	if err != nil {
		t.Fatal(err)
	}
	if kern.Entry != k.Entry || len(kern.Params) != k.N+2 {
		t.Errorf("%s: parsed entry %s with %d params", k.Entry, kern.Entry, len(kern.Params))
	}
}

func TestCheckRefusesWithCodes(t *testing.T) {
	for _, c := range []struct {
		dt   numerics.DType
		op   dist.RedOp
		n    int
		code errs.Code
	}{
		{numerics.Bool, dist.Sum, 2, errs.DType},
		{numerics.F32, dist.RedNone, 2, errs.Input},
		{numerics.F32, dist.Sum, 0, errs.Unsupported},
		{numerics.F32, dist.Sum, MaxInputs + 1, errs.Unsupported},
	} {
		if _, err := Generate(c.dt, c.op, c.n); errs.CodeOf(err) != c.code {
			t.Errorf("Generate(%s, %s, %d) = %v, want %s", c.dt, c.op, c.n, err, c.code)
		}
	}
	k, _ := Generate(numerics.F32, dist.Sum, 2)
	if _, err := k.Args(0, 4, []uint64{1}); err == nil {
		t.Error("Args with one pointer for n=2 passed")
	}
	if a, _ := Generate(numerics.F32, dist.Sum, 2); a != k {
		t.Error("Generate does not cache")
	}
}

func TestGrid(t *testing.T) {
	for _, c := range []struct{ count, sms, want int }{{0, 132, 0}, {1, 132, 1}, {256, 132, 1}, {257, 132, 2}, {1 << 30, 132, 1056}} {
		if g := Grid(c.count, c.sms); g != c.want {
			t.Errorf("Grid(%d, %d) = %d, want %d", c.count, c.sms, g, c.want)
		}
	}
}
