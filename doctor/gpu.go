package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// memtestPTX holds the device memory test's own kernels: write fills n words with pattern p
// (as patternWord), check counts the words that differ into *bad and keeps the lowest such
// index in *first. Grid-stride loops, so any grid covers any n.
const memtestPTX = `.version 8.0
.target sm_90
.address_size 64

.func (.reg .u32 %w) pattern(.reg .u64 %i, .reg .u64 %p)
{
	.reg .pred %q<4>;
	.reg .u32 %t;
	setp.eq.u64 %q0, %p, 0;
	setp.eq.u64 %q1, %p, 1;
	setp.eq.u64 %q2, %p, 2;
	setp.eq.u64 %q3, %p, 3;
	cvt.u32.u64 %t, %i;
	mul.lo.u32 %t, %t, 0x9E3779B1;
	xor.b32 %w, %t, 0xA5A5A5A5;
	@%q0 mov.u32 %w, 0;
	@%q1 mov.u32 %w, 0xFFFFFFFF;
	@%q2 mov.u32 %w, 0x55555555;
	@%q3 mov.u32 %w, 0xAAAAAAAA;
	ret;
}

.visible .entry memtest_write(.param .u64 buf, .param .u64 n, .param .u64 p)
{
	.reg .u64 %b, %n, %p, %i, %stride, %a, %t;
	.reg .u32 %w, %rtid, %rntid, %rctaid, %rnctaid;
	.reg .pred %done;
	ld.param.u64 %b, [buf];
	ld.param.u64 %n, [n];
	ld.param.u64 %p, [p];
	mov.u32 %rtid, %tid.x;
	mov.u32 %rntid, %ntid.x;
	mov.u32 %rctaid, %ctaid.x;
	mov.u32 %rnctaid, %nctaid.x;
	mul.wide.u32 %i, %rctaid, %rntid;
	cvt.u64.u32 %t, %rtid;
	add.u64 %i, %i, %t;
	mul.wide.u32 %stride, %rnctaid, %rntid;
LOOP:
	setp.ge.u64 %done, %i, %n;
	@%done bra END;
	call (%w), pattern, (%i, %p);
	shl.b64 %a, %i, 2;
	add.u64 %a, %b, %a;
	st.global.u32 [%a], %w;
	add.u64 %i, %i, %stride;
	bra LOOP;
END:
	ret;
}

.visible .entry memtest_check(.param .u64 buf, .param .u64 n, .param .u64 p, .param .u64 bad, .param .u64 first)
{
	.reg .u64 %b, %n, %p, %i, %stride, %a, %t, %bad, %first, %old;
	.reg .u32 %w, %v, %rtid, %rntid, %rctaid, %rnctaid;
	.reg .pred %done, %ok;
	ld.param.u64 %b, [buf];
	ld.param.u64 %n, [n];
	ld.param.u64 %p, [p];
	ld.param.u64 %bad, [bad];
	ld.param.u64 %first, [first];
	mov.u32 %rtid, %tid.x;
	mov.u32 %rntid, %ntid.x;
	mov.u32 %rctaid, %ctaid.x;
	mov.u32 %rnctaid, %nctaid.x;
	mul.wide.u32 %i, %rctaid, %rntid;
	cvt.u64.u32 %t, %rtid;
	add.u64 %i, %i, %t;
	mul.wide.u32 %stride, %rnctaid, %rntid;
LOOP:
	setp.ge.u64 %done, %i, %n;
	@%done bra END;
	call (%w), pattern, (%i, %p);
	shl.b64 %a, %i, 2;
	add.u64 %a, %b, %a;
	ld.global.volatile.u32 %v, [%a];
	setp.eq.u32 %ok, %v, %w;
	@%ok bra NEXT;
	atom.global.add.u64 %old, [%bad], 1;
	atom.global.min.u64 %old, [%first], %i;
NEXT:
	add.u64 %i, %i, %stride;
	bra LOOP;
END:
	ret;
}
`

// gpuMemtest runs the pattern test over frac of the device's free memory (bytes when set).
func gpuMemtest(ctx context.Context, r *cuda.Raw, free uint64, frac, bytes float64, passes int) (MemtestResult, error) {
	n := uint64(frac * float64(free))
	if bytes > 0 {
		n = uint64(bytes)
	}
	n &^= 1<<20 - 1 // whole MiB
	res := MemtestResult{Bytes: n, Passes: passes, FirstBad: -1}
	if n == 0 {
		return res, errs.New(errs.OOM, "memory test: %d bytes free, nothing to test", free)
	}
	buf, err := r.Alloc(int(n))
	if err != nil {
		return res, err
	}
	defer r.Free(buf) //nolint:errcheck // freed at exit otherwise
	ctr, err := r.Alloc(16)
	if err != nil {
		return res, err
	}
	defer r.Free(ctr) //nolint:errcheck
	words := n / 4
	grid := int(min(words/256+1, 65535))
	start := time.Now()
	for pass := range passes {
		for p := range Patterns {
			init := make([]byte, 16)
			for i := 8; i < 16; i++ {
				init[i] = 0xFF // first = max
			}
			if err := r.Upload(ctx, ctr, init); err != nil {
				return res, err
			}
			if err := r.Launch(memtestPTX, "memtest_write", grid, 256, []uint64{buf, words, uint64(p)}); err != nil {
				return res, err
			}
			if err := r.Launch(memtestPTX, "memtest_check", grid, 256, []uint64{buf, words, uint64(p), ctr, ctr + 8}); err != nil {
				return res, err
			}
			out := make([]byte, 16)
			if err := r.Download(ctx, out, ctr); err != nil {
				return res, fmt.Errorf("memory test pass %d pattern %s: %w", pass, Patterns[p], err)
			}
			bad, first := le64(out[:8]), le64(out[8:])
			if bad > 0 && res.Errors == 0 {
				res.FirstBad, res.Pattern = int64(first), Patterns[p]
			}
			res.Errors += bad
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.GBPerSecs = float64(2*n*uint64(passes*len(Patterns))) / res.Seconds / 1e9
	}
	return res, nil
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// gpuBandwidth measures host-to-device, device-to-host (pageable host memory, wall clock over
// reps copies) and device-to-device copies (CUDA events; read plus write bytes) of size bytes.
func gpuBandwidth(ctx context.Context, r *cuda.Raw, size int, reps int) (h2d, d2h, d2d float64, err error) {
	a, err := r.Alloc(size)
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.Free(a) //nolint:errcheck
	b, err := r.Alloc(size)
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.Free(b) //nolint:errcheck
	host := make([]byte, size)
	for i := range host {
		host[i] = byte(i * 7)
	}
	if err := r.Upload(ctx, a, host); err != nil { // warm-up
		return 0, 0, 0, err
	}
	t := time.Now()
	for range reps {
		if err := r.Upload(ctx, a, host); err != nil {
			return 0, 0, 0, err
		}
	}
	h2d = float64(size*reps) / time.Since(t).Seconds() / 1e9
	t = time.Now()
	for range reps {
		if err := r.Download(ctx, host, a); err != nil {
			return 0, 0, 0, err
		}
	}
	d2h = float64(size*reps) / time.Since(t).Seconds() / 1e9
	e0, err := r.NewEvent(false)
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.DestroyEvent(e0) //nolint:errcheck
	e1, err := r.NewEvent(false)
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.DestroyEvent(e1)                        //nolint:errcheck
	if err := r.CopyAsync(b, a, size); err != nil { // warm-up
		return 0, 0, 0, err
	}
	if err := r.Record(e0); err != nil {
		return 0, 0, 0, err
	}
	for range reps {
		if err := r.CopyAsync(b, a, size); err != nil {
			return 0, 0, 0, err
		}
	}
	if err := r.Record(e1); err != nil {
		return 0, 0, 0, err
	}
	if err := r.WaitDone(ctx, e1, "device copies"); err != nil {
		return 0, 0, 0, err
	}
	ms, err := r.Elapsed(e0, e1)
	if err != nil {
		return 0, 0, 0, err
	}
	d2d = float64(2*size*reps) / (ms / 1e3) / 1e9
	return h2d, d2h, d2d, nil
}

// bandwidthCheck judges a measured bandwidth against a minimum (0: not judged, skipped).
func bandwidthCheck(name string, level int, dev string, gbps, min float64, sku string) Check {
	c := Check{Name: name, Level: level, Device: dev, Values: map[string]float64{"gbps": gbps, "limit_min_gbps": min}}
	switch {
	case min <= 0:
		c.Verdict, c.Reason = Skipped, fmt.Sprintf("measured %.1f GB/s; SKU %s sets no minimum", gbps, sku)
	case gbps < min:
		c.Verdict, c.Reason = Fail, fmt.Sprintf("%.1f GB/s, below the %s minimum %.1f GB/s", gbps, sku, min)
	default:
		c.Verdict, c.Reason = Pass, fmt.Sprintf("%.1f GB/s (minimum %.1f)", gbps, min)
	}
	return c
}
