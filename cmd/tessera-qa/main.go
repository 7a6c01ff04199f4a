// Command tessera-qa is the QA harness's command line. Every verb lives in internal/cli so that
// it can be tested in-process; see docs/cli.md.
package main

import (
	"os"

	"github.com/tessera-qa/tessera-qa/cmd/tessera-qa/internal/cli"
	_ "github.com/tessera-qa/tessera-qa/engine/dist/rdzv/etcd" // TESSERA_RDZV=etcd://... for every rank this binary runs
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
