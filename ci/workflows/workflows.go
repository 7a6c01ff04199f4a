package workflows

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Workflow is the part of the GitHub Actions workflow syntax these workflows use. Decoding
// with known fields only turns a misspelt key ("timeout-minute") into an error instead of a
// key GitHub silently ignores.
type Workflow struct {
	Name        string            `yaml:"name"`
	RunName     string            `yaml:"run-name"`
	On          yaml.Node         `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Env         map[string]string `yaml:"env"`
	Defaults    yaml.Node         `yaml:"defaults"`
	Concurrency yaml.Node         `yaml:"concurrency"`
	Jobs        map[string]*Job   `yaml:"jobs"`
}

// Job is one job of a workflow.
type Job struct {
	Name            string            `yaml:"name"`
	RunsOn          yaml.Node         `yaml:"runs-on"`
	Needs           yaml.Node         `yaml:"needs"`
	If              string            `yaml:"if"`
	TimeoutMinutes  int               `yaml:"timeout-minutes"`
	Env             map[string]string `yaml:"env"`
	Permissions     map[string]string `yaml:"permissions"`
	Strategy        yaml.Node         `yaml:"strategy"`
	Outputs         map[string]string `yaml:"outputs"`
	ContinueOnError yaml.Node         `yaml:"continue-on-error"`
	Container       yaml.Node         `yaml:"container"`
	Services        yaml.Node         `yaml:"services"`
	Defaults        yaml.Node         `yaml:"defaults"`
	Concurrency     yaml.Node         `yaml:"concurrency"`
	Environment     yaml.Node         `yaml:"environment"`
	Steps           []Step            `yaml:"steps"`
}

// Step is one step of a job: an action (Uses) or a script (Run).
type Step struct {
	Name             string            `yaml:"name"`
	ID               string            `yaml:"id"`
	If               string            `yaml:"if"`
	Uses             string            `yaml:"uses"`
	Run              string            `yaml:"run"`
	Shell            string            `yaml:"shell"`
	With             map[string]string `yaml:"with"`
	Env              map[string]string `yaml:"env"`
	ContinueOnError  yaml.Node         `yaml:"continue-on-error"`
	TimeoutMinutes   int               `yaml:"timeout-minutes"`
	WorkingDirectory string            `yaml:"working-directory"`
}

// Load parses every *.yml workflow in dir, strictly: a key the workflow syntax does not have
// is an error naming the file.
func Load(dir string) (map[string]*Workflow, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	if err != nil || len(files) == 0 {
		return nil, errs.New(errs.Input, "workflows: no *.yml in %s", dir)
	}
	out := map[string]*Workflow{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, errs.New(errs.Input, "workflows: %v", err)
		}
		var w Workflow
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&w); err != nil {
			return nil, errs.New(errs.Parse, "workflow %s: %v", f, err)
		}
		out[filepath.Base(f)] = &w
	}
	return out, nil
}

// Labels is runs-on (or needs) as a list (a string or a sequence of strings).
func Labels(n yaml.Node) []string {
	switch n.Kind {
	case yaml.ScalarNode:
		return []string{n.Value}
	case yaml.SequenceNode:
		var out []string
		for _, c := range n.Content {
			out = append(out, c.Value)
		}
		return out
	}
	return nil
}

// Triggers are the event names under on:.
func Triggers(n yaml.Node) []string {
	var out []string
	switch n.Kind {
	case yaml.ScalarNode:
		out = append(out, n.Value)
	case yaml.SequenceNode:
		for _, c := range n.Content {
			out = append(out, c.Value)
		}
	case yaml.MappingNode:
		for i := 0; i < len(n.Content); i += 2 {
			out = append(out, n.Content[i].Value)
		}
	}
	return out
}

// Command is one tessera-qa or Ginkgo invocation found in a run: script.
type Command struct {
	File, Step string
	Tool       string   // "tessera-qa" or "ginkgo"
	Args       []string // after the program
	Pending    bool     // marked "not built yet"
}

// shellSep splits a line of shell into the commands of a list or a pipeline.
var shellSep = regexp.MustCompile(`&&|\|\||;|\|`)

// Commands splits run: scripts into shell commands and keeps those that invoke tessera-qa
// (as tessera-qa, ./tessera-qa, dist/tessera-qa or go run ./cmd/tessera-qa) or go tool ginkgo.
// A comment containing "not built yet" marks the next command as pending.
func Commands(file string, w *Workflow) []Command {
	var out []Command
	names := make([]string, 0, len(w.Jobs))
	for n := range w.Jobs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, s := range w.Jobs[n].Steps {
			script := strings.ReplaceAll(s.Run, "\\\n", " ")
			pending := false
			for _, line := range strings.Split(script, "\n") {
				line = strings.TrimSpace(line)
				if strings.HasPrefix(line, "#") {
					pending = pending || strings.Contains(line, "not built yet")
					continue
				}
				if line == "" {
					continue
				}
				for _, part := range shellSep.Split(line, -1) {
					if c, ok := invocation(strings.Fields(part)); ok {
						c.File, c.Step, c.Pending = file, s.Name, pending
						out = append(out, c)
					}
				}
				pending = false
			}
		}
	}
	return out
}

// invocation finds the program in one simple command. "-o tessera-qa" (a build output) and
// "chmod +x dist/tessera-qa" name the binary without running it.
func invocation(tok []string) (Command, bool) {
	for i, t := range tok {
		switch {
		case t == "go" && i+2 < len(tok) && tok[i+1] == "tool" && tok[i+2] == "ginkgo":
			return Command{Tool: "ginkgo", Args: tok[i+3:]}, true
		case t == "go" && i+2 < len(tok) && tok[i+1] == "run" && tok[i+2] == "./cmd/tessera-qa":
			return Command{Tool: "tessera-qa", Args: tok[i+3:]}, true
		case (t == "tessera-qa" || strings.HasSuffix(t, "/tessera-qa")) && !strings.Contains(t, "cmd/") &&
			(i == 0 || tok[i-1] != "-o") && !(i > 0 && (tok[i-1] == "chmod" || strings.HasPrefix(tok[i-1], "+"))):
			return Command{Tool: "tessera-qa", Args: tok[i+1:]}, true
		}
	}
	return Command{}, false
}
