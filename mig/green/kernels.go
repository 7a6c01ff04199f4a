package green

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"time"
)

// ScalePTX is a self-contained kernel for the isolation checks: scale(out, in, n, iters) sets
// out[i] = f^iters(in[i]) with f(x) = fma(x, 0.99999899, 0.1) over a grid-stride loop. With
// iters = 1 it is memory-bound (a streaming copy-and-scale, 8 bytes per element); with iters in
// the thousands it is FMA-bound. Each element is computed by one thread in a fixed order, so
// the bits do not depend on the grid, the SM count or the neighbours. A bad out pointer makes it
// fault with an illegal address.
const ScalePTX = `.version 8.0
.target sm_90
.address_size 64

.visible .entry scale(
	.param .u64 p_out,
	.param .u64 p_in,
	.param .u32 p_n,
	.param .u32 p_iters
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<12>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [p_out];
	ld.param.u64 %rd2, [p_in];
	ld.param.u32 %r1, [p_n];
	ld.param.u32 %r2, [p_iters];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.u32 %r6, %r3, %r4, %r5;
	mov.u32 %r7, %nctaid.x;
	mul.lo.u32 %r8, %r7, %r4;
	setp.ge.u32 %p1, %r6, %r1;
	@%p1 bra DONE;
LOOP:
	mul.wide.u32 %rd3, %r6, 4;
	add.u64 %rd4, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	mov.u32 %r9, 0;
	setp.ge.u32 %p2, %r9, %r2;
	@%p2 bra STORE;
INNER:
	fma.rn.f32 %f1, %f1, 0f3F7FFFEF, 0f3DCCCCCD;
	add.u32 %r9, %r9, 1;
	setp.lt.u32 %p2, %r9, %r2;
	@%p2 bra INNER;
STORE:
	add.u64 %rd5, %rd1, %rd3;
	st.global.f32 [%rd5], %f1;
	add.u32 %r6, %r6, %r8;
	setp.lt.u32 %p1, %r6, %r1;
	@%p1 bra LOOP;
DONE:
	ret;
}
`

// Job is one scale workload resident on a partition: n float32 inputs, seeded, and an output.
type Job struct {
	P       *Partition
	N       int
	Iters   int
	Grid    int // blocks per launch (fixed, so the work does not depend on the SM count)
	Block   int
	k       Kernel
	in, out uint64
}

// NewJob loads the kernel on p and uploads n seeded inputs (values in [1, 2)).
func NewJob(p *Partition, n, iters int, seed uint64) (*Job, error) {
	k, err := p.Load(ScalePTX, "scale")
	if err != nil {
		return nil, err
	}
	j := &Job{P: p, N: n, Iters: iters, Grid: 1024, Block: 256, k: k}
	if j.in, err = p.Alloc(4 * n); err != nil {
		return nil, err
	}
	if j.out, err = p.Alloc(4 * n); err != nil {
		p.Free(j.in)
		return nil, err
	}
	buf := make([]byte, 4*n)
	s := seed | 1
	for i := 0; i < n; i++ {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(1+float32(s>>40)/float32(1<<24)))
	}
	if err := p.Upload(j.in, buf); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// Run launches the job reps times and waits; it returns the wall time of the whole.
func (j *Job) Run(ctx context.Context, reps int) (time.Duration, error) {
	t0 := time.Now()
	for i := 0; i < reps; i++ {
		if err := j.P.Launch(j.k, j.Grid, j.Block, j.out, j.in, uint64(j.N), uint64(j.Iters)); err != nil {
			return 0, err
		}
	}
	err := j.P.Sync(ctx)
	return time.Since(t0), err
}

// Fault launches the kernel with an invalid output address (an illegal address fault).
func (j *Job) Fault(ctx context.Context) error {
	if err := j.P.Launch(j.k, j.Grid, j.Block, 0x10, j.in, uint64(j.N), uint64(j.Iters)); err != nil {
		return err
	}
	return j.P.Sync(ctx)
}

// Digest is the SHA-256 of the output bytes.
func (j *Job) Digest() (string, error) {
	buf := make([]byte, 4*j.N)
	if err := j.P.Download(buf, j.out); err != nil {
		return "", err
	}
	h := sha256.Sum256(buf)
	return hex.EncodeToString(h[:]), nil
}

// Out is the device address of the output buffer.
func (j *Job) Out() uint64 { return j.out }

// Close frees the job's buffers.
func (j *Job) Close() {
	if j.in != 0 {
		j.P.Free(j.in)
	}
	if j.out != 0 {
		j.P.Free(j.out)
	}
}
