package mutate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
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

// buildCommand compiles a main package (the tessera-qa command for KindSmoke) with -tags
// failpoints. CGO stays off, as everywhere in this project.
func (b builder) buildCommand(ctx context.Context, pkg string) (string, error) {
	out := filepath.Join(b.dir, binName(pkg))
	args := []string{"build", "-tags", "failpoints", "-o", out, "./" + pkg}
	return out, b.goCmd(ctx, args)
}

func (b builder) goCmd(ctx context.Context, args []string) error {
	cmd := exec.CommandContext(ctx, b.goTool, args...)
	cmd.Dir = b.root
	cmd.Env = append(withoutFailpoints(os.Environ()), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return errs.New(errs.Internal, "go %s: %v: %s", strings.Join(args, " "), err, tail(stderr.String(), 600))
	}
	return nil
}

// buildTests compiles the test binaries of pkgs with -tags failpoints in as few go commands as
// their names allow: `go test -c -o DIR/` builds several packages in one action graph, so their
// compiles and links run in parallel and the module is loaded once (one command per package
// was most of the check's time on CI's two cores). It names each binary DIR/<base>.test, so two
// packages with one base name (collectives, suites/collectives) go to separate commands.
func (b builder) buildTests(ctx context.Context, pkgs []string) (map[string]string, error) {
	bins := map[string]string{}
	for i, g := range byBaseName(pkgs) {
		dir := filepath.Join(b.dir, fmt.Sprintf("tests%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, errs.New(errs.Internal, "mutate work dir: %v", err)
		}
		args := []string{"test", "-c", "-tags", "failpoints", "-o", dir + string(filepath.Separator)}
		for _, p := range g {
			args = append(args, "./"+p)
		}
		if err := b.goCmd(ctx, args); err != nil {
			return nil, err
		}
		for _, p := range g {
			out := filepath.Join(b.dir, binName(p))
			if err := os.Rename(filepath.Join(dir, path.Base(p)+".test"), out); err != nil {
				return nil, errs.New(errs.Internal, "go test -c -tags failpoints ./%s wrote no binary: %v", p, err)
			}
			bins[p] = out
		}
	}
	return bins, nil
}

// byBaseName splits pkgs, in order, into as few groups as leave no two packages of one group
// with the same last path element (the name go test -c gives their binaries).
func byBaseName(pkgs []string) [][]string {
	var groups [][]string
	for _, p := range pkgs {
		placed := false
		for i, g := range groups {
			if !slices.ContainsFunc(g, func(q string) bool { return path.Base(q) == path.Base(p) }) {
				groups[i], placed = append(g, p), true
				break
			}
		}
		if !placed {
			groups = append(groups, []string{p})
		}
	}
	return groups
}

// tail returns the last n bytes of s on one line, for error messages.
func tail(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
