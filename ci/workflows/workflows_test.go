package workflows

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func load(t *testing.T) map[string]*Workflow {
	t.Helper()
	ws, err := Load(".")
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

var (
	actionRef = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?@(v\d+(\.\d+){0,2}|[0-9a-f]{40})$`)
	cronField = regexp.MustCompile(`^[0-9*/,-]+$`)
)

func TestWorkflowStructure(t *testing.T) {
	for file, w := range load(t) {
		if w.Name == "" || len(Triggers(w.On)) == 0 || len(w.Jobs) == 0 {
			t.Errorf("%s: needs a name, triggers (on:) and jobs", file)
		}
		// Least privilege: every workflow states it and none asks for write access.
		if w.Permissions["contents"] != "read" {
			t.Errorf("%s: permissions: contents: read is missing", file)
		}
		for k, v := range w.Permissions {
			if v == "write" {
				t.Errorf("%s: permission %s: write", file, k)
			}
		}
		for name, j := range w.Jobs {
			where := file + ": job " + name
			if len(Labels(j.RunsOn)) == 0 {
				t.Errorf("%s: no runs-on", where)
			}
			if j.TimeoutMinutes <= 0 || j.TimeoutMinutes > 360 {
				t.Errorf("%s: timeout-minutes %d, want 1..360 (a hung job must not hold a runner for 6 h)", where, j.TimeoutMinutes)
			}
			for _, need := range Labels(j.Needs) {
				if w.Jobs[need] == nil {
					t.Errorf("%s: needs unknown job %q", where, need)
				}
			}
			if len(j.Steps) == 0 {
				t.Errorf("%s: no steps", where)
			}
			for i, s := range j.Steps {
				sw := where + " step " + s.Name
				if s.Name == "" {
					t.Errorf("%s step %d: no name", where, i)
				}
				if (s.Uses == "") == (s.Run == "") {
					t.Errorf("%s: want exactly one of uses and run", sw)
				}
				if s.Uses != "" && !actionRef.MatchString(s.Uses) {
					t.Errorf("%s: uses %q is not pinned to a version (owner/repo@vN or a commit)", sw, s.Uses)
				}
				for _, text := range append([]string{s.Run, s.If}, values(s.With)...) {
					if strings.Count(text, "${{") != strings.Count(text, "}}") {
						t.Errorf("%s: unbalanced ${{ }} in %q", sw, text)
					}
					// Expressions in scripts are pasted in before the shell parses them: inputs
					// and event fields go through env: instead (script injection).
					if s.Run != "" && strings.Contains(s.Run, "${{") {
						t.Errorf("%s: expression inside run:, pass it through env:", sw)
						break
					}
				}
			}
		}
	}
}

// child is the value of key in a mapping node.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestWorkflowRoles checks that each workflow does the job issue 5 gives it.
func TestWorkflowRoles(t *testing.T) {
	ws := load(t)
	for _, f := range []string{"pr.yml", "nightly.yml", "chaos-cluster.yml"} {
		if ws[f] == nil {
			t.Fatalf("%s is missing", f)
		}
	}
	pr := ws["pr.yml"]
	if !slices.Contains(Triggers(pr.On), "pull_request") {
		t.Errorf("pr.yml: not triggered by pull_request")
	}
	prRuns := allRuns(pr)
	for _, want := range []string{"go tool ginkgo -r", "tessera-qa report ingest", "tessera-qa gate --baseline main"} {
		if !strings.Contains(prRuns, want) {
			t.Errorf("pr.yml: does not run %q", want)
		}
	}

	n := ws["nightly.yml"]
	sched := child(&n.On, "schedule")
	if sched == nil || len(sched.Content) == 0 {
		t.Fatalf("nightly.yml: no schedule")
	}
	for _, entry := range sched.Content {
		cron := child(entry, "cron")
		fields := strings.Fields(cron.Value)
		if len(fields) != 5 {
			t.Errorf("nightly.yml: cron %q has %d fields, want 5", cron.Value, len(fields))
		}
		for _, fl := range fields {
			if !cronField.MatchString(fl) {
				t.Errorf("nightly.yml: cron field %q", fl)
			}
		}
	}
	gpuJob := ""
	for name, j := range n.Jobs {
		if slices.Contains(Labels(j.RunsOn), "gpu") {
			gpuJob = name
		}
	}
	if gpuJob == "" {
		t.Fatalf("nightly.yml: no job on a runner labelled gpu")
	}
	gpuRuns := jobRuns(n.Jobs[gpuJob])
	for _, want := range []string{"--ginkgo.label-filter=gpu", "tessera-qa bench --vs torch", "run --backend cuda"} {
		if !strings.Contains(gpuRuns, want) {
			t.Errorf("nightly.yml: the GPU job does not run %q", want)
		}
	}
	nRuns := allRuns(n)
	for _, want := range []string{"tessera-qa report ingest", "tessera-qa gate --baseline main", "tessera-qa dashboard export out/dashboard"} {
		if !strings.Contains(nRuns, want) {
			t.Errorf("nightly.yml: does not run %q", want)
		}
	}
	uploaded := false
	for _, j := range n.Jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "actions/upload-artifact@") && strings.HasPrefix(s.With["path"], "out/dashboard") {
				uploaded = true
			}
		}
	}
	if !uploaded {
		t.Errorf("nightly.yml: the exported dashboard is not uploaded as an artifact")
	}

	c := ws["chaos-cluster.yml"]
	slurm := false
	for _, j := range c.Jobs {
		slurm = slurm || slices.Contains(Labels(j.RunsOn), "slurm")
	}
	if !slurm || !strings.Contains(allRuns(c), "srun ") {
		t.Errorf("chaos-cluster.yml: no Slurm job")
	}
}

func allRuns(w *Workflow) string {
	var sb strings.Builder
	for _, j := range w.Jobs {
		sb.WriteString(jobRuns(j))
	}
	return sb.String()
}

func jobRuns(j *Job) string {
	var sb strings.Builder
	for _, s := range j.Steps {
		sb.WriteString(s.Run + "\n")
	}
	return sb.String()
}

// docs is the documentation the workflows must agree with: the README and docs/*.md.
func docs(t *testing.T) (all string, readme string) {
	t.Helper()
	r, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../docs/*.md")
	var sb strings.Builder
	sb.Write(r)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(b)
	}
	return sb.String(), string(r)
}

var word = regexp.MustCompile(`^[a-z][a-z-]*$`)

// TestWorkflowCommandsAreDocumented: every tessera-qa verb (and subcommand) a workflow calls
// is one the README or docs/ show, with flags they mention; every go tool ginkgo call uses
// flags the README or .ci/run use, on folders that exist.
func TestWorkflowCommandsAreDocumented(t *testing.T) {
	corpus, _ := docs(t)
	ciRun, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	_, readme := docs(t)
	ginkgoDoc := readme + string(ciRun)
	var pending, called []string
	found := 0
	for file, w := range load(t) {
		for _, c := range Commands(file, w) {
			found++
			where := c.File + " (" + c.Step + "): " + c.Tool + " " + strings.Join(c.Args, " ")
			called = append(called, where)
			if c.Pending {
				pending = append(pending, where)
				continue
			}
			switch c.Tool {
			case "tessera-qa":
				if len(c.Args) == 0 || !word.MatchString(c.Args[0]) {
					t.Errorf("%s: no verb", where)
					continue
				}
				name := "tessera-qa " + c.Args[0]
				if len(c.Args) > 1 && word.MatchString(c.Args[1]) && strings.Contains(corpus, name+" "+c.Args[1]) {
					name += " " + c.Args[1]
				}
				if !regexp.MustCompile(regexp.QuoteMeta(name) + `\b`).MatchString(corpus) {
					t.Errorf("%s: %q is not in the README or docs/", where, name)
				}
				for _, f := range flags(c.Args) {
					if !mentions(corpus, f) {
						t.Errorf("%s: flag %s is not in the README or docs/", where, f)
					}
				}
			case "ginkgo":
				for _, f := range flags(c.Args) {
					if !mentions(ginkgoDoc, f) {
						t.Errorf("%s: ginkgo flag %s is used neither in the README nor in .ci/run", where, f)
					}
				}
				for _, a := range c.Args {
					if strings.HasPrefix(a, "./") {
						if _, err := os.Stat(filepath.Join("../..", a)); err != nil {
							t.Errorf("%s: %s does not exist", where, a)
						}
					}
				}
			}
		}
	}
	if found < 8 {
		t.Errorf("found only %d tessera-qa/ginkgo commands in the workflows", found)
	}
	// Everything the workflows call is built (the chaos verb was the last one): nothing may be
	// marked "not built yet" any more, and the cluster example calls the chaos verb for real.
	for _, p := range pending {
		t.Errorf("marked not built yet: %s", p)
	}
	if !slices.ContainsFunc(called, func(p string) bool {
		return strings.HasPrefix(p, "chaos-cluster.yml") && strings.Contains(p, "tessera-qa chaos --kill-rank")
	}) {
		t.Errorf("chaos-cluster.yml: the `tessera-qa chaos --kill-rank` call is missing")
	}
}

// mentions reports whether text names flag as a whole word ("--base" is not in "--baseline").
func mentions(text, flag string) bool {
	return regexp.MustCompile(regexp.QuoteMeta(flag) + `($|[^a-z0-9-])`).MatchString(text)
}

// flags are the --long flags of a command line, without values.
func flags(args []string) []string {
	var out []string
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			f, _, _ := strings.Cut(a, "=")
			out = append(out, f)
		}
	}
	return out
}

func TestCommandExtraction(t *testing.T) {
	w := &Workflow{Jobs: map[string]*Job{"j": {Steps: []Step{{Name: "s", Run: "go build -o tessera-qa ./cmd/tessera-qa\n" +
		"chmod +x dist/tessera-qa\n./tessera-qa run --backend cpu && dist/tessera-qa gate \\\n  --baseline main\n" +
		"# not built yet: x\ndist/tessera-qa chaos --kill-rank 1\ngo tool ginkgo -r ./suites | tee log\ngo run ./cmd/tessera-qa ops"}}}}}
	var got []string
	for _, c := range Commands("f", w) {
		s := c.Tool + " " + strings.Join(c.Args, " ")
		if c.Pending {
			s += " (pending)"
		}
		got = append(got, s)
	}
	want := []string{"tessera-qa run --backend cpu", "tessera-qa gate --baseline main", "tessera-qa chaos --kill-rank 1 (pending)",
		"ginkgo -r ./suites", "tessera-qa ops"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestActionlint runs actionlint (github.com/rhysd/actionlint) when it is installed: it knows
// GitHub's expression language, the contexts and the actions' inputs, which the checks above
// do not.
func TestActionlint(t *testing.T) {
	bin, err := exec.LookPath("actionlint")
	if err != nil {
		t.Skip("actionlint is not installed (go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12); the structural checks above still ran")
	}
	files, _ := filepath.Glob("*.yml")
	out, err := exec.Command(bin, append([]string{"-config-file", "actionlint.yaml"}, files...)...).CombinedOutput()
	if err != nil {
		t.Errorf("actionlint: %v\n%s", err, out)
	}
}
