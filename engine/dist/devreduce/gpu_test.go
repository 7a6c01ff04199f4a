package devreduce

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
)

// The kernels on a real device, in one process: every dtype, op and a range of n, inputs with
// NaN payloads, signed zeros, infinities, subnormals and overflowing sums, bits compared with
// engine/dist's host reduction. This is the check that the PTX means on the GPU what ptxsim
// says it means. It skips without a device.
func TestGPUKernelsEqualHostReduction(t *testing.T) {
	devs, err := cuda.Devices()
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	if devs[0].CCMajor < 9 {
		t.Skipf("CUDA device %s is %s; the engine's kernels need sm_90", devs[0].Name, devs[0].Arch())
	}
	r, err := cuda.OpenRaw(-1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(90, 2026))
	sms := r.Info().SMs
	checked := 0
	for _, dt := range Dtypes {
		for _, op := range Ops {
			for _, n := range []int{1, 2, 3, 4, 8, MaxInputs} {
				for _, count := range []int{1, 1000, 1 << 20} {
					if count > 1000 && n != 2 && n != 4 {
						continue
					}
					name := fmt.Sprintf("%s/%s/n%d/count%d", dt, op, n, count)
					k, err := Generate(dt, op, n)
					if err != nil {
						t.Fatal(err)
					}
					ins := randomInputs(rng, dt, n, count)
					want := hostReduce(t, dt, op, ins)
					got, err := deviceReduce(ctx, r, k, ins, sms)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if !bytes.Equal(got, want) {
						size := dt.Size()
						for i := 0; i < count; i++ {
							g, w := got[i*size:(i+1)*size], want[i*size:(i+1)*size]
							if !bytes.Equal(g, w) {
								var in []string
								for _, b := range ins {
									in = append(in, fmt.Sprintf("%x", b[i*size:(i+1)*size]))
								}
								t.Errorf("%s: element %d: device %x, host %x (inputs little-endian %v)", name, i, g, w, in)
								break
							}
						}
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d kernel configurations on %s agree with the host reduction bit for bit", checked, r.Info())
}

func deviceReduce(ctx context.Context, r *cuda.Raw, k *Kernel, ins [][]byte, sms int) ([]byte, error) {
	size := k.DType.Size()
	count := len(ins[0]) / size
	var ptrs []uint64
	defer func() {
		for _, p := range ptrs {
			_ = r.Free(p)
		}
	}()
	in := make([]uint64, len(ins))
	for i, b := range ins {
		p, err := r.Alloc(len(b))
		if err != nil {
			return nil, err
		}
		ptrs = append(ptrs, p)
		if err := r.Upload(ctx, p, b); err != nil {
			return nil, err
		}
		in[i] = p
	}
	out, err := r.Alloc(count * size)
	if err != nil {
		return nil, err
	}
	ptrs = append(ptrs, out)
	if err := r.Memset(ctx, out, 0xA5, count*size); err != nil {
		return nil, err
	}
	args, err := k.Args(out, count, in)
	if err != nil {
		return nil, err
	}
	if err := r.Launch(k.PTX, k.Entry, Grid(count, sms), Threads, args); err != nil {
		return nil, err
	}
	got := make([]byte, count*size)
	return got, r.Download(ctx, got, out)
}
