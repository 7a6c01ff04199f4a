package training

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/dtensor"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Mixture of experts (model "moe", issue 27): z = x + sum_j gate_j expert_{e_j}(x), one layer,
// trained against a fixed teacher with mse plus Switch Transformer's load-balancing loss. The
// tokens come in groups of fixed size; each group is routed on its own (top-k of the router's
// softmax, ties to the lower expert, a capacity per expert and group, overflow dropped), so
// the routing, the capacity and the aux loss do not depend on how the groups are spread over
// ranks. On a mesh of dp and ep axes, every rank holds its groups of the batch, the router
// (replicated) and the experts of its ep coordinate (E/ep of them, replicated over dp); tokens
// go to their experts' ranks by all_to_all over ep (dispatch) and come back the same way
// (combine). The router, the routing and the combine run on the host around three compiled
// graphs (router, expert, loss) and their autodiff VJPs.

// MoEModel is the mixture-of-experts model's name.
const MoEModel = "moe"

// MoEDims sizes the MoE model.
type MoEDims struct {
	Groups, GroupTokens int // the global batch: Groups groups of GroupTokens tokens
	Width, FFN          int
	Experts, TopK       int
	CapacityFactor      float64
	AuxWeight           float64
}

// DefaultMoE is small enough for a CPU run of a second, with drops at factor 1.
var DefaultMoE = MoEDims{Groups: 8, GroupTokens: 16, Width: 16, FFN: 32, Experts: 4, TopK: 2, CapacityFactor: 1, AuxWeight: 0.01}

// MoEParams lists the model's parameters in order: the router, then each expert's two weights.
func MoEParams(d MoEDims) []string {
	out := []string{"wr"}
	for e := range d.Experts {
		out = append(out, expertParam(1, e), expertParam(2, e))
	}
	return out
}

func expertParam(layer, e int) string { return "w" + strconv.Itoa(layer) + "_" + strconv.Itoa(e) }

type moeStep struct {
	d        MoEDims
	dt       numerics.DType
	be       backend.Backend
	unpadded bool
	timeout  time.Duration
	ms       *mesh.Mesh // nil: one rank
	world    *dist.Comm // nil: one rank
	ep, dp   *dist.Comm // nil when the axis is absent
	rank     int        // world rank: which groups of the batch
	nworld   int
	epRank   int
	epSize   int
	full     *Model // every parameter
	own      *Model // the router and this rank's experts
	router   [2]*compiler.Program
	loss     *compiler.Program
	experts  map[int][2]*compiler.Program // by rows
	// Last is the last step's routing, per local group (the checks read it).
	Last []*Routing
}

func newMoEStep(cfg Config, timeout time.Duration) (*moeStep, error) {
	d := cfg.MoE
	if d == (MoEDims{}) {
		d = DefaultMoE
	}
	s := &moeStep{d: d, dt: cfg.DType, be: cfg.Backend, unpadded: cfg.MoEUnpadded, timeout: timeout, nworld: 1, epSize: 1, experts: map[int][2]*compiler.Program{}}
	ms := cfg.Mesh
	if ms == nil && cfg.Comm != nil && cfg.Comm.World() > 1 {
		var err error
		if ms, err = mesh.ParseMesh("dp=" + strconv.Itoa(cfg.Comm.World())); err != nil {
			return nil, err
		}
	}
	if ms != nil {
		for _, a := range ms.Axes {
			if a.Name != "dp" && a.Name != "ep" {
				return nil, errs.New(errs.Unsupported, "train: mesh %s: axis %q; the moe model takes dp and ep", ms, a.Name)
			}
		}
		if cfg.Comm == nil || cfg.Comm.World() != ms.World() {
			return nil, errs.New(errs.Input, "train: mesh %s needs a communicator of its %d ranks", ms, ms.World())
		}
		groups, err := dtensor.NewGroups(ms, cfg.Comm)
		if err != nil {
			return nil, err
		}
		s.ms, s.world, s.rank, s.nworld = ms, cfg.Comm, cfg.Comm.Rank(), ms.World()
		if ms.AxisIndex("ep") >= 0 {
			if s.ep, err = groups.Axis("ep"); err != nil {
				return nil, err
			}
			s.epRank, s.epSize = s.ep.Rank(), s.ep.World()
		}
		if ms.AxisIndex("dp") >= 0 {
			if s.dp, err = groups.Axis("dp"); err != nil {
				return nil, err
			}
		}
	}
	if d.Experts%s.epSize != 0 || d.Groups%s.nworld != 0 || d.TopK < 1 || d.TopK > d.Experts {
		return nil, errs.New(errs.Input, "train: moe with %d experts (top-%d) and %d groups does not split over ep=%d and %d ranks", d.Experts, d.TopK, d.Groups, s.epSize, s.nworld)
	}
	s.full = &Model{Name: MoEModel, DType: s.dt, Params: MoEParams(d)}
	own := *s.full
	own.Params = []string{"wr"}
	for _, e := range s.localExperts() {
		own.Params = append(own.Params, expertParam(1, e), expertParam(2, e))
	}
	s.own = &own
	var err error
	if s.router, err = s.compileRouter(); err != nil {
		return nil, err
	}
	if s.loss, err = s.compileLoss(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *moeStep) localExperts() []int {
	per := s.d.Experts / s.epSize
	out := make([]int, per)
	for i := range out {
		out[i] = s.epRank*per + i
	}
	return out
}

func (s *moeStep) tokens() int { return s.d.Groups / s.nworld * s.d.GroupTokens }

func (s *moeStep) compileRouter() ([2]*compiler.Program, error) {
	b := graph.NewBuilder("moe_router")
	x := b.Input("x", s.dt, s.tokens(), s.d.Width)
	wr := b.Input("wr", s.dt, s.d.Width, s.d.Experts)
	b.Output(b.Named("probs", "softmax", nil, b.Op("matmul", nil, x, wr)))
	return s.compilePair(b, func(g *graph.Graph) (*graph.Graph, error) { return autodiff.VJP(g, "wr") })
}

func (s *moeStep) compileLoss() (*compiler.Program, error) {
	b := graph.NewBuilder("moe_loss")
	z := b.Input("z", s.dt, s.tokens(), s.d.Width)
	t := b.Input("target", s.dt, s.tokens(), s.d.Width)
	b.Output(b.Named("loss", "mse_loss", nil, z, t))
	g, err := b.Build()
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "train: moe loss")
	}
	gg, err := autodiff.Grad(g, "loss", "z")
	if err != nil {
		return nil, err
	}
	return compiler.Compile(gg, compiler.Options{})
}

// expert is the forward and VJP (with respect to w1, w2) of one expert on rows tokens.
func (s *moeStep) expert(rows int) ([2]*compiler.Program, error) {
	if p, ok := s.experts[rows]; ok {
		return p, nil
	}
	b := graph.NewBuilder("moe_expert")
	x := b.Input("x", s.dt, rows, s.d.Width)
	w1 := b.Input("w1", s.dt, s.d.Width, s.d.FFN)
	w2 := b.Input("w2", s.dt, s.d.FFN, s.d.Width)
	b.Output(b.Named("out", "matmul", nil, b.Op("gelu", nil, b.Op("matmul", nil, x, w1)), w2))
	p, err := s.compilePair(b, func(g *graph.Graph) (*graph.Graph, error) { return autodiff.VJP(g, "w1", "w2") })
	if err == nil {
		s.experts[rows] = p
	}
	return p, err
}

func (s *moeStep) compilePair(b *graph.Builder, grad func(*graph.Graph) (*graph.Graph, error)) ([2]*compiler.Program, error) {
	var out [2]*compiler.Program
	g, err := b.Build()
	if err != nil {
		return out, errs.Wrap(errs.Internal, err, "train: moe graph")
	}
	gg, err := grad(g)
	if err != nil {
		return out, err
	}
	if out[0], err = compiler.Compile(g, compiler.Options{}); err != nil {
		return out, err
	}
	out[1], err = compiler.Compile(gg, compiler.Options{})
	return out, err
}

func (s *moeStep) model() *Model { return s.own }

func (s *moeStep) shape(name string) ([]int, int) {
	switch name[:2] {
	case "wr":
		return []int{s.d.Width, s.d.Experts}, s.d.Width
	case "w1":
		return []int{s.d.Width, s.d.FFN}, s.d.Width
	}
	return []int{s.d.FFN, s.d.Width}, s.d.FFN
}

func (s *moeStep) init(seed uint64) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for _, n := range s.own.Params {
		shape, fan := s.shape(n)
		sc := 1 / math.Sqrt(float64(fan))
		out[n] = harness.RandomTensor(s.dt, shape, harness.SubSeed(seed, "param/"+n), harness.Dist{Kind: harness.DistNormal, Lo: -sc, Hi: sc})
	}
	return out, nil
}

// batch is this rank's groups of step's global batch.
func (s *moeStep) batch(seed uint64, step int) (*tensor.Tensor, *tensor.Tensor) {
	return MoEBatch(s.d, s.dt, seed, step, s.rank, s.nworld)
}

// MoEBatch is rank's share (of world, whole groups) of step's global batch of the moe model:
// x drawn normal from seed and step, target tanh(x T / sqrt(W)) with a fixed teacher T, in
// float64 and then rounded to dt.
func MoEBatch(d MoEDims, dt numerics.DType, seed uint64, step, rank, world int) (*tensor.Tensor, *tensor.Tensor) {
	W, T := d.Width, d.Groups/world*d.GroupTokens
	gx := harness.RandomTensor(numerics.F64, []int{d.Groups * d.GroupTokens, W}, harness.SubSeed(seed, "moe-batch/"+strconv.Itoa(step)), harness.Dist{Kind: harness.DistNormal}).Float64s()
	tw := harness.RandomTensor(numerics.F64, []int{W, W}, harness.SubSeed(seed, "moe-teacher"), harness.Dist{Kind: harness.DistNormal}).Float64s()
	x, t := tensor.New(dt, []int{T, W}), tensor.New(dt, []int{T, W})
	for r := range T {
		g := rank*T + r
		for c := range W {
			x.SetFloat64(r*W+c, gx[g*W+c])
			var v float64
			for i := range W {
				v += gx[g*W+i] * tw[i*W+c]
			}
			t.SetFloat64(r*W+c, math.Tanh(v/math.Sqrt(float64(W))))
		}
	}
	return x, t
}

// MoEInit is the moe model's initial parameters (all of them): weights N(0, 1/fan_in).
func MoEInit(d MoEDims, dt numerics.DType, seed uint64) map[string]*tensor.Tensor {
	s := &moeStep{d: d, dt: dt, own: &Model{Params: MoEParams(d)}}
	out, _ := s.init(seed)
	return out
}

// blocks: the rows of one ep peer's chunk, group by group, local expert by local expert:
// Capacity rows each when padded, the filled slots only when not.
type chunkLayout struct {
	counts [][]int // [group][local expert]
	rows   int
	cap    int
	padded bool
}

func (l chunkLayout) size(g, le int) int {
	if l.padded {
		return l.cap
	}
	return l.counts[g][le]
}

func (l chunkLayout) offset(g, le int) int {
	off := 0
	for gi := range l.counts {
		for li := range l.counts[gi] {
			if gi == g && li == le {
				return off
			}
			off += l.size(gi, li)
		}
	}
	return off
}

func (s *moeStep) step(ctx context.Context, seed uint64, step int, params map[string]*tensor.Tensor) (*tensor.Tensor, map[string]*tensor.Tensor, error) {
	loss, grads, err := s.run(ctx, seed, step, params)
	if err != nil {
		return nil, nil, errs.Wrap(errs.CodeOf(err), err, "train: moe step %d on rank %d", step, s.rank)
	}
	return loss, grads, nil
}

func (s *moeStep) run(ctx context.Context, seed uint64, step int, params map[string]*tensor.Tensor) (*tensor.Tensor, map[string]*tensor.Tensor, error) {
	d, dt, W := s.d, s.dt, s.d.Width
	x, target := s.batch(seed, step)
	out, err := s.be.Run(s.router[0], map[string]*tensor.Tensor{"x": x, "wr": params["wr"]})
	if err != nil {
		return nil, nil, err
	}
	probsT := out[0]
	probs := rows2(probsT.Float64s(), d.Experts)
	gl, Tg := d.Groups/s.nworld, d.GroupTokens
	C := Capacity(Tg, d.Experts, d.TopK, d.CapacityFactor)
	s.Last = make([]*Routing, gl)
	for g := range gl {
		s.Last[g] = Route(probs[g*Tg:(g+1)*Tg], d.TopK, C, s.be.Name())
	}
	per := d.Experts / s.epSize
	sendLayout, recvLayout, chunks, expertIn, err := s.dispatch(ctx, x)
	if err != nil {
		return nil, nil, err
	}
	expertOut := make([]*tensor.Tensor, per)
	for le, e := range s.localExperts() {
		expertOut[le], err = s.runExpert(expertIn[le], params[expertParam(1, e)], params[expertParam(2, e)])
		if err != nil {
			return nil, nil, err
		}
	}
	ret, err := s.combine(ctx, expertOut, sendLayout, recvLayout)
	if err != nil {
		return nil, nil, err
	}
	outRow := func(g int, c Choice) []float64 {
		q, le := c.Expert/per, c.Expert%per
		row := sendLayout[q].offset(g, le) + c.Slot
		v := make([]float64, W)
		for i := range W {
			v[i] = ret[q].Float64(row*W + i)
		}
		return v
	}
	z := x.Clone()
	kept := map[[3]int][]float64{} // (g, t, j) -> expert output row
	for g := range gl {
		for t := range Tg {
			y := make([]float64, W)
			for j, c := range s.Last[g].Choices[t] {
				if c.Slot < 0 {
					continue
				}
				o := outRow(g, c)
				kept[[3]int{g, t, j}] = o
				gate := numerics.Decode(dt, numerics.Encode(dt, c.Gate))
				for i := range W {
					y[i] = rnd(dt, y[i]+rnd(dt, gate*o[i]))
				}
			}
			for i := range W {
				k := (g*Tg+t)*W + i
				z.SetFloat64(k, z.Float64(k)+y[i])
			}
		}
	}
	lo, err := s.be.Run(s.loss, map[string]*tensor.Tensor{"z": z, "target": target})
	if err != nil {
		return nil, nil, err
	}
	mse, dz := lo[0].Float64(0), lo[1]
	var aux float64
	dprobs := tensor.New(dt, []int{gl * Tg, d.Experts})
	auxGrads := make([][]float64, gl)
	for g := range gl {
		a, ag := AuxLoss(probs[g*Tg:(g+1)*Tg], s.Last[g])
		aux += a / float64(gl)
		auxGrads[g] = ag
	}
	loss := tensor.FromFloat64(dt, nil, []float64{mse + d.AuxWeight*aux})
	// Backward: the expert outputs' gradient (gate x dz) goes back to the experts' ranks.
	dzv := dz.Float64s()
	dchunks := make([]*tensor.Tensor, s.epSize)
	for q := range s.epSize {
		dchunks[q] = tensor.New(dt, chunks[q].Shape)
	}
	dp := make([]float64, gl*Tg*d.Experts)
	for g := range gl {
		for t := range Tg {
			tok := g*Tg + t
			for e := range d.Experts {
				dp[tok*d.Experts+e] = d.AuxWeight / float64(gl) * auxGrads[g][e]
			}
			for j, c := range s.Last[g].Choices[t] {
				if c.Slot < 0 {
					continue
				}
				q, le := c.Expert/per, c.Expert%per
				row := sendLayout[q].offset(g, le) + c.Slot
				gate := numerics.Decode(dt, numerics.Encode(dt, c.Gate))
				var dg float64
				o := kept[[3]int{g, t, j}]
				for i := range W {
					dchunks[q].SetFloat64(row*W+i, gate*dzv[tok*W+i])
					dg += dzv[tok*W+i] * o[i]
				}
				dp[tok*d.Experts+c.Expert] += dg
			}
		}
	}
	for i, v := range dp {
		dprobs.SetFloat64(i, v)
	}
	_, dgot, err := s.exchange(ctx, sendLayout, dchunks, recvLayout)
	if err != nil {
		return nil, nil, err
	}
	grads := map[string]*tensor.Tensor{}
	for le, e := range s.localExperts() {
		dOut := gatherRows(dgot, recvLayout, le, gl, W, dt)
		g1, g2, err := s.expertGrad(expertIn[le], dOut, params[expertParam(1, e)], params[expertParam(2, e)])
		if err != nil {
			return nil, nil, err
		}
		grads[expertParam(1, e)], grads[expertParam(2, e)] = g1, g2
	}
	rg, err := s.be.Run(s.router[1], map[string]*tensor.Tensor{"x": x, "wr": params["wr"], "d_probs": dprobs})
	if err != nil {
		return nil, nil, err
	}
	grads["wr"] = rg[len(rg)-1]
	if err := s.reduce(ctx, loss, grads); err != nil {
		return nil, nil, err
	}
	return loss, grads, nil
}

// dispatch moves this rank's token rows (x: [tokens, W], routed by s.Last) to their experts'
// ranks: the layouts of what it sends to and receives from each ep peer, the chunks it sent,
// and each local expert's input rows (source by source, group by group, slot by slot).
func (s *moeStep) dispatch(ctx context.Context, x *tensor.Tensor) (sendLayout, recvLayout []chunkLayout, chunks, expertIn []*tensor.Tensor, err error) {
	d, dt, W := s.d, s.dt, s.d.Width
	gl, Tg, per := len(s.Last), d.GroupTokens, d.Experts/s.epSize
	C := s.Last[0].Capacity
	sendLayout = make([]chunkLayout, s.epSize)
	for q := range s.epSize {
		l := chunkLayout{cap: C, padded: !s.unpadded, counts: make([][]int, gl)}
		for g := range gl {
			l.counts[g] = make([]int, per)
			for le := range per {
				l.counts[g][le] = s.Last[g].Count[q*per+le]
			}
		}
		sendLayout[q] = l
	}
	chunks = make([]*tensor.Tensor, s.epSize)
	for q := range s.epSize {
		n := 0
		for g := range gl {
			for le := range per {
				n += sendLayout[q].size(g, le)
			}
		}
		chunks[q] = tensor.New(dt, []int{n, W})
	}
	rb := W * dt.Size()
	s.eachKept(func(g, t, j int, c Choice) {
		q, le := c.Expert/per, c.Expert%per
		row := sendLayout[q].offset(g, le) + c.Slot
		copy(chunks[q].Data[row*rb:(row+1)*rb], x.Data[(g*Tg+t)*rb:(g*Tg+t+1)*rb])
	})
	recvLayout, got, err := s.exchange(ctx, sendLayout, chunks, nil)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	expertIn = make([]*tensor.Tensor, per)
	for le := range per {
		expertIn[le] = gatherRows(got, recvLayout, le, gl, W, dt)
	}
	return sendLayout, recvLayout, chunks, expertIn, nil
}

// combine returns every local expert's output rows to the ranks their tokens came from: what
// comes back from ep peer q, in the layout this rank sent to q.
func (s *moeStep) combine(ctx context.Context, expertOut []*tensor.Tensor, sendLayout, recvLayout []chunkLayout) ([]*tensor.Tensor, error) {
	back := make([]*tensor.Tensor, s.epSize)
	for p := range s.epSize {
		back[p] = scatterRows(expertOut, recvLayout, p, len(s.Last), s.d.Width, s.dt)
	}
	_, ret, err := s.exchange(ctx, recvLayout, back, sendLayout)
	return ret, err
}

// RoundTrip is the MoE layer's data movement alone on every rank of cfg's mesh (goroutines,
// in process): step 1's tokens routed (cfg.MoE, with a capacity factor that drops nothing),
// dispatched to their experts' ranks, returned by identity experts, combined with equal weights
// 1/k; and a cotangent dy sent back the same way (combine's adjoint, then dispatch's). It
// returns, per rank, the tokens x, the combined y, dy and the gradient dx that came back: with
// no drops y must be x and dx must be dy.
func RoundTrip(ctx context.Context, cfg Config) (x, y, dy, dx []*tensor.Tensor, err error) {
	world := 1
	if cfg.Mesh != nil {
		world = cfg.Mesh.World()
	}
	if cfg.DType == 0 {
		cfg.DType = numerics.F32
	}
	x, y, dy, dx = make([]*tensor.Tensor, world), make([]*tensor.Tensor, world), make([]*tensor.Tensor, world), make([]*tensor.Tensor, world)
	ts := dist.NewInproc(world)
	errc := make(chan error, world)
	for r := range world {
		go func() {
			c := cfg
			if world > 1 {
				c.Comm = dist.NewComm(ts[r], dist.Options{Mode: dist.Deterministic, Timeout: dist.DefaultTimeout})
			}
			err := func() error {
				s, err := newMoEStep(c, dist.DefaultTimeout)
				if err != nil {
					return err
				}
				return s.roundTrip(ctx, x, y, dy, dx)
			}()
			if err != nil {
				ts[r].Close()
			}
			errc <- err
		}()
	}
	for range world {
		if e := <-errc; e != nil && err == nil {
			err = e
		}
	}
	return x, y, dy, dx, err
}

func (s *moeStep) roundTrip(ctx context.Context, xs, ys, dys, dxs []*tensor.Tensor) error {
	d, dt, W := s.d, s.dt, s.d.Width
	x, _ := s.batch(1, 1)
	params, _ := s.init(1)
	out, err := s.be.Run(s.router[0], map[string]*tensor.Tensor{"x": x, "wr": params["wr"]})
	if err != nil {
		return err
	}
	probs := rows2(out[0].Float64s(), d.Experts)
	gl, Tg, per := d.Groups/s.nworld, d.GroupTokens, d.Experts/s.epSize
	C := Capacity(Tg, d.Experts, d.TopK, d.CapacityFactor)
	s.Last = make([]*Routing, gl)
	for g := range gl {
		s.Last[g] = Route(probs[g*Tg:(g+1)*Tg], d.TopK, C, s.be.Name())
	}
	sendLayout, recvLayout, chunks, expertIn, err := s.dispatch(ctx, x)
	if err != nil {
		return err
	}
	ret, err := s.combine(ctx, expertIn, sendLayout, recvLayout) // identity experts
	if err != nil {
		return err
	}
	w := 1 / float64(d.TopK)
	y := tensor.New(dt, x.Shape)
	dy := harness.RandomTensor(dt, x.Shape, harness.SubSeed(uint64(s.rank), "moe-dy"), harness.Dist{Kind: harness.DistNormal})
	dchunks := make([]*tensor.Tensor, s.epSize)
	for q := range dchunks {
		dchunks[q] = tensor.New(dt, chunks[q].Shape)
	}
	s.eachKept(func(g, t, j int, c Choice) {
		q, le := c.Expert/per, c.Expert%per
		row := sendLayout[q].offset(g, le) + c.Slot
		for i := range W {
			k := (g*Tg+t)*W + i
			y.SetFloat64(k, y.Float64(k)+w*ret[q].Float64(row*W+i))
			dchunks[q].SetFloat64(row*W+i, w*dy.Float64(k)) // combine's adjoint
		}
	})
	// The cotangent goes to the experts as the forward's outputs came back, through the
	// identity experts, and home as the tokens went (dispatch's adjoint sums a token's choices).
	_, dgot, err := s.exchange(ctx, sendLayout, dchunks, recvLayout)
	if err != nil {
		return err
	}
	dIn := make([]*tensor.Tensor, per)
	for le := range per {
		dIn[le] = gatherRows(dgot, recvLayout, le, gl, W, dt)
	}
	dret, err := s.combine(ctx, dIn, sendLayout, recvLayout)
	if err != nil {
		return err
	}
	dx := tensor.New(dt, x.Shape)
	s.eachKept(func(g, t, j int, c Choice) {
		q, le := c.Expert/per, c.Expert%per
		row := sendLayout[q].offset(g, le) + c.Slot
		for i := range W {
			k := (g*Tg+t)*W + i
			dx.SetFloat64(k, dx.Float64(k)+dret[q].Float64(row*W+i))
		}
	})
	xs[s.rank], ys[s.rank], dys[s.rank], dxs[s.rank] = x, y, dy, dx
	return nil
}

// reduce averages the loss and the router gradient over every rank; an expert's gradient holds
// the tokens of its whole ep group, so it is summed over dp and divided by the world (averaged
// over dp, then divided by ep).
func (s *moeStep) reduce(ctx context.Context, loss *tensor.Tensor, grads map[string]*tensor.Tensor) error {
	if s.world == nil {
		return nil
	}
	if err := averageAll(ctx, s.world, s.timeout, []*tensor.Tensor{loss, grads["wr"]}); err != nil {
		return err
	}
	var ex []*tensor.Tensor
	for _, n := range s.own.Params[1:] {
		ex = append(ex, grads[n])
	}
	if s.dp != nil {
		if err := averageAll(ctx, s.dp, s.timeout, ex); err != nil {
			return err
		}
	}
	if s.epSize > 1 && !failpoint.Enabled(failpoint.DistMoEExpertGradTimesEP) {
		for _, t := range ex {
			for i := range t.Len() {
				t.SetFloat64(i, t.Float64(i)/float64(s.epSize))
			}
		}
	}
	return nil
}

func (s *moeStep) runExpert(x, w1, w2 *tensor.Tensor) (*tensor.Tensor, error) {
	if x.Shape[0] == 0 {
		return tensor.New(s.dt, []int{0, s.d.Width}), nil
	}
	p, err := s.expert(x.Shape[0])
	if err != nil {
		return nil, err
	}
	out, err := s.be.Run(p[0], map[string]*tensor.Tensor{"x": x, "w1": w1, "w2": w2})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// expertGrad is the gradient of sum <dOut, expert(x)> with respect to w1 and w2; an expert that
// received no token has zero gradients.
func (s *moeStep) expertGrad(x, dOut, w1, w2 *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor, error) {
	if x.Shape[0] == 0 {
		return tensor.New(s.dt, slices.Clone(w1.Shape)), tensor.New(s.dt, slices.Clone(w2.Shape)), nil
	}
	p, err := s.expert(x.Shape[0])
	if err != nil {
		return nil, nil, err
	}
	out, err := s.be.Run(p[1], map[string]*tensor.Tensor{"x": x, "w1": w1, "w2": w2, "d_out": dOut})
	if err != nil {
		return nil, nil, err
	}
	return out[len(out)-2], out[len(out)-1], nil
}

// eachKept calls f for every choice that got a slot, group by group, token by token, choice
// by choice.
func (s *moeStep) eachKept(f func(g, t, j int, c Choice)) {
	for g, r := range s.Last {
		for t, cs := range r.Choices {
			for j, c := range cs {
				if c.Slot >= 0 {
					f(g, t, j, c)
				}
			}
		}
	}
}

// exchange sends chunks[q] to ep peer q and returns what every peer sent here, with its layout.
// Padded chunks all have one size and go by one all_to_all; unpadded ones are preceded by an
// all_to_all of their row counts and go by send and receive. want, when known (the combine and
// the backward retrace the dispatch), is the layout of what comes back.
func (s *moeStep) exchange(ctx context.Context, layouts []chunkLayout, chunks []*tensor.Tensor, want []chunkLayout) ([]chunkLayout, []*tensor.Tensor, error) {
	dt, W := s.dt, s.d.Width
	if s.ep == nil {
		if want == nil {
			want = layouts
		}
		return want, chunks, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n := s.epSize
	if want == nil {
		// The counts: gl x per int32 per peer.
		gl, per := len(layouts[0].counts), len(layouts[0].counts[0])
		send := make([]byte, 0, n*gl*per*4)
		for q := range n {
			for g := range gl {
				for le := range per {
					send = binary.LittleEndian.AppendUint32(send, uint32(layouts[q].counts[g][le]))
				}
			}
		}
		recv := make([]byte, len(send))
		if err := s.ep.AllToAll(cctx, numerics.I32, send, recv); err != nil {
			return nil, nil, err
		}
		want = make([]chunkLayout, n)
		for p := range n {
			l := chunkLayout{cap: layouts[0].cap, padded: layouts[0].padded, counts: make([][]int, gl)}
			for g := range gl {
				l.counts[g] = make([]int, per)
				for le := range per {
					l.counts[g][le] = int(binary.LittleEndian.Uint32(recv[((p*gl+g)*per+le)*4:]))
				}
			}
			want[p] = l
		}
	}
	rowsOf := func(l chunkLayout) int {
		r := 0
		for g := range l.counts {
			for le := range l.counts[g] {
				r += l.size(g, le)
			}
		}
		return r
	}
	out := make([]*tensor.Tensor, n)
	for p := range n {
		out[p] = tensor.New(dt, []int{rowsOf(want[p]), W})
	}
	if !layouts[0].padded {
		for q := range n {
			if q != s.epRank {
				if err := s.ep.Send(cctx, dt, chunks[q].Data, q); err != nil {
					return nil, nil, err
				}
			}
		}
		for p := range n {
			if p == s.epRank {
				copy(out[p].Data, chunks[p].Data)
				continue
			}
			if err := s.ep.Recv(cctx, dt, out[p].Data, p); err != nil {
				return nil, nil, err
			}
		}
		return want, out, nil
	}
	var send []byte
	for q := range n {
		send = append(send, chunks[q].Data...)
	}
	recv := make([]byte, len(send))
	if err := s.ep.AllToAll(cctx, dt, send, recv); err != nil {
		return nil, nil, err
	}
	b := len(send) / n
	for p := range n {
		copy(out[p].Data, recv[p*b:(p+1)*b])
	}
	return want, out, nil
}

// gatherRows is local expert le's rows out of every source's chunk, source by source, group by group.
func gatherRows(got []*tensor.Tensor, ls []chunkLayout, le, gl, W int, dt numerics.DType) *tensor.Tensor {
	rows := 0
	for p := range got {
		for g := range gl {
			rows += ls[p].size(g, le)
		}
	}
	t := tensor.New(dt, []int{rows, W})
	at, rb := 0, W*dt.Size()
	for p := range got {
		for g := range gl {
			off, n := ls[p].offset(g, le), ls[p].size(g, le)
			at += copy(t.Data[at:], got[p].Data[off*rb:(off+n)*rb])
		}
	}
	return t
}

// scatterRows is the inverse for source p: its blocks of every local expert's output, in p's
// chunk layout.
func scatterRows(outs []*tensor.Tensor, ls []chunkLayout, p, gl, W int, dt numerics.DType) *tensor.Tensor {
	per := len(outs)
	rows := 0
	for g := range gl {
		for le := range per {
			rows += ls[p].size(g, le)
		}
	}
	t := tensor.New(dt, []int{rows, W})
	rb := W * dt.Size()
	for le := range per {
		// Rows of expert le: sources before p, then p's groups.
		at := 0
		for q := range p {
			for g := range gl {
				at += ls[q].size(g, le)
			}
		}
		for g := range gl {
			off, n := ls[p].offset(g, le), ls[p].size(g, le)
			copy(t.Data[off*rb:(off+n)*rb], outs[le].Data[at*rb:(at+n)*rb])
			at += n
		}
	}
	return t
}

func rows2(v []float64, n int) [][]float64 {
	out := make([][]float64, len(v)/n)
	for i := range out {
		out[i] = v[i*n : (i+1)*n]
	}
	return out
}

func rnd(dt numerics.DType, v float64) float64 { return numerics.Decode(dt, numerics.Encode(dt, v)) }

func (s *moeStep) agree(ctx context.Context, local error, step int) error {
	if s.world == nil {
		return local
	}
	return agreeOver(ctx, s.world, s.timeout, local, step, s.ms)
}

// digest gathers every expert from its ep rank (a broadcast over ep per weight).
func (s *moeStep) digest(ctx context.Context, params map[string]*tensor.Tensor) (string, error) {
	whole := map[string]*tensor.Tensor{"wr": params["wr"]}
	per := s.d.Experts / s.epSize
	for e := range s.d.Experts {
		for _, n := range []string{expertParam(1, e), expertParam(2, e)} {
			if s.ep == nil {
				whole[n] = params[n]
				continue
			}
			shape, _ := s.shape(n)
			t := tensor.New(s.dt, shape)
			var send []byte
			if e/per == s.epRank {
				send = params[n].Data
			}
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			err := s.ep.Broadcast(cctx, s.dt, send, t.Data, e/per)
			cancel()
			if err != nil {
				return "", err
			}
			whole[n] = t
		}
	}
	return Digest(s.full, whole), nil
}

func (s *moeStep) layoutText() string {
	return fmt.Sprintf("moe %+v on mesh %v: router replicated, experts by ep coordinate", s.d, s.ms)
}

func (s *moeStep) mesh() string {
	if s.ms == nil {
		return ""
	}
	return s.ms.String()
}
