package golden

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// DigestChildEnv, set to "1", turns a determinism test binary into a digest child: instead of
// running specs it prints the digests of every catalogue spec (PrintDigests) and exits. The
// parent re-executes itself this way (DigestsFromChild) to compare bits across processes.
const DigestChildEnv = "TESSERA_QA_DIGEST_CHILD"

// digestMarker starts the one stdout line that carries the JSON, so the test framework's own
// output around it ("PASS", ...) does not matter.
const digestMarker = "TESSERA_QA_DIGESTS "

// DigestSet holds, per DigestKey, the output digests of one run, and the errors of runs that
// produced none.
type DigestSet struct {
	Digests map[string][]string `json:"digests"`
	Errors  map[string]string   `json:"errors,omitempty"`
}

// DigestKey names one spec on one backend in a DigestSet.
func DigestKey(backendName, spec string) string { return backendName + "|" + spec }

// ComputeDigests runs every spec once on every available backend.
func ComputeDigests(specs []Spec, bs []backend.Backend) DigestSet {
	d := DigestSet{Digests: map[string][]string{}, Errors: map[string]string{}}
	for _, b := range bs {
		if b.Available() != nil {
			continue
		}
		for _, s := range specs {
			k := DigestKey(b.Name(), s.Name)
			if got, err := RunDigests(s, b); err != nil {
				d.Errors[k] = err.Error()
			} else {
				d.Digests[k] = got
			}
		}
	}
	return d
}

// PrintDigests writes d as the digest child's answer.
func PrintDigests(w io.Writer, d DigestSet) error {
	data, err := json.Marshal(d)
	if err != nil {
		return errs.New(errs.Internal, "digest child: encode: %v", err)
	}
	_, err = io.WriteString(w, "\n"+digestMarker+string(data)+"\n")
	return err
}

// DigestsFromChild runs exe (normally os.Executable(), the test binary itself) with args and
// DigestChildEnv=1, and reads the DigestSet it prints. The child inherits the environment, so
// it sees the same backends.
func DigestsFromChild(timeout time.Duration, exe string, args ...string) (DigestSet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), DigestChildEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return DigestSet{}, errs.New(errs.Internal, "digest child %s: %v: %s", exe, err, lastLine(stderr.String()+string(out)))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if js, ok := strings.CutPrefix(sc.Text(), digestMarker); ok {
			var d DigestSet
			if err := json.Unmarshal([]byte(js), &d); err != nil {
				return DigestSet{}, errs.New(errs.Parse, "digest child %s: bad answer: %v", exe, err)
			}
			return d, nil
		}
	}
	return DigestSet{}, errs.New(errs.Internal, "digest child %s printed no %q line (is %s=1 handled before RunSpecs?): %s",
		exe, strings.TrimSpace(digestMarker), DigestChildEnv, lastLine(string(out)))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
