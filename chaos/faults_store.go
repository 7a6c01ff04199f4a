package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/checkpoint"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// checkpointFault is a fault that damages the checkpoint a rank just committed: it fires at
// the first committed checkpoint at or after its step.
type checkpointFault interface{ afterCheckpoint() }

func checkpointAvailable(name string, r Run) error {
	if r.Containers {
		return unsupported("%s: it kills the rank after the damage, which a container's first process cannot do to itself", name)
	}
	if r.Transport == "inproc" {
		return unsupported("%s: it kills the rank's process after the damage (use --transport tcp)", name)
	}
	if r.CheckEvery <= 0 {
		return unsupported("%s: the run writes no checkpoints", name)
	}
	return nil
}

// damage changes rank's file of the newest checkpoint this rank committed, marks the step
// damaged and kills the rank, so that the restarted group must read the damaged checkpoint.
func damage(t Target, change func(f *os.File, size int64) error) (string, error) {
	step := t.LastCheckpoint()
	if step <= 0 {
		return "", fmt.Errorf("no committed checkpoint to damage")
	}
	path := filepath.Join(t.CheckpointDir(), checkpoint.StepDirName(step), checkpoint.RankFileName(t.Self()))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	st, err := f.Stat()
	if err == nil {
		err = change(f, st.Size())
	}
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		return "", err
	}
	return "", t.Signal(t.Self(), Signal(syscall.SIGKILL))
}

// CheckpointCorrupt is checkpoint/corrupt: one bit in the middle of the rank's file of the
// checkpoint it just committed flips on disk (bit rot), then the rank is killed. Every rank
// of the restarted group must refuse that checkpoint by its SHA-256 (a loader notice, counted
// as E_CHECKPOINT) and resume from the one before: no silent load of damaged state.
type CheckpointCorrupt struct{}

func (*CheckpointCorrupt) Name() string { return "checkpoint/corrupt" }
func (*CheckpointCorrupt) Site() Site   { return SiteRank }
func (*CheckpointCorrupt) Available(r Run) error {
	return checkpointAvailable("checkpoint/corrupt", r)
}
func (*CheckpointCorrupt) Expect(Run) Expect {
	return Expect{Detect: codes(errs.Checkpoint), Restart: true}
}
func (*CheckpointCorrupt) afterCheckpoint() {}
func (*CheckpointCorrupt) Inject(ctx context.Context, t Target) (string, error) {
	return damage(t, func(f *os.File, size int64) error {
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, size/2); err != nil {
			return err
		}
		b[0] ^= 0x10
		_, err := f.WriteAt(b, size/2)
		return err
	})
}

// TornWrite is checkpoint/torn-write: the rank's file of the checkpoint it just committed is
// cut to half its length (what a write the disk acknowledged but never persisted leaves after
// a power loss), then the rank is killed. The restarted group must refuse it (size mismatch,
// E_CHECKPOINT) and resume from the checkpoint before.
type TornWrite struct{}

func (*TornWrite) Name() string { return "checkpoint/torn-write" }
func (*TornWrite) Site() Site   { return SiteRank }
func (*TornWrite) Available(r Run) error {
	return checkpointAvailable("checkpoint/torn-write", r)
}
func (*TornWrite) Expect(Run) Expect { return Expect{Detect: codes(errs.Checkpoint), Restart: true} }
func (*TornWrite) afterCheckpoint()  {}
func (*TornWrite) Inject(ctx context.Context, t Target) (string, error) {
	return damage(t, func(f *os.File, size int64) error { return f.Truncate(size / 2) })
}

// DiskFull is disk/full: the agent fills the file system of the checkpoint folder (a tmpfs
// it mounted for the run) until the group restarts. The next checkpoint cannot be written:
// every rank's save must fail with E_CHECKPOINT (never a half-committed step), and after the
// space comes back the group resumes from the last committed checkpoint.
type DiskFull struct{}

// FillName is the file DiskFull fills the disk with (a dot name: the checkpoint loader never
// reads it).
const FillName = ".chaos-disk-full"

func (*DiskFull) Name() string { return "disk/full" }
func (*DiskFull) Site() Site   { return SiteAgent }
func (*DiskFull) Available(r Run) error {
	if r.CheckEvery <= 0 {
		return unsupported("disk/full: the run writes no checkpoints")
	}
	if !r.Root {
		return unsupported("disk/full: needs root to mount a small tmpfs for the checkpoints (the machine's own disk is never filled)")
	}
	if r.Transport == "inproc" {
		return unsupported("disk/full: runs with --transport tcp (the agent restarts the group)")
	}
	return nil
}
func (*DiskFull) Expect(Run) Expect { return Expect{Detect: codes(errs.Checkpoint), Restart: true} }
func (*DiskFull) Inject(ctx context.Context, t Target) (string, error) {
	path := filepath.Join(t.CheckpointDir(), FillName)
	n, err := fill(path)
	defer os.Remove(path)
	if err != nil {
		return "", err
	}
	<-ctx.Done()
	return fmt.Sprintf("filled %d bytes until the restart", n), nil
}

// fill writes zeros to path until the file system is full (ENOSPC).
func fill(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				// Fill the last blocks too: small writes until nothing fits.
				for _, sz := range []int{64 << 10, 4 << 10, 512, 1} {
					for {
						k, err := f.Write(buf[:sz])
						n += int64(k)
						if err != nil {
							break
						}
					}
				}
				return n, nil
			}
			return n, err
		}
		if n > 1<<34 {
			return n, io.ErrShortWrite // not a small file system: refuse to go on
		}
	}
}

// StoreRestart is rdzv/store-restart: the agent's rendezvous store goes away for Down
// (default 200ms) and comes back empty at the same address. Ranks of a running group no longer
// need it, so the job must go on untouched; a group that restarts afterwards must meet on the
// restarted store.
type StoreRestart struct {
	Down Duration `json:"down,omitempty"`
}

func (*StoreRestart) Name() string { return "rdzv/store-restart" }
func (*StoreRestart) Site() Site   { return SiteAgent }
func (*StoreRestart) Available(r Run) error {
	if r.Transport == "inproc" {
		return unsupported("rdzv/store-restart: inproc ranks meet without a store (use --transport tcp)")
	}
	return nil
}
func (*StoreRestart) Expect(Run) Expect { return Expect{} }
func (s *StoreRestart) Inject(ctx context.Context, t Target) (string, error) {
	st := t.Store()
	if st == nil {
		return "", fmt.Errorf("this agent does not serve the store")
	}
	down := time.Duration(s.Down)
	if down <= 0 {
		down = 200 * time.Millisecond
	}
	if err := st.Restart(ctx, down); err != nil {
		return "", err
	}
	return fmt.Sprintf("store down for %s, back empty", down), nil
}
