package usercheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// childEnv makes this test binary act as `tessera-qa exec` (the second process of the
// determinism row); flipEnv makes that child report a wrong digest for the first output.
const (
	childEnv = "USERCHECK_TEST_CHILD"
	flipEnv  = "USERCHECK_TEST_FLIP"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(child(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// child is a minimal `exec GRAPH --in IN --out OUT --backend B --json -` over the engine.
func child(args []string) int {
	if len(args) != 10 || args[0] != "exec" {
		fmt.Fprintln(os.Stderr, "child: bad args", args)
		return 2
	}
	g, err := graph.ParseFile(args[1])
	if err == nil {
		var arrays []*tensor.Array
		if arrays, err = tensor.ReadNPZFile(args[3]); err == nil {
			in := map[string]*tensor.Tensor{}
			for _, a := range arrays {
				if in[a.Name], err = a.As(g.Value(a.Name).Type.DType); err != nil {
					break
				}
			}
			var b backend.Backend
			var p *compiler.Program
			var outs []*tensor.Tensor
			if b, err = backend.Get(args[7]); err == nil {
				if p, err = compiler.Compile(g, compiler.Options{}); err == nil {
					outs, err = b.Run(p, in)
				}
			}
			if err == nil {
				type out struct{ Name, Digest string }
				var o struct{ Outputs []out }
				for i, v := range g.Outputs {
					d := outs[i].Digest()
					if i == 0 && os.Getenv(flipEnv) == "1" {
						d = "0" + d[1:]
					}
					o.Outputs = append(o.Outputs, out{v.Name, d})
				}
				json.NewEncoder(os.Stdout).Encode(o)
				return 0
			}
		}
	}
	fmt.Fprintln(os.Stderr, "child:", err)
	return 1
}

// self is the Options.Self of tests: this binary, acting as exec.
func self(t *testing.T) (string, []string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe, []string{childEnv + "=1"}
}

func mlp(t *testing.T) *graph.Graph {
	_, file, _, _ := runtime.Caller(0)
	g, err := graph.ParseFile(filepath.Join(filepath.Dir(file), "..", "docs", "examples", "mlp.tg"))
	if err != nil {
		t.Fatal(err)
	}
	return g
}
