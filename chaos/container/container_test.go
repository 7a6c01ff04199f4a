package container

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

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

type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
