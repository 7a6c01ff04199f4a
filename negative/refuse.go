package negative

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// File is the name the cases are parsed under; every parse error names it.
const File = "neg.tg"

// Refuse runs c through the entry points of its stage and returns nil when each refused the
// graph with c's code in one line naming what c.Names list, else what went wrong: the graph
// was accepted, refused with another code or an uncoded message, or an entry point panicked.
func Refuse(c Case) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: panicked: %v", c.Rule, r)
		}
	}()
	switch c.Stage {
	case StageParse:
		_, err := graph.Parse(c.Text, File)
		return c.judge("graph.Parse", err)
	case StageVerify, StageCompile:
		g, err := graph.Parse(c.Text, File)
		if err != nil {
			return fmt.Errorf("%s: the graph to edit does not parse: %v", c.Rule, err)
		}
		if c.Stage == StageVerify {
			if c.Edit == nil {
				return fmt.Errorf("%s: a verify case needs an Edit", c.Rule)
			}
			c.Edit(g)
			if err := c.judge("graph.Verify", graph.Verify(g)); err != nil {
				return err
			}
		}
		_, err = compiler.Compile(g, compiler.Options{})
		return c.judge("compiler.Compile", err)
	}
	return fmt.Errorf("%s: unknown stage %q", c.Rule, c.Stage)
}

// judge checks one entry point's refusal.
func (c Case) judge(entry string, err error) error {
	if err == nil {
		return fmt.Errorf("%s: %s accepted a graph that breaks %s (%s)", c.Rule, entry, c.Rule, c.Hook)
	}
	return c.judgeLine(entry, err.Error(), errs.CodeOf(err))
}

func (c Case) judgeLine(entry, msg string, code errs.Code) error {
	switch {
	case code != c.Code:
		return fmt.Errorf("%s: %s refused with %s, want %s: %s", c.Rule, entry, code, c.Code, msg)
	case strings.Contains(msg, "\n"):
		return fmt.Errorf("%s: %s refused in more than one line: %q", c.Rule, entry, msg)
	case !strings.HasPrefix(msg, string(c.Code)+": "):
		return fmt.Errorf("%s: %s message does not start with its code: %q", c.Rule, entry, msg)
	}
	for _, n := range c.Names {
		if !strings.Contains(msg, n) {
			return fmt.Errorf("%s: %s message does not name %q: %s", c.Rule, entry, n, msg)
		}
	}
	return nil
}

// RefuseCLI runs the tessera-qa binary bin on a parse-stage case, as `exec` and as
// `compile`: each must exit 2 and print one line, the refusal with c's code and names,
// and nothing on stdout. dir receives the graph file.
func RefuseCLI(bin, dir string, c Case) error {
	if c.Stage != StageParse {
		return nil
	}
	file := filepath.Join(dir, strings.ReplaceAll(c.Rule, "/", "_")+".tg")
	if err := os.WriteFile(file, []byte(c.Text), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"exec", file, "--in", filepath.Join(dir, "none.npz"), "--out", filepath.Join(dir, "out.npz")},
		{"compile", file},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		var exit *exec.ExitError
		entry := "tessera-qa " + args[0]
		switch {
		case err == nil:
			return fmt.Errorf("%s: %s exited 0 on a graph that breaks the rule", c.Rule, entry)
		case !errors.As(err, &exit):
			return fmt.Errorf("%s: %s: %v", c.Rule, entry, err)
		case exit.ExitCode() != 2:
			return fmt.Errorf("%s: %s exited %d, want 2: %s", c.Rule, entry, exit.ExitCode(), stderr.String())
		case stdout.Len() > 0:
			return fmt.Errorf("%s: %s printed on stdout: %q", c.Rule, entry, stdout.String())
		}
		// The CLI prefixes every error line with its own name, as Unix tools do.
		line, ok := strings.CutPrefix(strings.TrimSuffix(stderr.String(), "\n"), "tessera-qa: ")
		if !ok {
			return fmt.Errorf("%s: %s error line does not start with \"tessera-qa: \": %q", c.Rule, entry, stderr.String())
		}
		if err := c.judgeLine(entry, line, errs.Code(strings.SplitN(line, ":", 2)[0])); err != nil {
			return err
		}
		if !strings.Contains(line, file) {
			return fmt.Errorf("%s: %s does not name the file %s: %s", c.Rule, entry, file, line)
		}
	}
	return nil
}
