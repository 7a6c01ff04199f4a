package mutate

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Module is the module path whose source tree the mutation check builds.
const Module = "github.com/tessera-qa/tessera-qa"

// FindRoot walks up from dir to the directory whose go.mod declares Module: the faults exist
// only in binaries built from source with -tags failpoints, so the check needs the tree.
func FindRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", errs.New(errs.Input, "source tree: %v", err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		if modulePath(filepath.Join(d, "go.mod")) == Module {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errs.New(errs.Input, "no %s source tree at or above %s: run from the repository (mutate builds failpoints binaries from source) or pass --src", Module, abs)
		}
	}
}

func modulePath(gomod string) string {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// GoTool finds the go command: PATH first, then the usual install location. Its absence is
// E_UNSUPPORTED: this machine cannot build the failpoints binaries.
func GoTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	for _, p := range []string{filepath.Join(os.Getenv("GOROOT"), "bin", "go"), "/usr/local/go/bin/go"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errs.New(errs.Unsupported, "no go command on PATH or in /usr/local/go/bin: the mutation check builds failpoints binaries and needs the Go toolchain")
}

// builder compiles the failpoints binaries of the selected suites into one work directory.
type builder struct {
	goTool, root, dir string
}

// build compiles one package with -tags failpoints: a test binary, or for KindSmoke the
// tessera-qa command itself. CGO stays off, as everywhere in this project.
func (b builder) build(ctx context.Context, kind Kind, pkg string) (string, error) {
	out := filepath.Join(b.dir, binName(pkg))
	args := []string{"test", "-c", "-tags", "failpoints", "-o", out, "./" + pkg}
	if kind == KindSmoke {
		args = []string{"build", "-tags", "failpoints", "-o", out, "./" + pkg}
	}
	cmd := exec.CommandContext(ctx, b.goTool, args...)
	cmd.Dir = b.root
	cmd.Env = append(withoutFailpoints(os.Environ()), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", errs.New(errs.Internal, "go %s: %v: %s", strings.Join(args, " "), err, tail(stderr.String(), 600))
	}
	return out, nil
}

// tail returns the last n bytes of s on one line, for error messages.
func tail(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
