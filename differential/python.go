package differential

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// PythonEnv is the environment variable naming the interpreter the oracles run under.
const PythonEnv = "TESSERA_QA_PYTHON"

// systemPython is tried after the python3 on PATH: Debian's python3-torch installs into the
// system interpreter, while PATH often starts with a pyenv or venv python without torch.
const systemPython = "/usr/bin/python3"

// candidate is one interpreter to try, and whether the user named it.
type candidate struct {
	path     string
	explicit bool
}

// candidates lists the interpreters to try, in order: the explicit one (flag, then
// TESSERA_QA_PYTHON) alone, else python3 on PATH and /usr/bin/python3, without duplicates.
func candidates(flag string) []candidate {
	if flag != "" {
		return []candidate{{flag, true}}
	}
	if env := os.Getenv(PythonEnv); env != "" {
		return []candidate{{env, true}}
	}
	var out []candidate
	seen := map[string]bool{}
	add := func(p string) {
		key := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			key = r
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, candidate{path: p})
		}
	}
	if p, err := exec.LookPath("python3"); err == nil {
		add(p)
	}
	add(systemPython)
	return out
}

// Interpreter returns the first candidate interpreter (flag, $TESSERA_QA_PYTHON, python3 on
// PATH, /usr/bin/python3) that imports every module, for checks that run a script of their own
// instead of the oracle's protocol. None: E_NO_DEVICE listing each one tried and why.
func Interpreter(flag string, modules ...string) (string, error) {
	var tried []string
	for _, c := range candidates(flag) {
		out, err := exec.Command(c.path, "-c", "import "+strings.Join(modules, ", ")).CombinedOutput()
		if err == nil {
			return c.path, nil
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		tried = append(tried, fmt.Sprintf("%s: %v: %s", c.path, err, lines[len(lines)-1]))
	}
	return "", errs.New(errs.NoDevice, "no interpreter imports %s (%s); install python3-torch (ci/setup.d/20-torch.sh), or name one with $%s",
		strings.Join(modules, ", "), strings.Join(tried, "; "), PythonEnv)
}
