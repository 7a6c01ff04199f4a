package doctor

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Target is one device doctor runs kernels on.
type Target struct {
	ID      string // "cpu:0", "gpu:0"
	Backend backend.Backend
}

// SDCFinding is one output whose bits differ from its pin.
type SDCFinding struct {
	Device string `json:"device"`
	Case   string `json:"case"`
	// Kernel is the kernel that wrote the differing output (the last one writing its buffer).
	Kernel string `json:"kernel"`
	Output int    `json:"output"`
	Pinned string `json:"pinned_digest"`
	Got    string `json:"got_digest"`
	// Element is the first differing element (-1: not located), GotBits and WantBits its
	// bytes in hex, little-endian, and LocatedBy what the bits were compared with: another
	// device of the class whose bits match the pin ("witness cpu:0"), or a rerun on the same
	// device that matched it ("rerun").
	Element   int    `json:"element"`
	GotBits   string `json:"got_bits,omitempty"`
	WantBits  string `json:"want_bits,omitempty"`
	LocatedBy string `json:"located_by,omitempty"`
}

// Line is the finding as one E_SDC line.
func (f SDCFinding) Line() string {
	where := "first differing element not located (no device of the class reproduced the pin)"
	if f.Element >= 0 {
		where = fmt.Sprintf("first differing element %d: got %s, want %s (by %s)", f.Element, f.GotBits, f.WantBits, f.LocatedBy)
	}
	return fmt.Sprintf("%s: device %s, kernel %s, case %s, output %d: digest %.16s, pinned %.16s; %s",
		errs.SDC, f.Device, f.Kernel, f.Case, f.Output, f.Got, f.Pinned, where)
}

// SDCOptions configures a scan.
type SDCOptions struct {
	// Specs is the catalogue to run (golden.Catalogue() when nil); only pinned cases run.
	Specs []golden.Spec
	// Pins holds the pin files (golden.Pins() when nil).
	Pins fs.FS
	// Level is the level the checks are reported at; Name their name (default sdc/pinned-catalogue).
	Level int
	Name  string
}

// devRun is one target's part of a scan.
type devRun struct {
	t        Target
	pin      pins.File
	checked  int
	skip     string
	errCases []string
	findings []SDCFinding
	start    time.Time
}

type runOut struct {
	outs    []*tensor.Tensor
	digests []string
	err     error
}

// ScanSDC runs every pinned catalogue case on every target and compares each output's digest
// with the pin of the target's device class: one check per target, failing with E_SDC and one
// finding per differing output, skipped when the class has no pins. ctx bounds the scan
// between cases.
func ScanSDC(ctx context.Context, targets []Target, o SDCOptions) []Check {
	if o.Specs == nil {
		o.Specs = golden.Catalogue()
	}
	if o.Pins == nil {
		o.Pins = golden.Pins()
	}
	if o.Name == "" {
		o.Name = "sdc/pinned-catalogue"
	}
	runs := make([]*devRun, len(targets))
	for i, t := range targets {
		r := &devRun{t: t, start: time.Now()}
		runs[i] = r
		class := t.Backend.DeviceClass()
		f, ok, err := pins.Load(o.Pins, golden.PinsRoot, class)
		switch {
		case err != nil:
			r.skip = "pins of class " + class + ": " + errs.Line(err)
		case !ok:
			r.skip = fmt.Sprintf("no pinned digests for device class %s in %s (not a pass: nothing to compare with; record them with `tessera-qa determinism pin --backend %s`)", class, golden.PinsRoot, t.Backend.Name())
		default:
			r.pin = f
		}
	}
	for _, s := range o.Specs {
		if ctx.Err() != nil {
			break
		}
		var prog *compiler.Program
		var in map[string]*tensor.Tensor
		var prepErr error
		now := map[*devRun]runOut{}
		for _, r := range runs {
			if r.skip != "" {
				continue
			}
			if _, pinned := r.pin.Cases[s.Name]; !pinned {
				continue
			}
			if prog == nil && prepErr == nil {
				if prog, prepErr = compiler.Compile(s.Graph, compiler.Options{}); prepErr == nil {
					in, prepErr = s.Inputs()
				}
			}
			r.checked++
			if prepErr != nil {
				r.errCases = append(r.errCases, s.Name+": "+errs.Line(prepErr))
				continue
			}
			res := runOnce(r.t.Backend, prog, in)
			if res.err != nil {
				r.errCases = append(r.errCases, s.Name+": "+errs.Line(res.err))
				continue
			}
			now[r] = res
		}
		// Judge this case on every device now, while the outputs are at hand for locating.
		for _, r := range runs {
			res, ok := now[r]
			if !ok {
				continue
			}
			want := r.pin.Cases[s.Name].Outputs
			for i, d := range res.digests {
				if i < len(want) && d == want[i] {
					continue
				}
				f := SDCFinding{Device: r.t.ID, Case: s.Name, Kernel: kernelOf(prog, i), Output: i, Got: d, Element: -1}
				if i < len(want) {
					f.Pinned = want[i]
				}
				locate(&f, res.outs[i], r, now, prog, in)
				r.findings = append(r.findings, f)
			}
		}
	}
	var out []Check
	for _, r := range runs {
		c := Check{Name: o.Name, Level: o.Level, Device: r.t.ID}
		if r.skip != "" {
			c.Verdict, c.Reason = Skipped, r.skip
			out = append(out, c)
			continue
		}
		errCases := r.errCases
		c.SDC = r.findings
		c.Seconds = time.Since(r.start).Seconds()
		c.Values = map[string]float64{"cases": float64(r.checked), "differing_outputs": float64(len(c.SDC)), "errors": float64(len(errCases))}
		switch {
		case len(c.SDC) > 0:
			c.Verdict, c.Code = Fail, string(errs.SDC)
			c.Reason = fmt.Sprintf("%d outputs differ from the %s pins; first: %s", len(c.SDC), r.t.Backend.DeviceClass(), c.SDC[0].Line())
		case len(errCases) > 0:
			c.Verdict, c.Reason = Fail, fmt.Sprintf("%d cases did not run; first: %s", len(errCases), errCases[0])
		case ctx.Err() != nil:
			c.Verdict, c.Reason = Fail, fmt.Sprintf("%s: scan stopped after %d cases: %v", errs.Timeout, r.checked, ctx.Err())
			c.Code = string(errs.Timeout)
		case r.checked == 0:
			c.Verdict, c.Reason = Skipped, "no case of the scan is pinned for class "+r.t.Backend.DeviceClass()
		default:
			c.Verdict, c.Reason = Pass, fmt.Sprintf("%d pinned cases bit for bit as pinned for %s", r.checked, r.t.Backend.DeviceClass())
		}
		out = append(out, c)
	}
	return out
}

// runOnce runs p on b, turning a panic into an error (a corrupt device may crash a kernel).
func runOnce(b backend.Backend, p *compiler.Program, in map[string]*tensor.Tensor) (r runOut) {
	defer func() {
		if x := recover(); x != nil {
			r = runOut{err: errs.New(errs.Internal, "panic in run: %v", x)}
		}
	}()
	outs, err := b.Run(p, in)
	if err != nil {
		return runOut{err: err}
	}
	return runOut{outs: outs, digests: harness.Digests(outs)}
}

// kernelOf names the last kernel of p that writes output i.
func kernelOf(p *compiler.Program, i int) string {
	if i >= len(p.Outputs) {
		return "?"
	}
	name := "(none: the output is an input or a constant)"
	for _, k := range p.Kernels {
		for _, prm := range k.Params {
			if prm.Output && prm.Buffer == p.Outputs[i] {
				name = k.Name
				for _, s := range p.Schedules {
					if s.Kernel == k.Name {
						name = k.Name + " (" + s.Kind + " " + s.Key + ")"
					}
				}
			}
		}
	}
	return name
}

// locate finds f's first differing element: against another device of the class whose bits
// match the pin, else against a rerun on the same device that matches it (a transient fault).
func locate(f *SDCFinding, got *tensor.Tensor, self *devRun, now map[*devRun]runOut, p *compiler.Program, in map[string]*tensor.Tensor) {
	class := self.t.Backend.DeviceClass()
	var ids []*devRun
	for r := range now {
		ids = append(ids, r)
	}
	slices.SortFunc(ids, func(a, b *devRun) int { return strings.Compare(a.t.ID, b.t.ID) })
	for _, rr := range ids {
		res := now[rr]
		if rr == self || rr.t.Backend.DeviceClass() != class || f.Output >= len(res.digests) || res.digests[f.Output] != f.Pinned {
			continue
		}
		firstDiff(f, got, res.outs[f.Output], "witness "+rr.t.ID)
		return
	}
	again := runOnce(self.t.Backend, p, in)
	if again.err == nil && f.Output < len(again.digests) && again.digests[f.Output] == f.Pinned {
		firstDiff(f, got, again.outs[f.Output], "rerun")
	}
}

func firstDiff(f *SDCFinding, got, want *tensor.Tensor, by string) {
	size := max(got.DType.Size(), 1)
	n := min(len(got.Data), len(want.Data))
	for off := 0; off < n; off += size {
		end := min(off+size, n)
		if !bytes.Equal(got.Data[off:end], want.Data[off:end]) {
			f.Element, f.LocatedBy = off/size, by
			f.GotBits, f.WantBits = hex.EncodeToString(got.Data[off:end]), hex.EncodeToString(want.Data[off:end])
			return
		}
	}
	if len(got.Data) != len(want.Data) {
		f.Element, f.LocatedBy = n/size, by+" (lengths differ)"
	}
}
