package nccl

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/internal/simgpu"
)

// fakeWorld is a stand-in NCCL for ranks that are goroutines on simulated devices
// (engine/dist/internal/simgpu): each rank gets its own api (so a group is per rank, as NCCL's
// is per thread), collectives and send/recv run on the rank's simulated stream and meet the
// peers' through mailboxes. It checks what the real library would refuse: an uninitialised
// config, calls on a communicator still in progress, unbalanced groups.
type fakeWorld struct {
	node  *simgpu.Node
	world int

	mu      sync.Mutex
	boxes   map[[2]int]chan []byte // (from, to) -> payloads in order
	gather  map[string]*rendezvous
	aborted []int
	misuse  []string

	initPolls  int  // GetAsyncError answers ncclInProgress this many times after init
	hangInit   bool // init never completes
	asyncErr   map[int]result
	noAlltoAll bool
}

type rendezvous struct {
	parts [][]byte
	n     int
	cond  *sync.Cond
}

type fakeComm struct {
	rank, world int
	dev         *simgpu.Device
	polls       int
	seq         int // collectives issued, to pair them across ranks
	group       int
	sends, rest []func() error // a group's operations: sends run first (they only deposit)
}

func newFakeWorld(node *simgpu.Node, world int) *fakeWorld {
	return &fakeWorld{node: node, world: world, boxes: map[[2]int]chan []byte{}, gather: map[string]*rendezvous{}, asyncErr: map[int]result{}}
}

func (w *fakeWorld) box(from, to int) chan []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := [2]int{from, to}
	if w.boxes[k] == nil {
		w.boxes[k] = make(chan []byte, 1024)
	}
	return w.boxes[k]
}

func (w *fakeWorld) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.misuse = append(w.misuse, fmt.Sprintf(format, args...))
}

// meet deposits part under key and returns every rank's part once all have come.
func (w *fakeWorld) meet(key string, rank int, part []byte) ([][]byte, error) {
	w.mu.Lock()
	r := w.gather[key]
	if r == nil {
		r = &rendezvous{parts: make([][]byte, w.world), cond: sync.NewCond(&w.mu)}
		w.gather[key] = r
	}
	r.parts[rank] = part
	r.n++
	r.cond.Broadcast()
	deadline := time.Now().Add(10 * time.Second)
	go func() { time.Sleep(10 * time.Second); w.mu.Lock(); r.cond.Broadcast(); w.mu.Unlock() }()
	for r.n < w.world {
		if time.Now().After(deadline) {
			w.mu.Unlock()
			return nil, fmt.Errorf("fake nccl: %s: rank %d waited 10s for the others", key, rank)
		}
		r.cond.Wait()
	}
	parts := r.parts
	w.mu.Unlock()
	return parts, nil
}

func (w *fakeWorld) bytes(addr uint64, n int) ([]byte, error) { return w.node.Bytes(addr, n) }

// api returns rank's view of the library.
func (w *fakeWorld) api(rank int, dev *simgpu.Device) *api {
	var fc *fakeComm
	a := &api{}
	get := func(comm uintptr) *fakeComm {
		if fc == nil || comm != uintptr(0x100+rank) {
			w.note("rank %d: call on unknown communicator %#x", rank, comm)
			return nil
		}
		return fc
	}
	// ready checks what NCCL checks before a call: a non-blocking communicator must have
	// settled.
	ready := func(c *fakeComm, what string) bool {
		if c == nil {
			return false
		}
		if c.polls > 0 {
			w.note("rank %d: %s while the communicator is still in progress", rank, what)
			return false
		}
		return true
	}
	a.ncclGetVersion = func(v *int32) result { *v = 22809; return ncclSuccess }
	a.ncclGetUniqueId = func(id *UniqueID) result {
		copy(id.Internal[:], "fake-nccl-unique-id")
		return ncclSuccess
	}
	a.ncclCommInitRankConfig = func(comm *uintptr, nranks int32, id UniqueID, r int32, cfg *config) result {
		if cfg.Size != configBytes || cfg.Magic != configMagic || cfg.Version != configVersion || cfg.Blocking != 0 {
			w.note("rank %d: config %+v", rank, *cfg)
			return ncclInvalidArgument
		}
		if string(id.Internal[:19]) != "fake-nccl-unique-id" || int(nranks) != w.world || int(r) != rank {
			w.note("rank %d: init with id %q nranks %d rank %d", rank, id.Internal[:19], nranks, r)
			return ncclInvalidArgument
		}
		fc = &fakeComm{rank: rank, world: int(nranks), dev: dev, polls: w.initPolls}
		if w.hangInit {
			fc.polls = math.MaxInt
		}
		*comm = uintptr(0x100 + rank)
		return ncclInProgress
	}
	a.ncclCommGetAsyncError = func(comm uintptr, st *result) result {
		c := get(comm)
		if c == nil {
			return ncclInvalidArgument
		}
		w.mu.Lock()
		e := w.asyncErr[rank]
		w.mu.Unlock()
		switch {
		case e != ncclSuccess:
			*st = e
		case c.polls > 0:
			c.polls--
			*st = ncclInProgress
		default:
			*st = ncclSuccess
		}
		return ncclSuccess
	}
	a.ncclCommAbort = func(comm uintptr) result {
		w.mu.Lock()
		w.aborted = append(w.aborted, rank)
		w.mu.Unlock()
		fc = nil
		return ncclSuccess
	}
	a.ncclCommDestroy = func(comm uintptr) result {
		if get(comm) == nil {
			return ncclInvalidArgument
		}
		if fc.group != 0 {
			w.note("rank %d: destroy inside a group", rank)
		}
		fc = nil
		return ncclSuccess
	}
	a.ncclCommFinalize = func(comm uintptr) result {
		if get(comm) == nil {
			return ncclInvalidArgument
		}
		return ncclSuccess
	}
	a.ncclGetErrorString = func(r result) string { return "fake: " + resultNames[r] }
	a.ncclGetLastError = func(uintptr) string { return "fake last error" }
	a.ncclGroupStart = func() result {
		if fc != nil {
			fc.group++
		}
		return ncclSuccess
	}
	a.ncclGroupEnd = func() result {
		if fc == nil || fc.group == 0 {
			w.note("rank %d: ncclGroupEnd without start", rank)
			return ncclInvalidUsage
		}
		fc.group--
		if fc.group > 0 {
			return ncclSuccess
		}
		ops := append(fc.sends, fc.rest...)
		fc.sends, fc.rest = nil, nil
		return enqueue(dev, ops)
	}
	// issue runs op now (outside a group) or at ncclGroupEnd, on the stream.
	issue := func(c *fakeComm, op func() error, isSend bool) result {
		if c.group > 0 {
			if isSend {
				c.sends = append(c.sends, op)
			} else {
				c.rest = append(c.rest, op)
			}
			return ncclSuccess
		}
		return enqueue(dev, []func() error{op})
	}
	a.ncclSend = func(send, count uint64, dt dataType, peer int32, comm uintptr, stream uintptr) result {
		c := get(comm)
		if !ready(c, "ncclSend") || dt != ncclUint8 {
			return ncclInvalidUsage
		}
		return issue(c, func() error {
			b, err := w.bytes(send, int(count))
			if err != nil {
				return err
			}
			w.box(rank, int(peer)) <- append([]byte(nil), b...)
			return nil
		}, true)
	}
	a.ncclRecv = func(recv, count uint64, dt dataType, peer int32, comm uintptr, stream uintptr) result {
		c := get(comm)
		if !ready(c, "ncclRecv") || dt != ncclUint8 {
			return ncclInvalidUsage
		}
		return issue(c, func() error {
			var got []byte
			select {
			case got = <-w.box(int(peer), rank):
			case <-time.After(10 * time.Second):
				return fmt.Errorf("fake nccl: rank %d: recv from %d: nothing in 10s", rank, peer)
			}
			if len(got) != int(count) {
				return fmt.Errorf("fake nccl: rank %d: recv of %d bytes from %d got %d", rank, count, peer, len(got))
			}
			b, err := w.bytes(recv, int(count))
			if err != nil {
				return err
			}
			copy(b, got)
			return nil
		}, false)
	}
	collective := func(name string, send uint64, sendN int, place func(parts [][]byte) error) func(comm uintptr) result {
		return func(comm uintptr) result {
			c := get(comm)
			if !ready(c, name) {
				return ncclInvalidUsage
			}
			c.seq++
			key := fmt.Sprintf("%s#%d", name, c.seq)
			return issue(c, func() error {
				b, err := w.bytes(send, sendN)
				if err != nil {
					return err
				}
				parts, err := w.meet(key, rank, append([]byte(nil), b...))
				if err != nil {
					return err
				}
				return place(parts)
			}, false)
		}
	}
	a.ncclAllGather = func(send, recv, n uint64, dt dataType, comm, stream uintptr) result {
		return collective("allgather", send, int(n), func(parts [][]byte) error {
			out, err := w.bytes(recv, int(n)*w.world)
			if err != nil {
				return err
			}
			for q, p := range parts {
				copy(out[q*int(n):], p)
			}
			return nil
		})(comm)
	}
	a.ncclBroadcast = func(send, recv, n uint64, dt dataType, root int32, comm, stream uintptr) result {
		sendN := 0
		if int(root) == rank {
			sendN = int(n)
		}
		return collective("broadcast", send, sendN, func(parts [][]byte) error {
			out, err := w.bytes(recv, int(n))
			if err != nil {
				return err
			}
			copy(out, parts[root])
			return nil
		})(comm)
	}
	if !w.noAlltoAll {
		a.ncclAlltoAll = func(send, recv, n uint64, dt dataType, comm, stream uintptr) result {
			return collective("alltoall", send, int(n)*w.world, func(parts [][]byte) error {
				out, err := w.bytes(recv, int(n)*w.world)
				if err != nil {
					return err
				}
				for q, p := range parts {
					copy(out[q*int(n):], p[rank*int(n):(rank+1)*int(n)])
				}
				return nil
			})(comm)
		}
	}
	// Fast mode: f32 sums in reverse rank order (a different order from deterministic mode's,
	// as a ring's would be), rounded in f32.
	a.ncclAllReduce = func(send, recv, count uint64, dt dataType, op redOp, comm, stream uintptr) result {
		if dt != ncclFloat32 || op != ncclSum {
			return ncclInvalidArgument
		}
		return collective("allreduce", send, 4*int(count), func(parts [][]byte) error {
			out, err := w.bytes(recv, 4*int(count))
			if err != nil {
				return err
			}
			for i := range int(count) {
				var acc float32
				for q := len(parts) - 1; q >= 0; q-- {
					acc += math.Float32frombits(le32(parts[q][4*i:]))
				}
				put32(out[4*i:], math.Float32bits(acc))
			}
			return nil
		})(comm)
	}
	a.ncclReduceScatter = func(send, recv, count uint64, dt dataType, op redOp, comm, stream uintptr) result {
		return ncclInvalidUsage
	}
	return a
}

func enqueue(dev *simgpu.Device, ops []func() error) result {
	err := dev.Enqueue(func() error {
		for _, op := range ops {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ncclUnhandledCudaError
	}
	return ncclSuccess
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
