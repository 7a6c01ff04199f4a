package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// chunkElems is the unit of parallel input generation: each chunk is drawn by
// harness.RandomTensor from its own sub-seed, so the values depend on the seed alone, not on
// the number of cores (a 8192x8192 input takes seconds on one core).
const chunkElems = 1 << 16

// randomTensor draws a tensor of dt and shape from d, chunk by chunk in parallel. Like
// harness.RandomTensor it is never all zeros (each chunk is not).
func randomTensor(dt numerics.DType, shape []int, seed uint64, d harness.Dist) *tensor.Tensor {
	t := tensor.New(dt, shape)
	n := t.Len()
	chunks := (n + chunkElems - 1) / chunkElems
	size := dt.Size()
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), max(chunks, 1))
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := w; c < chunks; c += workers {
				lo := c * chunkElems
				hi := min(lo+chunkElems, n)
				part := harness.RandomTensor(dt, []int{hi - lo}, harness.SubSeed(seed, "chunk"+strconv.Itoa(c)), d)
				copy(t.Data[lo*size:hi*size], part.Data)
			}
		}()
	}
	wg.Wait()
	return t
}

// scratchDir is where input and output files for the oracle go: a tmpfs when there is one
// (the files are hundreds of MB and read once), else the temporary directory.
func scratchDir() (string, error) {
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			base = "/dev/shm"
		}
	}
	dir, err := os.MkdirTemp(base, "tessera-bench-")
	if err != nil {
		return "", errs.New(errs.Input, "bench: scratch directory: %v", err)
	}
	return dir, nil
}

// writeTensor writes t's element bytes to dir/name.bin.
func writeTensor(dir, name string, t *tensor.Tensor) (FileTensor, error) {
	path := filepath.Join(dir, name+".bin")
	if err := os.WriteFile(path, t.Data, 0o644); err != nil {
		return FileTensor{}, errs.New(errs.Input, "bench: write %s: %v", path, err)
	}
	return FileTensor{File: path, DType: t.DType.String(), Shape: t.Shape}, nil
}

// readTensor reads a file written by the oracle as a tensor of dt and shape.
func readTensor(path string, dt numerics.DType, shape []int) (*tensor.Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.New(errs.Input, "bench: oracle output %s: %v", path, err)
	}
	t := tensor.New(dt, shape)
	if len(b) != len(t.Data) {
		return nil, errs.New(errs.Input, "bench: oracle output %s holds %d bytes, %s needs %d", path, len(b), t.TypeString(), len(t.Data))
	}
	t.Data = b
	return t, nil
}
