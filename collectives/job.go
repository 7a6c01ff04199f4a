package collectives

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Transports the checks know. inproc, tcp and shm (unix) are built in; a device transport
// (cuda, nccl) is usable once its package registers a joiner with RegisterTransport.
var Transports = []string{"inproc", "tcp", "shm", "cuda", "nccl"}

// DefaultWorld is the world size when the run names none and no launcher set one.
const DefaultWorld = 4

// Joiner joins the job this process is a rank of over a device transport (the way tcp.FromEnv
// does for tcp).
type Joiner func(ctx context.Context, timeout time.Duration) (dist.Transport, error)

var (
	joinMu  sync.Mutex
	joiners = map[string]Joiner{}
)

// RegisterTransport makes a process-per-rank transport available to the checks under name.
func RegisterTransport(name string, j Joiner) {
	joinMu.Lock()
	defer joinMu.Unlock()
	joiners[name] = j
}

func joiner(name string) (Joiner, error) {
	joinMu.Lock()
	defer joinMu.Unlock()
	if j, ok := joiners[name]; ok {
		return j, nil
	}
	return nil, errs.New(errs.Input, "collectives: unknown transport %q (want inproc, tcp, shm, cuda or nccl)", name)
}

// GlooBench times torch.distributed's gloo backend (differential/gloo, gloo.go) on world
// processes: the op on each byte size, seconds per call as timeIt measures ours (0 for a size
// of 0 bytes). GlooProbe checks first that an interpreter can run gloo at all (E_NO_DEVICE
// otherwise) and describes it. Tests may replace both; nil answers E_UNSUPPORTED.
var (
	GlooBench func(ctx context.Context, world int, op Op, red dist.RedOp, dt numerics.DType, sizes []int64, iters, warmup int) ([]float64, error)
	GlooProbe func(ctx context.Context) (string, error)
)

// Options is one `tessera-qa collectives` run.
type Options struct {
	Matrix    Matrix
	Transport string
	// Worlds to run (each a separate world; tcp starts that many processes). Empty:
	// DefaultWorld, or the job's WORLD_SIZE under a launcher, where only that size is allowed.
	Worlds []int
	// Modes run one after the other on each world (several: their times are compared,
	// ModeCost).
	Modes         []dist.Mode
	Iters, Warmup int
	Seed          uint64
	Timeout       time.Duration // per collective
	Delay         time.Duration // injected per-frame delays (Config.Delay)
	Mismatch      *Mismatch
	VsGloo        bool
	// Fabric, when set, runs the in-process worlds over a modeled fabric (--topology).
	Fabric *Fabric
	// CompareHost runs the same cases, worlds and modes on the inproc host transport in the
	// same command and puts its digests beside every row (CompareHost): how a device run
	// proves it gives the host transports' bits.
	CompareHost bool
	// Progress hears about inproc runs and rank 0 of a job: world, cases done, total.
	Progress func(world, done, total int)
	// Program and Args start one rank of a self-launched tcp job (tessera-qa and the verb's
	// arguments, without --np); Output receives the ranks' and the launcher's lines.
	Program string
	Args    []string
	Output  io.Writer
	Command string // recorded in the report
}

// Outcome is what a run produced in this process.
type Outcome struct {
	// Report: the rows and checks; nil on ranks other than 0, and when ranks failed.
	Report *Report
	// Quiet: this process is a rank of a self-launched job; its report went to $ResultEnv and
	// nothing is to be printed.
	Quiet bool
	// Exit is the first failing rank's exit code of a self-launched job (its ranks printed
	// their errors), 0 otherwise.
	Exit int
}

// Run runs a whole check as the verb describes it: every world over the transport, the
// cross-world checks, gloo's side when asked. Errors are coded: E_INPUT for bad options or
// rank variables, E_UNSUPPORTED for a transport or oracle not built in, and the collectives'
// own (E_DESYNC, E_TIMEOUT_COMM, E_COMM_INIT).
func Run(ctx context.Context, o Options) (*Outcome, error) {
	if o.Iters < 0 || o.Warmup < 0 {
		return nil, errs.New(errs.Input, "collectives: --iters %d and --warmup %d must not be negative", o.Iters, o.Warmup)
	}
	for _, n := range o.Worlds {
		if n < 1 || n > MaxInprocWorld {
			return nil, errs.New(errs.Input, "collectives: world size %d (want 1..%d)", n, MaxInprocWorld)
		}
	}
	if o.Fabric != nil && o.Transport != "inproc" {
		return nil, errs.New(errs.Input, "collectives --topology: the modeled fabric wraps the inproc transport's ranks (got --transport %s)", o.Transport)
	}
	if IsDevice(o.Transport) {
		if err := checkDeviceOptions(o); err != nil {
			return nil, err
		}
	}
	var glooInfo string
	if o.VsGloo && !launch.InJob() {
		if GlooBench == nil || GlooProbe == nil {
			return nil, errs.New(errs.Unsupported, "collectives --vs gloo: differential/gloo (torch.distributed with gloo) is not built into this tessera-qa")
		}
		// Before our side runs: a missing torch is E_NO_DEVICE at once, not after minutes.
		var err error
		if glooInfo, err = GlooProbe(ctx); err != nil {
			return nil, err
		}
	}
	if len(o.Modes) == 0 {
		o.Modes = []dist.Mode{dist.Deterministic}
	}
	cfg := Config{Iters: o.Iters, Warmup: o.Warmup, Seed: o.Seed, Timeout: o.Timeout, Delay: o.Delay, Mismatch: o.Mismatch}
	if len(o.Worlds) > 0 {
		cfg.Split = SplitFor(slices.Max(o.Worlds))
	}
	rep := &Report{Schema: ReportSchema, Kind: ReportKind, Started: time.Now().UTC(), DeviceClass: "cpu/" + runtime.GOARCH,
		Command: o.Command, Seed: o.Seed, Iters: o.Iters, Warmup: o.Warmup, Gloo: glooInfo}
	rep.Machine, _ = os.Hostname()
	switch o.Transport {
	case "inproc":
		worlds := o.Worlds
		if len(worlds) == 0 {
			worlds = []int{DefaultWorld}
		}
		for _, n := range worlds {
			for mi, mode := range o.Modes {
				c := cfg
				c.Mode = mode
				c.Cases = o.Matrix.Cases(n)
				if o.Progress != nil {
					total := len(c.Cases) * len(o.Modes)
					c.Progress = func(done, _ int) { o.Progress(n, mi*len(c.Cases)+done, total) }
				}
				var rows []Row
				var err error
				if o.Fabric != nil {
					rows, err = runFabric(ctx, o.Fabric, n, c)
				} else {
					rows, err = RunInproc(ctx, n, c)
				}
				if err != nil {
					return nil, err
				}
				rep.Rows = append(rep.Rows, rows...)
			}
		}
	default:
		var join func(ctx context.Context) (member, error)
		if IsDevice(o.Transport) {
			join = func(ctx context.Context) (member, error) { return joinDevice(ctx, o.Transport, o.Timeout) }
		} else {
			j, err := joiner(o.Transport)
			if err != nil {
				return nil, err
			}
			join = func(ctx context.Context) (member, error) {
				t, err := j(ctx, 0)
				if err != nil {
					return nil, err
				}
				return tcpMember{t}, nil
			}
		}
		if launch.InJob() {
			return runJobRank(ctx, o, cfg, rep, join)
		}
		if IsDevice(o.Transport) {
			// Before any rank starts: no device or no libnccl is one E_NO_DEVICE line.
			class, err := DeviceProbe(ctx, o.Transport)
			if err != nil {
				return nil, err
			}
			rep.DeviceClass = class
		}
		worlds := o.Worlds
		if len(worlds) == 0 {
			worlds = []int{DefaultWorld}
		}
		for _, n := range worlds {
			sub, exit, err := SelfLaunch(ctx, LaunchSpec{World: n, Program: o.Program, Args: o.Args, Output: o.Output})
			if err != nil || exit != 0 {
				return &Outcome{Exit: exit}, err
			}
			rep.Rows = append(rep.Rows, sub.Rows...)
			if sub.DeviceClass != "" && IsDevice(o.Transport) {
				rep.DeviceClass = sub.DeviceClass
			}
		}
	}
	if err := finish(ctx, o, rep); err != nil {
		return nil, err
	}
	return &Outcome{Report: rep}, nil
}

// runJobRank is one rank of a job started by a launcher (tessera-qa launch, torchrun, srun, or
// by SelfLaunch).
func runJobRank(ctx context.Context, o Options, cfg Config, rep *Report, join func(context.Context) (member, error)) (*Outcome, error) {
	n, err := JobWorld()
	if err != nil {
		return nil, err
	}
	if len(o.Worlds) > 1 || (len(o.Worlds) == 1 && o.Worlds[0] != n) {
		return nil, errs.New(errs.Input, "collectives: --np %v, but the launcher started a world of %d (WORLD_SIZE): leave --np out under a launcher", o.Worlds, n)
	}
	cfg.Cases = o.Matrix.Cases(n)
	m, err := join(ctx)
	if err != nil {
		return nil, err
	}
	defer m.close()
	if dc := m.deviceClass(); dc != "" {
		rep.DeviceClass = dc
	}
	for mi, mode := range o.Modes {
		c := cfg
		c.Mode = mode
		if o.Progress != nil {
			total := len(c.Cases) * len(o.Modes)
			c.Progress = func(done, _ int) { o.Progress(n, mi*len(c.Cases)+done, total) }
		}
		rows, err := m.runMode(ctx, c, mi)
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	if m.rank() != 0 {
		return &Outcome{Quiet: true}, nil
	}
	if err := finish(ctx, o, rep); err != nil {
		return nil, err
	}
	if path := os.Getenv(ResultEnv); path != "" {
		data, err := json.Marshal(rep)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "collectives: encode the report")
		}
		if err := atomicfile.Write(path, data); err != nil {
			return nil, errs.Wrap(errs.Input, err, "collectives: write %s", path)
		}
		return &Outcome{Report: rep, Quiet: true}, nil
	}
	return &Outcome{Report: rep}, nil
}

// checkDeviceOptions refuses what the device transports cannot do: exact mode (not
// implemented on the device communicators), injected delays and mismatched calls (they act on
// host frames), --vs gloo (a CPU comparison). All E_INPUT, before anything starts.
func checkDeviceOptions(o Options) error {
	switch {
	case slices.Contains(o.Modes, dist.Exact):
		return errs.New(errs.Input, "collectives --transport %s --mode exact: exact mode is not implemented on the device transports (run it on inproc or tcp)", o.Transport)
	case o.Delay > 0:
		return errs.New(errs.Input, "collectives --transport %s --delay: injected delays act on host frames (use inproc, tcp or shm)", o.Transport)
	case o.Mismatch != nil:
		return errs.New(errs.Input, "collectives --transport %s --mismatch: mismatched calls are checked on the host transports", o.Transport)
	case o.VsGloo:
		return errs.New(errs.Input, "collectives --transport %s --vs gloo: gloo is compared with the host transports (inproc, tcp, shm)", o.Transport)
	}
	return nil
}

// TCPJoiner is the built-in tcp transport's joiner.
func init() {
	RegisterTransport("tcp", func(ctx context.Context, timeout time.Duration) (dist.Transport, error) {
		return tcpFromEnv(ctx, timeout)
	})
}

// finish adds gloo's side, the cross-world checks and the verdict.
func finish(ctx context.Context, o Options, rep *Report) error {
	if o.VsGloo {
		if err := addGloo(ctx, o, rep.Rows, &rep.Notes); err != nil {
			return err
		}
	}
	if o.CompareHost {
		if o.Transport == "inproc" {
			rep.Notes = append(rep.Notes, "--compare-host: the rows are the inproc host transport's already")
		} else {
			host, err := hostTwins(ctx, o, rep.Rows)
			if err != nil {
				return err
			}
			rep.Checks = append(rep.Checks, CompareHost(rep.Rows, host))
		}
	}
	worlds := map[int]bool{}
	for _, r := range rep.Rows {
		worlds[r.World] = true
	}
	if slices.Contains(o.Modes, dist.Exact) && len(worlds) > 1 {
		cases, bad := SplitAgreement(rep.Rows)
		var ws []string
		for w := range worlds {
			ws = append(ws, fmt.Sprint(w))
		}
		sort.Strings(ws)
		rep.Checks = append(rep.Checks, Check{Name: fmt.Sprintf("exact all_reduce: the same bits on worlds %s (%d cases)", strings.Join(ws, ","), cases),
			Passed: len(bad) == 0 && cases > 0, Detail: bad})
	}
	rep.Checks = append(rep.Checks, fabricChecks(rep.Rows)...)
	if len(o.Modes) > 1 {
		rep.ModeCost = ModeCosts(rep.Rows, o.Modes[0].String())
	}
	rep.Finish()
	return nil
}

// ModeCosts compares the times of every timed row with the row of the base mode that has the
// same case, world and transport: exact mode's cost over deterministic mode's, measured in one
// command.
func ModeCosts(rows []Row, base string) []ModeCost {
	key := func(r Row) string {
		return fmt.Sprintf("%s/%s/%s/%d/%d/%d/%s", r.Op, r.DType, r.RedOp, r.Root, r.Count, r.World, r.Transport)
	}
	bases := map[string]Row{}
	for _, r := range rows {
		if r.Mode == base {
			bases[key(r)] = r
		}
	}
	var out []ModeCost
	for _, r := range rows {
		b, ok := bases[key(r)]
		if r.Mode == base || !ok || b.TimeUS <= 0 || r.TimeUS <= 0 {
			continue
		}
		mc := ModeCost{Op: r.Op, DType: r.DType, RedOp: r.RedOp, World: r.World, Transport: r.Transport, Bytes: r.Bytes,
			Mode: r.Mode, Base: base, Ratio: r.TimeUS / b.TimeUS}
		if b.TimeUSIP > 0 && r.TimeUSIP > 0 {
			mc.RatioIP = r.TimeUSIP / b.TimeUSIP
		}
		out = append(out, mc)
	}
	return out
}

// addGloo times gloo on every (world, op, reduction, dtype) group's sizes and fills the rows'
// gloo columns; the bandwidths go through Bandwidth, like ours.
func addGloo(ctx context.Context, o Options, rows []Row, notes *[]string) error {
	type key struct {
		world          int
		op, red, dtype string
	}
	groups := map[key][]int{}
	var order []key
	for i, r := range rows {
		k := key{r.World, r.Op, r.RedOp, r.DType}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range order {
		idx := groups[k]
		var sizes []int64
		for _, i := range idx {
			sizes = append(sizes, rows[i].Bytes)
		}
		red := dist.RedNone
		if k.red != "none" {
			red, _ = dist.ParseRedOp(k.red)
		}
		dt, _ := numerics.Parse(k.dtype)
		secs, err := GlooBench(ctx, k.world, Op(k.op), red, dt, sizes, o.Iters, o.Warmup)
		if errs.CodeOf(err) == errs.Unsupported {
			// gloo has no reduce_scatter, no avg, no bf16 reductions, no fp8: say so, go on.
			*notes = append(*notes, err.Error())
			continue
		}
		if err != nil {
			return err
		}
		if len(secs) != len(idx) {
			return errs.New(errs.Internal, "collectives --vs gloo: %d times for %d sizes", len(secs), len(idx))
		}
		for j, i := range idx {
			r := &rows[i]
			if secs[j] <= 0 {
				continue
			}
			r.GlooTimeUS = secs[j] * 1e6
			_, r.GlooBusBWGBs = Bandwidth(Op(r.Op), r.World, r.Bytes, secs[j])
			if r.GlooBusBWGBs > 0 {
				r.Ratio, r.RatioIP = r.BusBWGBs/r.GlooBusBWGBs, r.BusBWGBsIP/r.GlooBusBWGBs
			}
		}
	}
	return nil
}

// hostTwins runs, on the inproc transport, every (world, mode) the rows cover, on the same
// cases and seed, untimed (digests do not depend on timing).
func hostTwins(ctx context.Context, o Options, rows []Row) ([]Row, error) {
	type wm struct {
		world int
		mode  string
	}
	seen := map[wm]bool{}
	var out []Row
	for _, r := range rows {
		k := wm{r.World, r.Mode}
		if seen[k] {
			continue
		}
		seen[k] = true
		mode, err := dist.ParseMode(r.Mode)
		if err != nil {
			return nil, err
		}
		host, err := RunInproc(ctx, r.World, Config{Cases: o.Matrix.Cases(r.World), Mode: mode, Seed: o.Seed, Timeout: o.Timeout})
		if err != nil {
			return nil, err
		}
		out = append(out, host...)
	}
	return out, nil
}
