package differential

import (
	"os"
	"os/exec"
	"path/filepath"
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
