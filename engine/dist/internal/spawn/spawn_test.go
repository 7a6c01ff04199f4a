package spawn

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/internal/testdeadline"
)

func TestMain(m *testing.M) {
	switch Role() {
	case "":
		testdeadline.Main(m)
	case "meet":
		// The ranks meet over the store the parent serves and all-reduce their rank numbers.
		ctx := context.Background()
		t, err := tcp.FromEnv(ctx, 30*time.Second)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		c := dist.NewComm(t, dist.Options{})
		in := []byte{byte(t.Rank()), 0, 0, 0}
		out := make([]byte, 4)
		if err := c.AllReduce(ctx, numerics.I32, in, out, dist.Sum); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Printf("SUM %d NVLS=%s\n", out[0], os.Getenv("NCCL_NVLS_ENABLE"))
		t.Close()
		os.Exit(0)
	case "exit3":
		os.Exit(3)
	case "hang":
		time.Sleep(time.Hour)
	}
	os.Exit(9)
}

func TestWorldMeetsOverTheServedStore(t *testing.T) {
	t.Setenv("NCCL_NVLS_ENABLE", "1") // the children get 0 whatever the parent has
	rep, err := World(context.Background(), 3, "meet", nil, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || len(rep.Left) > 0 {
		t.Fatalf("world failed:\n%s", rep)
	}
	for _, r := range rep.Ranks {
		if !strings.Contains(r.Stdout, "SUM 3 NVLS=0") {
			t.Errorf("rank %d printed %q", r.Rank, r.Stdout)
		}
	}
}

func TestWorldEndsHungChildrenByPID(t *testing.T) {
	start := time.Now()
	rep, err := World(context.Background(), 2, "hang", nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	for _, r := range rep.Ranks {
		if !r.Killed {
			t.Errorf("rank %d not killed: %+v", r.Rank, r)
		}
	}
	if len(rep.Left) > 0 {
		t.Errorf("left alive: %v", rep.Left)
	}
}

func TestWorldReportsExitCodes(t *testing.T) {
	rep, err := World(context.Background(), 2, "exit3", nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Ranks {
		if r.ExitCode != 3 || r.Killed {
			t.Errorf("rank %d: %+v", r.Rank, r)
		}
	}
	if !rep.Failed() {
		t.Error("Failed() = false")
	}
}
