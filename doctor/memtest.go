package doctor

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Patterns are the memory test's word patterns, in order: all zeros, all ones, the two
// checkerboards, and each word's own index hashed (catches address lines that alias: a
// fixed pattern reads back right from the wrong cell).
var Patterns = []string{"zeros", "ones", "checker-55", "checker-aa", "address"}

// patternWord is word i of pattern p.
func patternWord(p int, i uint64) uint32 {
	switch p {
	case 0:
		return 0
	case 1:
		return 0xFFFFFFFF
	case 2:
		return 0x55555555
	case 3:
		return 0xAAAAAAAA
	}
	return uint32(i*0x9E3779B1) ^ 0xA5A5A5A5
}

// MemtestResult is one pattern test of one buffer.
type MemtestResult struct {
	Bytes     uint64
	Passes    int
	Errors    uint64 // words that read back wrong
	FirstBad  int64  // word index of the first error (-1 none)
	Pattern   string // the first failing pattern
	Seconds   float64
	GBPerSecs float64 // bytes written and read per second
}

// memtestHost tests a host buffer of n bytes with every pattern, passes times: the CPU
// backend's memory. mem is the buffer (tests pass one with a planted bad cell).
func memtestHost(ctx context.Context, mem []byte, passes int) (MemtestResult, error) {
	r := MemtestResult{Bytes: uint64(len(mem)), Passes: passes, FirstBad: -1}
	start := time.Now()
	words := uint64(len(mem) / 4)
	for pass := range passes {
		for p := range Patterns {
			if err := ctx.Err(); err != nil {
				return r, errs.New(errs.Timeout, "memory test stopped in pass %d: %v", pass, err)
			}
			for i := range words {
				binary.LittleEndian.PutUint32(mem[i*4:], patternWord(p, i))
			}
			for i := range words {
				if binary.LittleEndian.Uint32(mem[i*4:]) != patternWord(p, i) {
					if r.Errors == 0 {
						r.FirstBad, r.Pattern = int64(i), Patterns[p]
					}
					r.Errors++
				}
			}
		}
	}
	r.Seconds = time.Since(start).Seconds()
	if r.Seconds > 0 {
		r.GBPerSecs = float64(2*uint64(len(mem))*uint64(passes*len(Patterns))) / r.Seconds / 1e9
	}
	return r, nil
}

// memtestCheck turns a result into a check.
func memtestCheck(name string, level int, dev string, r MemtestResult, err error) Check {
	c := Check{Name: name, Level: level, Device: dev, Seconds: r.Seconds,
		Values: map[string]float64{"bytes": float64(r.Bytes), "passes": float64(r.Passes), "errors": float64(r.Errors), "gbps": r.GBPerSecs}}
	switch {
	case err != nil:
		c.Verdict, c.Reason, c.Code = Fail, errs.Line(err), string(errs.CodeOf(err))
	case r.Errors > 0:
		c.Verdict, c.Code = Fail, string(errs.SDC)
		c.Reason = fmt.Sprintf("%s: %d words read back wrong over %d MiB, first at word %d with pattern %s", errs.SDC, r.Errors, r.Bytes>>20, r.FirstBad, r.Pattern)
	default:
		c.Verdict = Pass
		c.Reason = fmt.Sprintf("%d MiB x %d patterns x %d passes read back right", r.Bytes>>20, len(Patterns), r.Passes)
	}
	return c
}
