package training

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/dtensor"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/dist/pipeline"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Pipeline parallelism (a pp axis in Config.Mesh, optionally with dp). The model, built for one
// micro-batch, is cut into pp x chunks stages (pipeline_cut.go); stage s lives on pp coordinate
// s % pp. Every step, each pipeline runs its rank's action list of the schedule
// (engine/dist/pipeline, validated and dry-run before the first step): forwards keep their
// stage inputs, backwards recompute the stage's forward and take its gradient, activations
// and gradients move between stages with Comm.Send/Recv. A rank's parameter gradients are the
// sum of its micro-batches' gradients in micro-batch order (whatever order the schedule ran
// them in) times 1/m, the loss the sum of the micro-batch losses in order times 1/m: the mean
// over the global batch, as one rank computes it. The loss goes from the last stage to every
// stage (broadcast over pp); with dp, the loss and gradients are then averaged over dp.

// PipelineDims is the default size of a model trained on dp data-parallel pipelines of micro
// micro-batches: DefaultDims, with the global batch raised to the next multiple of dp x micro
// when it is smaller or does not split.
func PipelineDims(model string, dp, micro int) Dims {
	d := DefaultDims(model)
	if n := dp * micro; n > 0 && d.Batch%n != 0 {
		d.Batch = (d.Batch/n + 1) * n
	}
	return d
}

// pipelined reports whether cfg trains with pipeline parallelism.
func pipelined(cfg Config) bool { return cfg.Mesh != nil && cfg.Mesh.AxisIndex("pp") >= 0 }

// pipeShape is the schedule's shape for cfg: ranks, micro-batches, chunks.
func pipeShape(cfg Config) (p, m, v int) {
	p = cfg.Mesh.Size("pp")
	m, v = cfg.MicroBatches, cfg.Chunks
	if m == 0 {
		m = 2 * p
	}
	if v == 0 {
		v = 1
		if cfg.Schedule == pipeline.Interleaved {
			v = 2
		}
	}
	return p, m, v
}

type stageProg struct {
	g        *stageGraph
	fwd, bwd *compiler.Program
}

type pipeStep struct {
	full    *Model // every parameter, one micro-batch
	own     *Model // this rank's parameters only (checkpoints, finiteness)
	plan    *pipeline.Plan
	stages  []*stageGraph
	progs   map[int]*stageProg // this rank's stages
	ms      *mesh.Mesh
	groups  *dtensor.Groups
	pp, dp  *dist.Comm // dp nil without a dp axis
	me      int        // pp coordinate
	dpRank  int
	dpSize  int
	be      backend.Backend
	timeout time.Duration
	owner   map[string]int // parameter -> stage
	pairMax map[[2]int]int // largest payload in bytes from rank a to rank b
	// lastMakespan is the last step's virtual time (pipeline.Simulate's units) over the pipeline.
	lastMakespan int
	// noOverlap averages every gradient over dp after the whole list (Config.NoOverlap);
	// lastOverlapped counts the last step's buckets that started before its last stage pass.
	noOverlap      bool
	lastOverlapped int
}

func newPipeStep(cfg Config, timeout time.Duration) (*pipeStep, error) {
	ms := cfg.Mesh
	for _, a := range ms.Axes {
		if a.Name != "dp" && a.Name != "pp" {
			return nil, errs.New(errs.Unsupported, "train: mesh %s: axis %q with pp; pipelines combine with dp only", ms, a.Name)
		}
	}
	if cfg.Comm == nil && ms.World() == 1 { // pp=1: micro-batches as gradient accumulation on one rank
		cfg.Comm = dist.NewComm(dist.NewInproc(1)[0], dist.Options{Mode: dist.Deterministic, Timeout: timeout})
	}
	if cfg.Comm == nil || cfg.Comm.World() != ms.World() {
		return nil, errs.New(errs.Input, "train: mesh %s needs a communicator of its %d ranks", ms, ms.World())
	}
	name := cfg.Schedule
	if name == "" {
		name = pipeline.OneFOneB
	}
	p, m, v := pipeShape(cfg)
	plan, err := pipeline.Compile(name, p, m, v)
	if err != nil {
		return nil, err
	}
	if _, err := pipeline.Simulate(plan); err != nil {
		return nil, err
	}
	groups, err := dtensor.NewGroups(ms, cfg.Comm)
	if err != nil {
		return nil, err
	}
	s := &pipeStep{noOverlap: cfg.NoOverlap, plan: plan, ms: ms, groups: groups, be: cfg.Backend, timeout: timeout, progs: map[int]*stageProg{}, owner: map[string]int{}, pairMax: map[[2]int]int{}, dpSize: 1}
	if s.pp, err = groups.Axis("pp"); err != nil {
		return nil, err
	}
	s.me = s.pp.Rank()
	if ms.AxisIndex("dp") >= 0 {
		if s.dp, err = groups.Axis("dp"); err != nil {
			return nil, err
		}
		s.dpRank, s.dpSize = s.dp.Rank(), s.dp.World()
	}
	if cfg.Dims.Batch%(s.dpSize*m) != 0 {
		return nil, errs.New(errs.Input, "train: global batch %d does not split into %d data-parallel ranks x %d micro-batches", cfg.Dims.Batch, s.dpSize, m)
	}
	if s.full, err = Build(cfg.Model, cfg.DType, cfg.Dims, cfg.Dims.Batch/(s.dpSize*m)); err != nil {
		return nil, err
	}
	if s.stages, err = cutModel(s.full, plan.Stages()); err != nil {
		return nil, err
	}
	own := *s.full
	own.Params = nil
	for _, st := range s.stages {
		for _, pn := range st.params {
			s.owner[pn] = st.index
		}
	}
	for _, pn := range s.full.Params {
		if plan.RankOf(s.owner[pn]) == s.me {
			own.Params = append(own.Params, pn)
		}
	}
	s.own = &own
	for _, st := range s.stages {
		if plan.RankOf(st.index) != s.me {
			continue
		}
		sp := &stageProg{g: st}
		if sp.fwd, err = compiler.Compile(st.fwd, compiler.Options{}); err != nil {
			return nil, err
		}
		if sp.bwd, err = compiler.Compile(st.bwd, compiler.Options{}); err != nil {
			return nil, err
		}
		s.progs[st.index] = sp
	}
	// Every message on a pair of ranks is padded to the pair's largest, so that a receiver can
	// take them in any order it needs them (each names what it carries in its header).
	for k, st := range s.stages[:len(s.stages)-1] {
		a, b := plan.RankOf(k), plan.RankOf(k+1)
		if a == b {
			continue
		}
		n := s.bytesOf(st.outs)
		s.pairMax[[2]int{a, b}] = max(s.pairMax[[2]int{a, b}], n) // activations forward
		s.pairMax[[2]int{b, a}] = max(s.pairMax[[2]int{b, a}], n) // their gradients back
	}
	return s, nil
}

func (s *pipeStep) bytesOf(names []string) int {
	n := 0
	for _, v := range names {
		t := s.full.Graph.Value(v).Type
		n += t.NumElems() * t.DType.Size()
	}
	return n
}

func (s *pipeStep) model() *Model { return s.own }

func (s *pipeStep) init(seed uint64) (map[string]*tensor.Tensor, error) {
	all := s.full.Init(seed)
	out := map[string]*tensor.Tensor{}
	for _, pn := range s.own.Params {
		out[pn] = all[pn]
	}
	return out, nil
}

// header of a stage message: kind, sending stage, micro-batch, sender's virtual clock.
const headerBytes = 16

type smsg struct {
	msg   pipeline.Message
	clock int
	ts    []*tensor.Tensor
}

// sender posts a rank's messages to one peer in order, so the compute loop never waits on a
// send (as the dry run assumes).
type sender struct {
	q    chan []byte
	done chan error
}

type mbKey struct{ stage, mb int }

func (s *pipeStep) step(ctx context.Context, seed uint64, step int, params map[string]*tensor.Tensor) (*tensor.Tensor, map[string]*tensor.Tensor, error) {
	loss, grads, err := s.run(ctx, seed, step, params)
	if err != nil {
		return nil, nil, errs.Wrap(errs.CodeOf(err), err, "train: step %d on rank %d of mesh %s (%s)", step, s.groups.Rank(), s.ms, s.plan)
	}
	return loss, grads, nil
}

func (s *pipeStep) run(ctx context.Context, seed uint64, step int, params map[string]*tensor.Tensor) (*tensor.Tensor, map[string]*tensor.Tensor, error) {
	plan, m, S := s.plan, s.plan.Micro, s.plan.Stages()
	list := plan.Lists[s.me]
	dt := s.full.DType
	// One sender per peer, its queue as long as this step's sends to it.
	nsend := map[int]int{}
	for _, a := range list {
		if a.Kind == pipeline.SendF || a.Kind == pipeline.SendB {
			nsend[a.Peer]++
		}
	}
	senders := map[int]*sender{}
	for peer, n := range nsend {
		sd := &sender{q: make(chan []byte, n), done: make(chan error, 1)}
		senders[peer] = sd
		go func() {
			var first error
			for buf := range sd.q {
				if first == nil {
					first = s.pp.Send(ctx, numerics.I8, buf, peer)
				}
			}
			sd.done <- first
		}()
	}
	closed := false
	flush := func() error {
		if closed {
			return nil
		}
		closed = true
		var first error
		for _, sd := range senders {
			close(sd.q)
		}
		for _, sd := range senders {
			if err := <-sd.done; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	defer flush()

	data := make([]map[string]*tensor.Tensor, m)
	dataOf := func(mb int) map[string]*tensor.Tensor {
		if data[mb] == nil {
			x, t := s.full.Batch(seed, step, s.dpRank*m+mb, s.dpSize*m)
			data[mb] = map[string]*tensor.Tensor{"x": x, "target": t}
		}
		return data[mb]
	}
	acts := map[mbKey][]*tensor.Tensor{}  // a stage's boundary inputs for a micro-batch
	outs := map[mbKey][]*tensor.Tensor{}  // a forward's outputs waiting to be sent
	cots := map[mbKey][]*tensor.Tensor{}  // the gradients of a stage's outputs
	gins := map[mbKey][]*tensor.Tensor{}  // a backward's input gradients waiting to be sent
	pg := map[string][]*tensor.Tensor{}   // parameter -> gradient per micro-batch
	losses := make([]*tensor.Tensor, m)   // on the last stage's rank
	stash := map[pipeline.Message]*smsg{} // received ahead of need
	clock := 0

	feed := func(sp *stageProg, mb int) map[string]*tensor.Tensor {
		f := map[string]*tensor.Tensor{}
		for i, n := range sp.g.ins {
			f[n] = acts[mbKey{sp.g.index, mb}][i]
		}
		for _, n := range sp.g.params {
			f[n] = params[n]
		}
		for _, n := range sp.g.data {
			f[n] = dataOf(mb)[n]
		}
		return f
	}
	recv := func(want pipeline.Message, names []string) ([]*tensor.Tensor, error) {
		for {
			if got, ok := stash[want]; ok {
				delete(stash, want)
				clock = max(clock, got.clock)
				return got.ts, nil
			}
			buf := make([]byte, headerBytes+s.pairMax[[2]int{want.From, want.To}])
			if err := s.pp.Recv(ctx, numerics.I8, buf, want.From); err != nil {
				return nil, err
			}
			got, err := s.decode(buf, want.From)
			if err != nil {
				return nil, err
			}
			if _, dup := stash[got.msg]; dup {
				return nil, errs.New(errs.Desync, "pipeline: rank %d received %s of mb%d stage %d from rank %d twice", s.me, got.msg.Kind, got.msg.MB, got.msg.Stage, got.msg.From)
			}
			stash[got.msg] = got
		}
	}
	send := func(a pipeline.Action, ts []*tensor.Tensor) {
		msg := pipeline.MessageOf(a, s.me)
		buf := make([]byte, headerBytes, headerBytes+s.pairMax[[2]int{msg.From, msg.To}])
		binary.LittleEndian.PutUint32(buf[0:], uint32(msg.Kind))
		binary.LittleEndian.PutUint32(buf[4:], uint32(msg.Stage))
		binary.LittleEndian.PutUint32(buf[8:], uint32(msg.MB))
		binary.LittleEndian.PutUint32(buf[12:], uint32(clock))
		for _, t := range ts {
			buf = append(buf, t.Data...)
		}
		buf = buf[:cap(buf)]
		senders[a.Peer].q <- buf
	}

	// Overlap (with dp): a stage's gradients are final after its last backward in this list;
	// they are averaged over dp right then, by one worker in list order (the same order on every
	// replica), while the rest of the list runs. Sequential (Config.NoOverlap): all at the end.
	// The averages are element by element, so both give the same bits.
	grads := map[string]*tensor.Tensor{}
	lastB, lastCompute := map[int]int{}, -1
	for i, a := range list {
		if a.Kind == pipeline.Backward {
			lastB[a.Stage] = i
		}
		if a.Kind.Compute() {
			lastCompute = i
		}
	}
	mean := func(n string) *tensor.Tensor {
		return meanOf(pg[n], dt, failpoint.Enabled(failpoint.DistPPGradNotDividedByMicroBatches), failpoint.Enabled(failpoint.DistPPGradLastMicroBatchOnly))
	}
	var buckets chan []*tensor.Tensor
	bucketDone := make(chan error, 1)
	overlapped := 0
	if s.dp != nil && !s.noOverlap {
		buckets = make(chan []*tensor.Tensor, len(s.stages))
		go func() {
			var first error
			for b := range buckets {
				if first == nil && len(b) > 0 {
					first = averageAll(ctx, s.dp, s.timeout, b)
				}
			}
			bucketDone <- first
		}()
		defer func() {
			if buckets != nil {
				close(buckets)
				<-bucketDone
			}
		}()
	}

	for i, a := range list {
		if err := ctx.Err(); err != nil {
			return nil, nil, errs.New(errs.Timeout, "pipeline: rank %d at entry %d %s: %v", s.me, i, a, err)
		}
		k := mbKey{a.Stage, a.MB}
		switch a.Kind {
		case pipeline.Forward:
			sp := s.progs[a.Stage]
			res, err := s.be.Run(sp.fwd, feed(sp, a.MB))
			if err != nil {
				return nil, nil, errs.Wrap(errs.CodeOf(err), err, "pipeline: %s", a)
			}
			clock++
			if a.Stage == S-1 {
				losses[a.MB] = res[0]
			} else if plan.RankOf(a.Stage+1) == s.me {
				acts[mbKey{a.Stage + 1, a.MB}] = res
			} else {
				outs[k] = res
			}
		case pipeline.Backward:
			sp := s.progs[a.Stage]
			f := feed(sp, a.MB)
			if a.Stage < S-1 {
				for j, n := range sp.g.outs {
					f["d_"+n] = cots[k][j]
				}
			}
			res, err := s.be.Run(sp.bwd, f)
			if err != nil {
				return nil, nil, errs.Wrap(errs.CodeOf(err), err, "pipeline: %s", a)
			}
			clock++
			res = res[len(sp.g.outs):]
			gin, gp := res[:len(sp.g.ins)], res[len(sp.g.ins):]
			for j, n := range sp.g.params {
				if pg[n] == nil {
					pg[n] = make([]*tensor.Tensor, m)
				}
				pg[n][a.MB] = gp[j]
			}
			delete(acts, k)
			delete(cots, k)
			if buckets != nil && lastB[a.Stage] == i {
				var b []*tensor.Tensor
				for _, n := range sp.g.params {
					grads[n] = mean(n)
					b = append(b, grads[n])
				}
				if i < lastCompute {
					overlapped++
				}
				buckets <- b
			}
			if a.Stage > 0 {
				if plan.RankOf(a.Stage-1) == s.me {
					cots[mbKey{a.Stage - 1, a.MB}] = gin
				} else {
					gins[k] = gin
				}
			}
		case pipeline.SendF:
			send(a, outs[k])
			delete(outs, k)
		case pipeline.SendB:
			send(a, gins[k])
			delete(gins, k)
		case pipeline.RecvF:
			ts, err := recv(pipeline.MessageOf(a, s.me), s.stages[a.Stage].ins)
			if err != nil {
				return nil, nil, err
			}
			acts[k] = ts
		case pipeline.RecvB:
			ts, err := recv(pipeline.MessageOf(a, s.me), s.stages[a.Stage].outs)
			if err != nil {
				return nil, nil, err
			}
			cots[k] = ts
		}
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	// The gradients: micro-batches summed in order, then the mean's 1/m.
	for _, n := range s.own.Params {
		if grads[n] == nil {
			grads[n] = mean(n)
		}
	}
	s.lastOverlapped = overlapped
	if buckets != nil {
		close(buckets)
		err := <-bucketDone
		buckets = nil
		if err != nil {
			return nil, nil, err
		}
	}
	last := plan.RankOf(S - 1)
	loss := tensor.New(dt, nil)
	if s.me == last {
		loss = meanOf(losses, dt, false, false)
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	recvLoss := make([]byte, len(loss.Data))
	if err := s.pp.Broadcast(cctx, dt, loss.Data, recvLoss, last); err != nil {
		return nil, nil, err
	}
	loss = &tensor.Tensor{DType: dt, Shape: nil, Data: recvLoss}
	// The pipeline's virtual time: the largest clock over its ranks (in int32, so that no
	// float fault meant for the gradients lands in it).
	ck := binary.LittleEndian.AppendUint32(nil, uint32(clock))
	ckOut := make([]byte, 4)
	if err := s.pp.AllReduce(cctx, numerics.I32, ck, ckOut, dist.Max); err != nil {
		return nil, nil, err
	}
	s.lastMakespan = int(binary.LittleEndian.Uint32(ckOut))
	if s.dp != nil {
		ts := []*tensor.Tensor{loss}
		if s.noOverlap {
			ts = append(ts, gradList(s.own, grads)...)
		}
		if err := averageAll(ctx, s.dp, s.timeout, ts); err != nil {
			return nil, nil, err
		}
	}
	return loss, grads, nil
}

// meanOf is (sum of ts in order) / len(ts), each addition and the division rounded in dt; the
// planted faults leave out the division or keep only the last micro-batch.
func meanOf(ts []*tensor.Tensor, dt numerics.DType, noDivide, lastOnly bool) *tensor.Tensor {
	acc := ts[0].Clone()
	for _, t := range ts[1:] {
		if lastOnly {
			acc = t.Clone()
			continue
		}
		for i := range acc.Len() {
			acc.SetFloat64(i, acc.Float64(i)+t.Float64(i))
		}
	}
	if !noDivide {
		for i := range acc.Len() {
			acc.SetFloat64(i, acc.Float64(i)/float64(len(ts)))
		}
	}
	return acc
}

func (s *pipeStep) decode(buf []byte, from int) (*smsg, error) {
	kind := pipeline.Kind(binary.LittleEndian.Uint32(buf[0:]))
	stage := int(binary.LittleEndian.Uint32(buf[4:]))
	mb := int(binary.LittleEndian.Uint32(buf[8:]))
	got := &smsg{msg: pipeline.Message{Kind: kind, Stage: stage, MB: mb, From: from, To: s.me}, clock: int(binary.LittleEndian.Uint32(buf[12:]))}
	var names []string
	switch {
	case kind == pipeline.SendF && stage >= 0 && stage < len(s.stages)-1:
		names = s.stages[stage].outs
	case kind == pipeline.SendB && stage > 0 && stage < len(s.stages):
		names = s.stages[stage].ins
	default:
		return nil, errs.New(errs.Desync, "pipeline: rank %d received a message of kind %d stage %d from rank %d", s.me, kind, stage, from)
	}
	off := headerBytes
	for _, n := range names {
		v := s.full.Graph.Value(n).Type
		t := tensor.New(v.DType, v.Shape)
		off += copy(t.Data, buf[off:])
		got.ts = append(got.ts, t)
	}
	return got, nil
}

// agree: any rank's non-finite loss or gradient stops every rank (one all_reduce over the mesh).
func (s *pipeStep) agree(ctx context.Context, local error, step int) error {
	return agreeOver(ctx, s.groups.World, s.timeout, local, step, s.ms)
}

// digest gathers every parameter from the rank of its stage (a broadcast over pp per parameter)
// and digests them in the model's order: the one-rank run's form.
func (s *pipeStep) digest(ctx context.Context, params map[string]*tensor.Tensor) (string, error) {
	whole := map[string]*tensor.Tensor{}
	for _, n := range s.full.Params {
		v := s.full.Graph.Value(n).Type
		t := tensor.New(v.DType, v.Shape)
		root := s.plan.RankOf(s.owner[n])
		var sendBuf []byte
		if root == s.me {
			sendBuf = params[n].Data
		}
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		err := s.pp.Broadcast(cctx, v.DType, sendBuf, t.Data, root)
		cancel()
		if err != nil {
			return "", errs.Wrap(errs.CodeOf(err), err, "train: gathering %s for the digest", n)
		}
		whole[n] = t
	}
	return Digest(s.full, whole), nil
}

func (s *pipeStep) layoutText() string {
	return fmt.Sprintf("mesh %s, schedule %s, %d stages cut by training's pipeline cut", s.ms, s.plan, s.plan.Stages())
}

func (s *pipeStep) mesh() string { return s.ms.String() }

// agreeOver is meshStep.agree's verdict over any world communicator.
func agreeOver(ctx context.Context, world *dist.Comm, timeout time.Duration, local error, step int, ms *mesh.Mesh) error {
	bad := 0.0
	if local != nil {
		bad = 1
	}
	send := tensor.FromFloat64(numerics.F32, []int{1}, []float64{bad})
	recv := make([]byte, len(send.Data))
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := world.AllReduce(cctx, numerics.F32, send.Data, recv, dist.Sum); err != nil {
		return errs.Wrap(errs.CodeOf(err), err, "train: step %d on rank %d: agreeing on finite gradients", step, world.Rank())
	}
	if local != nil {
		return local
	}
	if n := math.Float32frombits(binary.LittleEndian.Uint32(recv)); n != 0 { // NaN too: a count corrupted on its way
		return errs.New(errs.NaNInf, "train: step %d on rank %d: %.0f rank(s) of mesh %s found NaN or Inf in their loss or gradients; the step is not applied", step, world.Rank(), n, ms)
	}
	return nil
}

// PipelineInfo is a pipelined run's schedule and the bubble of its last step, measured in
// virtual time (each stage's forward and backward one unit, a message arriving when it is
// sent: the clocks travel in the messages' headers) against the schedule's formula.
type PipelineInfo struct {
	Schedule      string  `json:"schedule"`
	Ranks         int     `json:"ranks"`
	MicroBatches  int     `json:"micro_batches"`
	Chunks        int     `json:"chunks"`
	Stages        int     `json:"stages"`
	Makespan      int     `json:"makespan"` // virtual time units of the last step
	Bubble        float64 `json:"bubble"`   // 1 - busy / (ranks x makespan)
	BubbleFormula float64 `json:"bubble_formula"`
	// OverlappedBuckets: with dp, the data-parallel gradient buckets (one per stage) of rank 0's
	// last step that started while stage passes were still to run.
	OverlappedBuckets int `json:"overlapped_buckets"`
}

func (s *pipeStep) info() *PipelineInfo {
	p := s.plan
	in := &PipelineInfo{Schedule: p.Name, Ranks: p.Ranks, MicroBatches: p.Micro, Chunks: p.Chunks, Stages: p.Stages(), Makespan: s.lastMakespan,
		BubbleFormula: pipeline.FormulaBubble(p.Name, p.Ranks, p.Micro, p.Chunks), OverlappedBuckets: s.lastOverlapped}
	if s.lastMakespan > 0 {
		in.Bubble = 1 - float64(2*p.Micro*p.Chunks)/float64(s.lastMakespan)
	}
	return in
}
