package collectives_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/collectives"
	"github.com/tessera-qa/tessera-qa/collectives/bitref"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The bitwise specs (issue 22): every collective, mode, reduction, dtype and world size
// against collectives/bitref, which computes the documented result bit for bit from the
// ranks' inputs and shares no code with engine/dist. The specs above compare the engine
// with itself (run to run, transport to transport) and with float64 under a tolerance; these
// compare it with the contract. Labelled "bits" so the mutation check can run only them.

// collective is one call: an op, and for reductions the reduction and the contributions per
// rank (AllReduceMulti when more than one).
type collective struct {
	op    collectives.Op
	red   dist.RedOp
	parts int
	multi bool
	// each: AllReduceEach on the buffer cut into three of unequal sizes (a gradient bucket);
	// each piece must get the bits its own all_reduce gives it.
	each bool
}

func (c collective) String() string {
	s := string(c.op)
	if c.op.Reduces() {
		s += "/" + c.red.String()
	}
	if c.multi {
		s += fmt.Sprintf("/multi%d", c.parts)
	}
	if c.each {
		s += "/each3"
	}
	return s
}

var bitRed = map[dist.RedOp]bitref.Red{dist.Sum: bitref.Sum, dist.Avg: bitref.Avg, dist.Max: bitref.Max, dist.Min: bitref.Min}

// bitCollectives lists every collective of dist that moves or reduces data: all_reduce
// (and AllReduceMulti, two contributions per rank) and reduce_scatter with every reduction,
// all_gather, broadcast, all_to_all.
func bitCollectives() []collective {
	var out []collective
	for _, op := range collectives.Ops {
		if !op.Reduces() {
			out = append(out, collective{op: op, parts: 1})
			continue
		}
		for _, red := range collectives.RedOps {
			out = append(out, collective{op: op, red: red, parts: 1})
		}
	}
	for _, red := range collectives.RedOps {
		out = append(out, collective{op: collectives.AllReduce, red: red, parts: 2, multi: true},
			collective{op: collectives.AllReduce, red: red, parts: 1, each: true})
	}
	return out
}

// refMode is the reference promise for a collective run in mode, or false where the mode
// promises no bits: fast mode's float sums and avgs. Fast max, min and int sums do not depend
// on order, so they owe the deterministic bits.
func refMode(mode dist.Mode, c collective, dt numerics.DType) (bitref.Mode, bool) {
	switch {
	case mode == dist.Exact:
		return bitref.Exact, true
	case mode == dist.Fast && c.op.Reduces() && dt.IsFloat() && (c.red == dist.Sum || c.red == dist.Avg):
		return 0, false
	}
	return bitref.Deterministic, true
}

// runWorld runs one collective on an in-process world of n ranks: inputs[r] are rank r's
// contributions (one buffer for every op but AllReduceMulti). It returns every rank's
// receive buffer, which starts as 0xff bytes (NaN in every float format) so an element the
// collective never writes is wrong.
func runWorld(n int, mode dist.Mode, dt numerics.DType, c collective, root int, inputs [][][]byte) ([][]byte, error) {
	ts := dist.NewInproc(n)
	recvs := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ts[r].Close()
			comm := dist.NewComm(ts[r], dist.Options{Mode: mode, Timeout: 60 * time.Second})
			send := inputs[r][0]
			size := len(send)
			switch c.op {
			case collectives.AllGather:
				size *= n
			case collectives.ReduceScatter:
				size /= n
			}
			recv := make([]byte, size)
			for i := range recv {
				recv[i] = 0xff
			}
			ctx := context.Background()
			switch c.op {
			case collectives.AllReduce:
				if c.each {
					errs[r] = allReduceEach(ctx, comm, dt, send, recv, c.red)
					break
				}
				errs[r] = comm.AllReduceMulti(ctx, dt, inputs[r], recv, c.red)
			case collectives.ReduceScatter:
				errs[r] = comm.ReduceScatter(ctx, dt, send, recv, c.red)
			case collectives.AllGather:
				errs[r] = comm.AllGather(ctx, dt, send, recv)
			case collectives.Broadcast:
				errs[r] = comm.Broadcast(ctx, dt, send, recv, root)
			case collectives.AllToAll:
				errs[r] = comm.AllToAll(ctx, dt, send, recv)
			}
			recvs[r] = recv
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return recvs, nil
}

// allReduceEach reduces send as a bucket of three pieces (a fifth, three tenths, the rest,
// cut on element boundaries) into recv.
func allReduceEach(ctx context.Context, comm *dist.Comm, dt numerics.DType, send, recv []byte, red dist.RedOp) error {
	copy(recv, send)
	count, sz := len(send)/dt.Size(), dt.Size()
	a, b := count/5*sz, count/2*sz
	return comm.AllReduceEach(ctx, dt, [][]byte{recv[:a], recv[a:b], recv[b:]}, red)
}

// want is what every rank must receive, from bitref.
func want(mode bitref.Mode, dt numerics.DType, c collective, root int, inputs [][][]byte) ([][]byte, error) {
	n := len(inputs)
	same := func(b []byte) [][]byte {
		out := make([][]byte, n)
		for r := range out {
			out[r] = b
		}
		return out
	}
	firsts := make([][]byte, n)
	for r := range inputs {
		firsts[r] = inputs[r][0]
	}
	switch c.op {
	case collectives.AllReduce:
		b, err := bitref.AllReduce(mode, dt, bitRed[c.red], inputs)
		return same(b), err
	case collectives.ReduceScatter:
		return bitref.ReduceScatter(mode, dt, bitRed[c.red], firsts)
	case collectives.AllGather:
		return same(bitref.AllGather(firsts)), nil
	case collectives.Broadcast:
		return same(bitref.Broadcast(firsts, root)), nil
	}
	return bitref.AllToAll(dt, firsts)
}

// bitCase is one collective of one family at one size on one world.
type bitCase struct {
	n     int
	mode  dist.Mode
	dt    numerics.DType
	c     collective
	fam   family
	count int // elements per contribution (a multiple of n where the op splits)
	// gatherPer: all_gather sends count/n elements per rank, so its result is count, not
	// n*count (the large cases would otherwise gather n times their size).
	gatherPer bool
}

func (k bitCase) String() string {
	return fmt.Sprintf("%s %s %s %s n=%d count=%d", k.mode, k.c, k.dt, k.fam.name, k.n, k.count)
}

// check runs k and returns the number of wrong elements over all ranks (nccl-tests'
// #wrong, counted bitwise) and the first few of them, described.
func (k bitCase) check() (wrong int, notes []string, err error) {
	rm, ok := refMode(k.mode, k.c, k.dt)
	if !ok {
		return 0, nil, nil
	}
	count := k.count
	switch {
	case k.c.op == collectives.AllGather && k.gatherPer:
		count /= k.n
	case k.c.op.Splits() && k.c.op != collectives.AllGather:
		count -= count % k.n
	}
	// Contribution j of rank r is the family's column r*parts+j, so a multi-part world
	// reduces the same values in the same global order as a world of n*parts ranks.
	cols := inputCache.get(k.fam, k.dt, k.n*k.c.parts, count)
	inputs := make([][][]byte, k.n)
	for r := range inputs {
		inputs[r] = cols[r*k.c.parts : (r+1)*k.c.parts]
	}
	root := k.n - 1
	got, err := runWorld(k.n, k.mode, k.dt, k.c, root, inputs)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", k, err)
	}
	exp, err := want(rm, k.dt, k.c, root, inputs)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: reference: %w", k, err)
	}
	sz := k.dt.Size()
	for r := range got {
		if len(got[r]) != len(exp[r]) {
			return 0, nil, fmt.Errorf("%s: rank %d received %d bytes, want %d", k, r, len(got[r]), len(exp[r]))
		}
		for i := 0; i < len(got[r])/sz; i++ {
			g, w := bitref.Bits(got[r], i, sz), bitref.Bits(exp[r], i, sz)
			if g == w {
				continue
			}
			wrong++
			if len(notes) < 3 {
				notes = append(notes, fmt.Sprintf("%s: rank %d element %d: got %#x, want %#x", k, r, i, g, w))
			}
		}
	}
	return wrong, notes, nil
}

// inputCache keeps the inputs of one dtype: the cases of a dtype share them (the large
// cases spend most of their time drawing inputs otherwise).
var inputCache = &inputs{}

type inputs struct {
	dt   numerics.DType
	bufs map[string][][]byte
}

func (c *inputs) get(f family, dt numerics.DType, cols, count int) [][]byte {
	if c.bufs == nil || dt != c.dt {
		c.dt, c.bufs = dt, map[string][][]byte{}
	}
	key := fmt.Sprint(f.name, cols, count)
	if b, ok := c.bufs[key]; ok {
		return b
	}
	b := fill(f, dt, cols, count)
	c.bufs[key] = b
	return b
}

// checkAll runs every case and fails the spec with the total #wrong and the first few.
func checkAll(cases []bitCase) {
	GinkgoHelper()
	var notes []string
	total, failed := 0, 0
	for _, k := range cases {
		w, ns, err := k.check()
		Expect(err).NotTo(HaveOccurred())
		if w > 0 {
			total += w
			failed++
			if len(notes) < 12 {
				notes = append(notes, ns...)
			}
		}
	}
	inputCache.bufs = nil
	Expect(total).To(BeZero(), "%d elements wrong in %d of %d cases:\n%s", total, failed, len(cases), strings.Join(notes, "\n"))
}

// opLabels label the bitwise specs with every collective they run, so that the mutation
// check, which focuses a fault on the specs of the ops it can change, runs them for the dist
// faults and skips them (zero specs, no time) for every other fault.
var opLabels = []string{"all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all"}

var bitModes = []dist.Mode{dist.Deterministic, dist.Exact, dist.Fast}

var _ = Describe("collectives bit for bit against collectives/bitref", Label(append([]string{"cpu", "bits"}, opLabels...)...), func() {
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8} {
		It(fmt.Sprintf("returns the documented bits for every collective, mode, reduction, dtype and input family on %d ranks", n), func() {
			var cases []bitCase
			for _, mode := range bitModes {
				for _, dt := range collectives.DTypes {
					for _, c := range bitCollectives() {
						for _, f := range families {
							cases = append(cases, bitCase{n: n, mode: mode, dt: dt, c: c, fam: f, count: 2*n*37 + 5})
						}
					}
				}
			}
			checkAll(cases)
		})
	}
})

// The sizes past the pipeline (issue 22, item 2): a reduction's chunk moves in segments of
// 1 MiB (engine/dist/pipeline.go, segmentBytes), which every spec above stays far below. These
// cases give each rank's chunk one whole segment and a ragged second one (chunk lengths
// differ by one across ranks, as count is not a multiple of the world size), on odd worlds,
// with every op; the dtypes rotate over the worlds to keep CI's time small (the cost grows
// with n^2 and with 1/size).
const segmentBytes = 1 << 20

func largeCount(dt numerics.DType, n int) int {
	per := segmentBytes / dt.Size()
	return n*(per+per/7+3) + n/2
}

var largeDTypes = map[int][]numerics.DType{
	3: {numerics.F32, numerics.BF16, numerics.I8, numerics.F8E4M3},
	5: {numerics.F64, numerics.F16, numerics.F8E5M2},
	7: {numerics.F32, numerics.I32},
}

// largeCases: all_reduce's sum, avg and max in deterministic mode, its sum in exact mode
// and its max in fast mode, reduce_scatter's min, and (for the world's first dtype) each data
// movement op once.
func largeCases(n int, dt numerics.DType, moves bool) []bitCase {
	spread := families[0]
	k := func(mode dist.Mode, op collectives.Op, red dist.RedOp) bitCase {
		return bitCase{n: n, mode: mode, dt: dt, c: collective{op: op, red: red, parts: 1}, fam: spread, count: largeCount(dt, n), gatherPer: true}
	}
	out := []bitCase{
		k(dist.Deterministic, collectives.AllReduce, dist.Sum),
		k(dist.Deterministic, collectives.AllReduce, dist.Avg),
		k(dist.Deterministic, collectives.AllReduce, dist.Max),
		k(dist.Exact, collectives.AllReduce, dist.Sum),
		k(dist.Fast, collectives.AllReduce, dist.Max),
		k(dist.Deterministic, collectives.ReduceScatter, dist.Min),
	}
	if moves {
		for _, op := range []collectives.Op{collectives.AllGather, collectives.Broadcast, collectives.AllToAll} {
			out = append(out, k(dist.Deterministic, op, 0))
		}
	}
	return out
}

var _ = Describe("collectives bit for bit past the pipeline's segments", Label(append([]string{"cpu", "bits"}, opLabels...)...), func() {
	for _, n := range []int{3, 5, 7} {
		It(fmt.Sprintf("returns the documented bits on %d ranks for chunks of one segment and a ragged tail", n), func() {
			var cases []bitCase
			for i, dt := range largeDTypes[n] {
				cases = append(cases, largeCases(n, dt, i == 0)...)
			}
			checkAll(cases)
		})
	}
})
