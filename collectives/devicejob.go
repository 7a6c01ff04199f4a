package collectives

import (
	"context"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/cudaipc"
	"github.com/tessera-qa/tessera-qa/engine/dist/nccl"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// DeviceProbe checks, before any rank process starts, that this machine can run a device
// transport: a CUDA device of compute capability 9.0 or above (cuda.Devices), and libnccl for
// nccl. It returns the device class the rows were measured on ("cuda/NVIDIA H100 ... (132
// SMs)", "nccl 2.28.9/..."); no device or library is E_NO_DEVICE, an older device
// E_UNSUPPORTED. Tests may replace it.
var DeviceProbe = func(ctx context.Context, transport string) (string, error) {
	devs, err := cuda.Devices()
	if err != nil {
		return "", err
	}
	if devs[0].CCMajor < 9 {
		return "", errs.New(errs.Unsupported, "collectives --transport %s: CUDA device %s is below compute capability 9.0, which the engine's kernels need", transport, devs[0])
	}
	class := transport + "/" + devs[0].String()
	if transport == "nccl" {
		v, err := nccl.Version()
		if err != nil {
			return "", err
		}
		class = "nccl " + v + "/" + devs[0].String()
	}
	return class, nil
}

// hostCommID is the id of the host communicator a device rank gathers its records over
// ("HOST" plus the mode's index), distinct from the device communicators' control frames on
// the same tcp transport.
const hostCommID uint32 = 0x484f5354

// member is this process as a rank of a job: the transport it joined and, per mode, a run.
type member interface {
	rank() int
	runMode(ctx context.Context, c Config, mi int) ([]Row, error)
	deviceClass() string // "" for host transports
	close() error
}

// tcpMember is a rank of a tcp job.
type tcpMember struct{ t dist.Transport }

func (m tcpMember) rank() int           { return m.t.Rank() }
func (m tcpMember) deviceClass() string { return "" }
func (m tcpMember) close() error        { return m.t.Close() }
func (m tcpMember) runMode(ctx context.Context, c Config, mi int) ([]Row, error) {
	// One communicator per mode, each with its own id: frames of one never meet the other.
	c.commID = uint32(mi)
	return RunRank(ctx, NewComm(m.t, c), c)
}

// deviceMember is a rank of a cuda or nccl job: this rank's GPU (cuda.OpenLocalRaw: the
// local rank's device, several ranks may share one) and the tcp transport that carries the
// device communicator's control frames and the host communicator's records.
type deviceMember struct {
	transport string
	raw       *cuda.Raw
	t         dist.Transport
	timeout   time.Duration
}

// joinDevice opens this rank's GPU first (no device: E_NO_DEVICE before any rendezvous), then
// joins the job over tcp.
func joinDevice(ctx context.Context, transport string, timeout time.Duration) (*deviceMember, error) {
	if transport == "nccl" {
		if _, err := nccl.Version(); err != nil {
			return nil, err
		}
	}
	raw, err := cuda.OpenLocalRaw()
	if err != nil {
		return nil, err
	}
	if raw.Info().CCMajor < 9 {
		return nil, errs.New(errs.Unsupported, "collectives --transport %s: CUDA device %s is below compute capability 9.0", transport, raw.Info())
	}
	t, err := tcp.FromEnv(ctx, 0)
	if err != nil {
		return nil, err
	}
	return &deviceMember{transport: transport, raw: raw, t: t, timeout: timeout}, nil
}

func (m *deviceMember) rank() int    { return m.t.Rank() }
func (m *deviceMember) close() error { return m.t.Close() }
func (m *deviceMember) deviceClass() string {
	if m.transport == "nccl" {
		if v, err := nccl.Version(); err == nil {
			return "nccl " + v + "/" + m.raw.Info().String()
		}
	}
	return m.transport + "/" + m.raw.Info().String()
}

// runMode sets up the device communicator of mode c.Mode (its own id per mode), runs the
// cases, and closes it (collectively).
func (m *deviceMember) runMode(ctx context.Context, c Config, mi int) ([]Row, error) {
	if c.Mode == dist.Exact {
		return nil, errs.New(errs.Unsupported, "collectives --transport %s: exact mode is not implemented on the device transports (run it on inproc or tcp)", m.transport)
	}
	d := &DeviceRank{Transport: m.transport, Mem: m.raw,
		Host: dist.NewComm(m.t, dist.Options{Timeout: c.Timeout, ID: hostCommID + uint32(mi)})}
	var closeComm func(context.Context) error
	switch m.transport {
	case "cuda":
		dc, err := cudaipc.New(ctx, m.raw, m.t, cudaipc.Options{Mode: c.Mode, Timeout: c.Timeout, ID: cudaipc.DefaultID + uint32(mi)})
		if err != nil {
			return nil, err
		}
		d.Comm, closeComm = dc, dc.Close
		d.Alloc = func(ctx context.Context, n int) (uint64, error) {
			b, err := dc.Alloc(ctx, n)
			return b.Ptr, err
		}
		d.Free = func(ctx context.Context, p uint64, n int) error {
			return dc.Free(ctx, cudaipc.Buffer{Ptr: p, Bytes: n})
		}
	case "nccl":
		nc, err := nccl.New(ctx, m.raw, m.t, nccl.Options{Mode: c.Mode, Timeout: c.Timeout, ID: nccl.DefaultID + uint32(mi)})
		if err != nil {
			return nil, err
		}
		d.Comm, closeComm = nc, nc.Close
	default:
		return nil, errs.New(errs.Internal, "collectives: %q is not a device transport", m.transport)
	}
	rows, err := RunDeviceRank(ctx, d, c)
	cctx, cancel := context.WithTimeout(ctx, max(m.timeout, time.Minute))
	defer cancel()
	if cerr := closeComm(cctx); err == nil {
		err = cerr
	}
	return rows, err
}
