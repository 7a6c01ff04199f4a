package container

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/tessera-qa/tessera-qa/chaos"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
)

// buildBinary builds the static tessera-qa binary the image is made of.
func buildBinary(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "tessera-qa")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", out, "github.com/tessera-qa/tessera-qa/cmd/tessera-qa")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}
	return out
}

func TestNodeFaultsOnContainers(t *testing.T) {
	if err := Available(context.Background()); err != nil {
		t.Skip("docker: ", err)
	}
	if testing.Short() {
		t.Skip("builds an image and starts containers")
	}
	dir := t.TempDir()
	l, err := New(context.Background(), buildBinary(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, f := range []chaos.Fault{&chaos.NodeKill{}, &chaos.NodePause{}, &chaos.NodeDisconnect{}} {
		t.Run(strings.ReplaceAll(f.Name(), "/", "-"), func(t *testing.T) {
			sc := &chaos.Scenario{Name: "container/" + f.Name(), World: 3, Steps: 100, CommTimeout: chaos.Duration(2 * time.Second),
				Faults: []chaos.Injection{{Fault: f, Rank: 1, Step: 15}}}
			rep, err := chaos.Execute(context.Background(), sc, chaos.Options{Dir: filepath.Join(dir, strings.ReplaceAll(f.Name(), "/", "-")),
				Args: []string{"chaos"}, Program: "/tessera-qa", Launcher: l, StoreListen: l.StoreListen(), Log: tlog{t}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", rep.Table())
			if !rep.Passed || rep.Restarts != 1 || rep.Faults[0].Outcome != "detected" {
				t.Fatalf("%+v", rep)
			}
		})
	}
}

// deadOwner is an ownerLabel value naming a process of this host that has exited.
func deadOwner(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(cmd.Process.Pid)
}

func TestOwnerGone(t *testing.T) {
	host, _ := os.Hostname()
	for v, want := range map[string]bool{deadOwner(t): true, owner(): false, "elsewhere/1": false, host + "/x": false, host: false, "": false} {
		if got := ownerGone(v); got != want {
			t.Errorf("ownerGone(%q) = %v, want %v", v, got, want)
		}
	}
}

// What a killed run left (a container and a network labelled with an exited owner) is removed
// by the next reap; what a live process owns stays.
func TestOrphansOfADeadRunAreRemoved(t *testing.T) {
	if err := Available(context.Background()); err != nil {
		t.Skip("docker: ", err)
	}
	ctx := context.Background()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	dead, live := deadOwner(t), owner()
	var nets []string
	for _, o := range []string{dead, live} {
		n, err := cli.NetworkCreate(ctx, "tessera-orphan-test-"+strings.ReplaceAll(strings.ReplaceAll(o, "/", "-"), ".", "-"),
			client.NetworkCreateOptions{Driver: "bridge", Labels: map[string]string{ownerLabel: o}})
		if err != nil {
			t.Fatal(err)
		}
		nets = append(nets, n.ID)
	}
	defer cli.NetworkRemove(ctx, nets[1], client.NetworkRemoveOptions{})
	if n := reapOrphans(ctx, cli); n < 1 {
		t.Errorf("reaped %d", n)
	}
	left, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", ownerLabel)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range left.Items {
		ids = append(ids, n.ID)
	}
	if slices.Contains(ids, nets[0]) || !slices.Contains(ids, nets[1]) {
		t.Errorf("networks left %v: want the live owner's %s and not the dead owner's %s", ids, nets[1], nets[0])
	}
}

type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
