package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The node/* faults act on ranks that are containers (package chaos/container): a node lost
// (docker kill), frozen (docker pause) or cut from the network (docker network disconnect).

func nodeAvailable(name string, r Run) error {
	if !r.Containers {
		return unsupported("%s: ranks are not containers here (the container scenarios run them in Docker)", name)
	}
	return nil
}

// NodeKill is node/kill: the rank's container is killed (docker kill): node loss.
type NodeKill struct{}

func (*NodeKill) Name() string          { return "node/kill" }
func (*NodeKill) Site() Site            { return SiteAgent }
func (*NodeKill) Available(r Run) error { return nodeAvailable("node/kill", r) }
func (*NodeKill) Expect(Run) Expect     { return Expect{Detect: codes(errs.TimeoutComm), Restart: true} }
func (*NodeKill) Inject(ctx context.Context, t Target) (string, error) {
	return "docker kill", t.Nodes().Kill(ctx, t.Rank())
}

// NodePause is node/pause: the rank's container is frozen (docker pause) for For (0: until
// the group restarts), then thawed.
type NodePause struct {
	For Duration `json:"for,omitempty"`
}

func (*NodePause) Name() string          { return "node/pause" }
func (*NodePause) Site() Site            { return SiteAgent }
func (*NodePause) Available(r Run) error { return nodeAvailable("node/pause", r) }
func (p *NodePause) Expect(r Run) Expect {
	if p.For == 0 || time.Duration(p.For) > r.CommTimeout {
		return Expect{Detect: codes(errs.TimeoutComm), Restart: true}
	}
	return Expect{}
}
func (p *NodePause) Inject(ctx context.Context, t Target) (string, error) {
	if err := t.Nodes().Pause(ctx, t.Rank()); err != nil {
		return "", err
	}
	start := time.Now()
	defer t.Nodes().Unpause(context.Background(), t.Rank())
	if p.For > 0 {
		sleepCtx(ctx, time.Duration(p.For))
	} else {
		<-ctx.Done()
	}
	return fmt.Sprintf("docker pause, unpause after %s", time.Since(start).Round(time.Millisecond)), nil
}

// NodeDisconnect is node/disconnect: the rank's container leaves the job's network (docker
// network disconnect) for For (0: until the group restarts), then joins it again: a partition.
type NodeDisconnect struct {
	For Duration `json:"for,omitempty"`
}

func (*NodeDisconnect) Name() string          { return "node/disconnect" }
func (*NodeDisconnect) Site() Site            { return SiteAgent }
func (*NodeDisconnect) Available(r Run) error { return nodeAvailable("node/disconnect", r) }
func (*NodeDisconnect) Expect(Run) Expect {
	return Expect{Detect: codes(errs.TimeoutComm, errs.Desync), Restart: true}
}
func (d *NodeDisconnect) Inject(ctx context.Context, t Target) (string, error) {
	if err := t.Nodes().Disconnect(ctx, t.Rank()); err != nil {
		return "", err
	}
	start := time.Now()
	defer t.Nodes().Connect(context.Background(), t.Rank())
	if d.For > 0 {
		sleepCtx(ctx, time.Duration(d.For))
	} else {
		<-ctx.Done()
	}
	return fmt.Sprintf("docker network disconnect, connect after %s", time.Since(start).Round(time.Millisecond)), nil
}
