// Package container runs the ranks of a chaos scenario as Docker containers (testcontainers-go):
// an image built on the fly FROM scratch with the static tessera-qa binary, one container per
// rank on a private network, the job's folder bound at the same path in every container (the
// checkpoints are shared, as on a cluster file system). Launcher restarts the group as
// engine/dist/launch does, and acts on the containers for the node/* faults: docker kill
// (node loss), docker pause (a frozen node), docker network disconnect (a partition).
//
// No registry is reachable from the machines this runs on: the image is built locally and
// nothing is pulled; testcontainers' reaper (an image of its own) is switched off
// (TESTCONTAINERS_RYUK_DISABLED), and every container and the network are removed by the
// launcher itself; what a killed process left is removed by the next New (orphans.go).
package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func init() {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true") // its image cannot be pulled here
	}
}

// Available says whether a Docker daemon answers (within 5 s); the error is the reason when not.
func Available(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return errs.Wrap(errs.NoDevice, err, "no Docker daemon")
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return errs.Wrap(errs.NoDevice, err, "no Docker daemon answers")
	}
	return nil
}

// Launcher starts ranks as containers. Make one with New; Close removes its network and image.
type Launcher struct {
	Image   string
	Net     *testcontainers.DockerNetwork
	Gateway string   // the host's address on the network: where the ranks reach the agent's store
	Binds   []string // host folders bound at the same path in every rank

	cli  *testcontainers.DockerClient
	ctxb string // the build context folder

	mu    sync.Mutex
	ranks map[int]testcontainers.Container // the current attempt's
}

// New builds the image from binary (a static Linux executable, e.g. CGO_ENABLED=0 go build)
// and creates the private network. binds are host folders every rank sees at the same path.
func New(ctx context.Context, binary string, binds ...string) (*Launcher, error) {
	if err := Available(ctx); err != nil {
		return nil, err
	}
	l := &Launcher{Binds: binds, ranks: map[int]testcontainers.Container{}}
	var err error
	if l.cli, err = testcontainers.NewDockerClientWithOpts(ctx); err != nil {
		return nil, errs.Wrap(errs.NoDevice, err, "container: Docker client")
	}
	reapOrphans(ctx, l.cli)
	if l.ctxb, err = os.MkdirTemp("", "tessera-chaos-image-"); err != nil {
		l.Close()
		return nil, errs.New(errs.Input, "container: %v", err)
	}
	data, err := os.ReadFile(binary)
	if err == nil {
		err = os.WriteFile(filepath.Join(l.ctxb, "tessera-qa"), data, 0o755)
	}
	dockerfile := "FROM scratch\nLABEL " + ownerLabel + "=" + strconv.Quote(owner()) + "\nCOPY tessera-qa /tessera-qa\n"
	if err == nil {
		var libs []string
		if libs, err = sharedLibs(binary); err == nil && len(libs) > 0 {
			// The binary is CGO_ENABLED=0 but purego (the CUDA driver binding) links it
			// against libc's loader: the image carries the loader and the few libraries it
			// names, nothing else.
			for _, lib := range libs {
				b, rerr := os.ReadFile(lib)
				if rerr != nil {
					err = rerr
					break
				}
				dst := filepath.Join(l.ctxb, "root", lib)
				os.MkdirAll(filepath.Dir(dst), 0o755)
				if err = os.WriteFile(dst, b, 0o755); err != nil {
					break
				}
			}
			dockerfile += "COPY root/ /\n"
		}
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(l.ctxb, "Dockerfile"), []byte(dockerfile+"ENTRYPOINT [\"/tessera-qa\"]\n"), 0o644)
	}
	if err != nil {
		l.Close()
		return nil, errs.New(errs.Input, "container: the image's build context: %v", err)
	}
	// Build once through a throwaway request, keeping the image for the ranks.
	tag := fmt.Sprintf("tessera-chaos-%d", time.Now().UnixNano())
	prov, err := testcontainers.NewDockerProvider()
	if err != nil {
		l.Close()
		return nil, errs.Wrap(errs.NoDevice, err, "container: Docker provider")
	}
	defer prov.Close()
	req := testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{Context: l.ctxb, Repo: "tessera-chaos", Tag: tag[len("tessera-chaos-"):], KeepImage: true, BuildLogWriter: io.Discard}}
	if l.Image, err = prov.BuildImage(ctx, &req); err != nil {
		l.Close()
		return nil, errs.Wrap(errs.Internal, err, "container: building the FROM scratch image")
	}
	if l.Net, err = network.New(ctx, network.WithLabels(map[string]string{ownerLabel: owner()})); err != nil {
		l.Close()
		return nil, errs.Wrap(errs.Internal, err, "container: the private network")
	}
	ni, err := l.cli.NetworkInspect(ctx, l.Net.ID, client.NetworkInspectOptions{})
	if err == nil {
		for _, c := range ni.Network.IPAM.Config {
			if c.Gateway.IsValid() {
				l.Gateway = c.Gateway.String()
			}
		}
	}
	if l.Gateway == "" {
		l.Close()
		return nil, errs.New(errs.Internal, "container: network %s has no gateway address (%v)", l.Net.Name, err)
	}
	return l, nil
}

// Close removes the network, the image and the build context.
func (l *Launcher) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l.mu.Lock()
	for _, c := range l.ranks {
		c.Terminate(ctx)
	}
	l.ranks = map[int]testcontainers.Container{}
	l.mu.Unlock()
	if l.Net != nil {
		l.Net.Remove(ctx)
	}
	if l.Image != "" && l.cli != nil {
		l.cli.ImageRemove(ctx, l.Image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	}
	if l.cli != nil {
		l.cli.Close()
	}
	if l.ctxb != "" {
		os.RemoveAll(l.ctxb)
	}
}

// StoreListen is where the agent's store must listen for the ranks to reach it.
func (l *Launcher) StoreListen() string { return net.JoinHostPort(l.Gateway, "0") }

// Run runs the job's ranks (spec.NProcPerNode of them) as containers with the launcher's
// semantics: torchrun's variables, a fresh rendezvous per attempt, the group torn down when one
// rank fails and started again up to spec.MaxRestarts times, Events and prefixed output.
func (l *Launcher) Run(ctx context.Context, spec launch.Spec) (int, error) {
	world := spec.NProcPerNode
	store := strings.TrimPrefix(spec.Store, "tcp://")
	_, port, err := net.SplitHostPort(store)
	if err != nil {
		return 2, errs.New(errs.Input, "container: store %q", spec.Store)
	}
	store = net.JoinHostPort(l.Gateway, port)
	grace := spec.Grace
	if grace <= 0 {
		grace = time.Second
	}
	event := func(e launch.Event) {
		if spec.Events != nil {
			e.Time = time.Now()
			spec.Events(e)
		}
	}
	for attempt := 0; ; attempt++ {
		job := spec.JobID + "-a" + strconv.Itoa(attempt)
		exits := make(chan [2]int, world) // rank, code
		var wg sync.WaitGroup
		startErr := error(nil)
		for r := range world {
			env := map[string]string{}
			for _, kv := range spec.Env {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			for k, v := range map[string]string{"RANK": strconv.Itoa(r), "WORLD_SIZE": strconv.Itoa(world), "LOCAL_RANK": "0",
				"LOCAL_WORLD_SIZE": "1", "GROUP_RANK": strconv.Itoa(r), "MASTER_ADDR": l.Gateway, "MASTER_PORT": port,
				rdzv.EnvStore: "tcp://" + store, rdzv.EnvJob: job, launch.EnvRestartCount: strconv.Itoa(attempt),
				launch.EnvMaxRestarts: strconv.Itoa(spec.MaxRestarts)} {
				env[k] = v
			}
			if spec.Timeout > 0 {
				env[rdzv.EnvTimeout] = spec.Timeout.String()
			}
			out := &lineConsumer{prefix: fmt.Sprintf("[rank %d] ", r), stdout: spec.Stdout, stderr: spec.Stderr}
			req := testcontainers.GenericContainerRequest{Started: true, ContainerRequest: testcontainers.ContainerRequest{
				Image: l.Image, Cmd: spec.Args, Env: env, Networks: []string{l.Net.Name}, Labels: map[string]string{ownerLabel: owner()},
				NetworkAliases: map[string][]string{l.Net.Name: {"rank" + strconv.Itoa(r)}},
				HostConfigModifier: func(hc *container.HostConfig) {
					for _, b := range l.Binds {
						hc.Binds = append(hc.Binds, b+":"+b)
					}
				},
				LogConsumerCfg: &testcontainers.LogConsumerConfig{Consumers: []testcontainers.LogConsumer{out}},
			}}
			c, err := testcontainers.GenericContainer(ctx, req)
			if err != nil {
				startErr = errs.Wrap(errs.CommInit, err, "container: starting rank %d", r)
				if c != nil {
					c.Terminate(context.Background())
				}
				break
			}
			l.mu.Lock()
			l.ranks[r] = c
			l.mu.Unlock()
			event(launch.Event{Kind: launch.RankStarted, Attempt: attempt, Rank: r})
			wg.Add(1)
			go func() {
				defer wg.Done()
				exits <- [2]int{r, waitExit(ctx, c)}
			}()
		}
		first, code, running := -1, 0, len(l.current())
		if startErr != nil {
			l.teardown(grace)
		}
		for running > 0 {
			e := <-exits
			running--
			how := fmt.Sprintf("exited with code %d", e[1])
			if e[1] == 137 {
				how = "was killed (exit 137)"
			}
			event(launch.Event{Kind: launch.RankExited, Attempt: attempt, Rank: e[0], Code: e[1], How: how})
			if e[1] != 0 && first < 0 {
				first, code = e[0], e[1]
				fmt.Fprintf(spec.Log, "[launch] rank %d %s; terminating the other ranks\n", e[0], how)
				go l.teardown(grace)
			}
		}
		wg.Wait()
		l.removeAll()
		if startErr != nil {
			return 3, startErr
		}
		if ctx.Err() != nil {
			return max(code, 1), errs.Wrap(errs.Timeout, ctx.Err(), "container: the job ran out of time")
		}
		if first < 0 {
			return 0, nil
		}
		if attempt >= spec.MaxRestarts {
			event(launch.Event{Kind: launch.GivingUp, Attempt: attempt, Rank: first, Code: code, How: "no restart left"})
			return code, nil
		}
		fmt.Fprintf(spec.Log, "[launch] restarting the group (restart %d of %d)\n", attempt+1, spec.MaxRestarts)
		event(launch.Event{Kind: launch.Restarting, Attempt: attempt + 1, Rank: first, Code: code})
	}
}

func (l *Launcher) current() map[int]testcontainers.Container {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int]testcontainers.Container{}
	for r, c := range l.ranks {
		out[r] = c
	}
	return out
}

// waitExit polls the container until it is no longer running and returns its exit code.
func waitExit(ctx context.Context, c testcontainers.Container) int {
	for {
		st, err := c.State(context.Background())
		if err != nil {
			return 1
		}
		if st.Status == container.StateExited || st.Status == container.StateDead {
			return st.ExitCode
		}
		select {
		case <-ctx.Done():
			d := time.Second
			c.Stop(context.Background(), &d)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// teardown stops every rank of the attempt: thawed first (a paused container cannot stop),
// then SIGTERM and SIGKILL after grace (docker stop).
func (l *Launcher) teardown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace+30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range l.current() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := c.State(ctx); err == nil && st.Paused {
				l.cli.ContainerUnpause(ctx, c.GetContainerID(), client.ContainerUnpauseOptions{})
			}
			c.Stop(ctx, &grace)
		}()
	}
	wg.Wait()
}

// removeAll removes the attempt's containers (their logs were consumed).
func (l *Launcher) removeAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for r, c := range l.current() {
		c.Terminate(ctx)
		l.mu.Lock()
		delete(l.ranks, r)
		l.mu.Unlock()
	}
}

func (l *Launcher) id(rank int) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.ranks[rank]
	if !ok {
		return "", fmt.Errorf("rank %d has no container now", rank)
	}
	return c.GetContainerID(), nil
}

// Kill is docker kill (SIGKILL to the container): node loss.
func (l *Launcher) Kill(ctx context.Context, rank int) error {
	id, err := l.id(rank)
	if err == nil {
		_, err = l.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
	}
	return err
}

// Pause freezes the container (docker pause); Unpause thaws it.
func (l *Launcher) Pause(ctx context.Context, rank int) error {
	id, err := l.id(rank)
	if err == nil {
		_, err = l.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	}
	return err
}

func (l *Launcher) Unpause(ctx context.Context, rank int) error {
	id, err := l.id(rank)
	if err == nil {
		_, err = l.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	}
	return ignoreGone(err)
}

// Disconnect takes the container off the job's network; Connect puts it back.
func (l *Launcher) Disconnect(ctx context.Context, rank int) error {
	id, err := l.id(rank)
	if err == nil {
		_, err = l.cli.NetworkDisconnect(ctx, l.Net.ID, client.NetworkDisconnectOptions{Container: id, Force: true})
	}
	return err
}

func (l *Launcher) Connect(ctx context.Context, rank int) error {
	id, err := l.id(rank)
	if err == nil {
		_, err = l.cli.NetworkConnect(ctx, l.Net.ID, client.NetworkConnectOptions{Container: id})
	}
	return ignoreGone(err)
}

// ignoreGone: undoing a fault on a container the restart already removed is no error.
func ignoreGone(err error) error {
	if err != nil && (strings.Contains(err.Error(), "No such container") || strings.Contains(err.Error(), "no container now") || strings.Contains(err.Error(), "is not paused") || strings.Contains(err.Error(), "is not running")) {
		return nil
	}
	return err
}

// lineConsumer turns the container's log stream into whole prefixed lines.
type lineConsumer struct {
	prefix         string
	stdout, stderr io.Writer
	mu             sync.Mutex
	buf            [2]bytes.Buffer
}

func (lc *lineConsumer) Accept(lg testcontainers.Log) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	i, w := 0, lc.stdout
	if lg.LogType == testcontainers.StderrLog {
		i, w = 1, lc.stderr
	}
	if w == nil {
		return
	}
	b := &lc.buf[i]
	b.Write(lg.Content)
	for {
		line, err := b.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			b.Write(line) // an unfinished line waits for its end
			return
		}
		w.Write(append([]byte(lc.prefix), line...))
	}
}

// sharedLibs lists the dynamic loader and the libraries a binary needs (ldd), none when it is
// static.
func sharedLibs(binary string) ([]string, error) {
	out, err := exec.Command("ldd", binary).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		if _, lerr := exec.LookPath("ldd"); lerr != nil {
			return nil, nil // no ldd: assume static
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", binary, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i, w := range f {
			if strings.HasPrefix(w, "/") && (i == 0 || f[i-1] == "=>") {
				libs = append(libs, w)
			}
		}
	}
	return libs, nil
}
