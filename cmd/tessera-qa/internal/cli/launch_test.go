package cli

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestLaunchRunsRanksAndPassesTheirExitCode(t *testing.T) {
	o := cli(t, "launch", "--nproc-per-node", "2", "--", "sh", "-c", `echo "rank=$RANK of $WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE"`)
	o.want(t, ExitOK, "")
	for _, want := range []string{"[rank 0] rank=0 of 2 local=0/2\n", "[rank 1] rank=1 of 2 local=1/2\n"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, o.stdout)
		}
	}
	// Without "--": flags after PROGRAM are PROGRAM's.
	o = cli(t, "launch", "--nproc-per-node", "1", "sh", "-c", `[ "$RANK" = 0 ] && exit 5`)
	if o.code != 5 || !strings.Contains(o.stderr, "[launch] rank 0 exited with code 5") {
		t.Fatalf("exit %d, want 5\n%s", o.code, o.stderr)
	}
}

func TestLaunchUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		exit int
		code string
		says string
	}{
		{[]string{"launch", "sh"}, ExitUsage, "E_INPUT", "--nproc-per-node is required"},
		{[]string{"launch", "--nproc-per-node", "2"}, ExitUsage, "E_INPUT", "missing PROGRAM"},
		{[]string{"launch", "--nproc-per-node", "0", "sh"}, ExitUsage, "E_INPUT", "--nproc-per-node 0"},
		{[]string{"launch", "--nproc-per-node", "1", "--nnodes", "2", "--node-rank", "5", "--master-port", "1", "sh"}, ExitUsage, "E_INPUT", "--node-rank 5"},
		{[]string{"launch", "--nproc-per-node", "1", "--", "/nonexistent/x"}, ExitUsage, "E_INPUT", "/nonexistent/x"},
	} {
		o := cli(t, c.args...)
		o.want(t, c.exit, c.code)
		if !strings.Contains(o.stderr, c.says) {
			t.Errorf("%v: stderr %q lacks %q", c.args, o.stderr, c.says)
		}
	}
}

func TestLaunchPortInUseIsExit3(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	o := cli(t, "launch", "--nproc-per-node", "1", "--master-port", port, "--", "true")
	o.want(t, ExitMissing, "E_COMM_INIT")
	if !strings.Contains(o.stderr, "127.0.0.1:"+port) || !strings.Contains(o.stderr, "address already in use") {
		t.Errorf("stderr: %s", o.stderr)
	}
}
