package mig

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// `nvidia-smi -L` prints one line per GPU and, indented under it, one per MIG device:
//
//	GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4a7b2e3c-...)
//	  MIG 3g.40gb     Device  0: (UUID: MIG-9f1d...)
//
// Drivers before R470 printed MIG UUIDs as MIG-GPU-<gpu uuid>/<gi>/<ci>, which carries the
// instance ids; ParseSMI reads them from there when present.
var (
	gpuLineRE = regexp.MustCompile(`^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Za-z-]+)\)$`)
	migLineRE = regexp.MustCompile(`^MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[0-9A-Za-z/-]+)\)$`)
	oldMIGRE  = regexp.MustCompile(`^MIG-GPU-[0-9A-Za-z-]+/(\d+)/(\d+)$`)
)

// ParseSMI parses `nvidia-smi -L` output. Blank lines are ignored; any other line that is
// neither a GPU nor a MIG device line (under a GPU) is E_PARSE naming the line, since a
// format this parser does not know must not silently lose partitions.
func ParseSMI(text string) ([]GPU, error) {
	var gpus []GPU
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(strings.TrimRight(raw, "\r"))
		if line == "" {
			continue
		}
		if m := gpuLineRE.FindStringSubmatch(line); m != nil {
			idx, err := strconv.Atoi(m[1])
			if err != nil || idx > 1<<16 {
				return nil, errs.New(errs.Parse, "nvidia-smi -L line %d: GPU index %q", n+1, m[1])
			}
			gpus = append(gpus, GPU{Index: idx, Name: m[2], UUID: m[3], MIGMode: ModeUnknown})
			continue
		}
		if m := migLineRE.FindStringSubmatch(line); m != nil {
			if len(gpus) == 0 {
				return nil, errs.New(errs.Parse, "nvidia-smi -L line %d: MIG device before any GPU: %q", n+1, line)
			}
			dev, err := strconv.Atoi(m[2])
			if err != nil || dev > 1<<16 {
				return nil, errs.New(errs.Parse, "nvidia-smi -L line %d: MIG device index %q", n+1, m[2])
			}
			if !profileRE.MatchString(m[1]) {
				return nil, errs.New(errs.Parse, "nvidia-smi -L line %d: MIG profile %q", n+1, m[1])
			}
			p := Partition{Device: dev, Profile: m[1], UUID: m[3], GPUInstance: -1, ComputeInstance: -1}
			if o := oldMIGRE.FindStringSubmatch(m[3]); o != nil {
				gi, err1 := strconv.Atoi(o[1])
				ci, err2 := strconv.Atoi(o[2])
				if err1 == nil && err2 == nil && gi <= 1<<16 && ci <= 1<<16 {
					p.GPUInstance, p.ComputeInstance = gi, ci
				}
			} else if strings.Contains(m[3], "/") {
				return nil, errs.New(errs.Parse, "nvidia-smi -L line %d: MIG UUID %q", n+1, m[3])
			}
			g := &gpus[len(gpus)-1]
			g.Partitions = append(g.Partitions, p)
			g.MIGMode = ModeEnabled
			continue
		}
		return nil, errs.New(errs.Parse, "nvidia-smi -L line %d: not a GPU or MIG device line: %q", n+1, line)
	}
	return gpus, nil
}

// FormatSMI prints gpus the way `nvidia-smi -L` does (current drivers' layout).
func FormatSMI(gpus []GPU) string {
	var b strings.Builder
	for _, g := range gpus {
		fmt.Fprintf(&b, "GPU %d: %s (UUID: %s)\n", g.Index, g.Name, g.UUID)
		for _, p := range g.Partitions {
			fmt.Fprintf(&b, "  MIG %-13s Device %2d: (UUID: %s)\n", p.Profile, p.Device, p.UUID)
		}
	}
	return b.String()
}
