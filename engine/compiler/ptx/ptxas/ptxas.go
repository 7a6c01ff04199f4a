// Package ptxas runs NVIDIA's PTX assembler on the generator's modules, so that machines
// without a GPU (CI) check what only the driver's JIT checked before: that every kernel is PTX
// the assembler accepts for the target, and what it costs (registers, spills, stack, time).
// The assembler is the one the driver's JIT is built from; its time per module is the JIT's
// cost on another CPU (docs/ptx.md, "Compile cost").
//
// The tool is found through TESSERA_PTXAS, else ptxas on PATH (ci/setup.d/60-ptxas.sh
// installs Debian's, CUDA 11.8). An assembler older than a module's .version gets the module
// with its .version line lowered to the newest it reads (the SIMT paths use no instruction
// newer than PTX 7.8; one that did would be rejected, which is the check's point), and one that
// does not know the target (sm_90a needs CUDA 12.0) refuses with E_UNSUPPORTED.
package ptxas

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Var names the assembler to use.
const Var = "TESSERA_PTXAS"

// Tool is one assembler binary and the newest PTX ISA it reads.
type Tool struct {
	Path    string
	Release string // "11.8"
	MaxPTX  string // newest .version it accepts, "7.8"
	arches  map[string]bool
}

// Function is what ptxas -v reports for one .entry or .func.
type Function struct {
	Name        string
	Entry       bool
	Registers   int // entries only; a .func shares its caller's allocation
	StackBytes  int
	SpillStores int
	SpillLoads  int
}

// Result is one module's assembly.
type Result struct {
	Functions []Function
	Elapsed   time.Duration
	// Lowered is the module's own .version when it was lowered to Tool.MaxPTX, else "".
	Lowered string
}

// Spills is the bytes spilled (stores plus loads) over every function.
func (r Result) Spills() int {
	n := 0
	for _, f := range r.Functions {
		n += f.SpillStores + f.SpillLoads
	}
	return n
}

// maxPTX is the newest PTX ISA of each CUDA release (the PTX ISA's release notes).
var maxPTX = map[string]string{
	"11.8": "7.8", "12.0": "8.0", "12.1": "8.1", "12.2": "8.2", "12.3": "8.3", "12.4": "8.4",
	"12.5": "8.5", "12.6": "8.5", "12.8": "8.7", "12.9": "8.8", "13.0": "9.0",
}

var releaseLine = regexp.MustCompile(`release (\d+\.\d+), V`)

// Find locates the assembler and asks its version. No assembler is E_UNSUPPORTED, naming
// where it looked.
func Find() (*Tool, error) {
	path := os.Getenv(Var)
	if path == "" {
		p, err := exec.LookPath("ptxas")
		if err != nil {
			return nil, errs.New(errs.Unsupported, "ptxas: not on PATH and %s is unset (ci/setup.d/60-ptxas.sh installs it)", Var)
		}
		path = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		if l := firstLine(out); l != "" {
			err = fmt.Errorf("%v: %s", err, l)
		}
		return nil, errs.New(errs.Unsupported, "ptxas at %s: --version: %v", path, err)
	}
	m := releaseLine.FindSubmatch(out)
	if m == nil {
		return nil, errs.New(errs.Unsupported, "ptxas at %s: no release in its version: %s", path, firstLine(out))
	}
	t := &Tool{Path: path, Release: string(m[1]), arches: map[string]bool{"sm_90": true}}
	t.MaxPTX = maxPTX[t.Release]
	if t.MaxPTX == "" {
		t.MaxPTX = "9.0" // newer than this table: assume it reads what the generator writes
	}
	if !olderThan(t.Release, "12.0") {
		t.arches["sm_90a"] = true
	}
	return t, nil
}

// Knows reports whether the assembler takes the target ("sm_90", "sm_90a").
func (t *Tool) Knows(arch string) bool { return t.arches[arch] }

var versionLine = regexp.MustCompile(`(?m)^\.version (\d+\.\d+)$`)
var targetLine = regexp.MustCompile(`(?m)^\.target (\w+)$`)

// Assemble runs ptxas -v on one module for the module's own .target and parses its report.
// A module ptxas rejects is E_INTERNAL with ptxas's first errors: the generator wrote PTX
// that the driver would refuse.
func (t *Tool) Assemble(ctx context.Context, module, name string) (Result, error) {
	var res Result
	tm := targetLine.FindStringSubmatch(module)
	if tm == nil {
		return res, errs.New(errs.Input, "ptxas: module %s has no .target line", name)
	}
	arch := tm[1]
	if !t.Knows(arch) {
		return res, unknownArch(t, arch, name)
	}
	if vm := versionLine.FindStringSubmatch(module); vm != nil && olderThan(t.MaxPTX, vm[1]) {
		res.Lowered = vm[1]
		module = versionLine.ReplaceAllString(module, ".version "+t.MaxPTX)
	}
	dir, err := os.MkdirTemp("", "tessera-ptxas-")
	if err != nil {
		return res, errs.New(errs.Internal, "ptxas: temporary folder: %v", err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "module.ptx")
	if err := os.WriteFile(src, []byte(module), 0o644); err != nil {
		return res, errs.New(errs.Internal, "ptxas: %v", err)
	}
	cmd := exec.CommandContext(ctx, t.Path, "-arch="+arch, "-v", "-o", filepath.Join(dir, "module.cubin"), src)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	res.Elapsed = time.Since(start)
	if ctx.Err() != nil {
		return res, errs.Wrap(errs.Timeout, ctx.Err(), "ptxas: module %s", name)
	}
	if err != nil {
		return res, errs.New(errs.Internal, "ptxas %s rejects module %s (%s): %s", t.Release, name, arch, errorLines(out.String(), 3))
	}
	res.Functions, err = ParseInfo(out.String())
	if err != nil {
		return res, errs.Wrap(errs.Internal, err, "ptxas: module %s", name)
	}
	return res, nil
}

var (
	entryLine = regexp.MustCompile(`^ptxas info\s+: Compiling entry function '([^']+)'`)
	propsLine = regexp.MustCompile(`^ptxas info\s+: Function properties for (\S+)$`)
	stackLine = regexp.MustCompile(`^\s*(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads$`)
	usedLine  = regexp.MustCompile(`^ptxas info\s+: Used (\d+) registers`)
)

// ParseInfo reads ptxas -v's report: for each function a "Function properties" line and its
// stack and spill line, and for an entry the registers it uses. Lines it does not know are
// skipped (ptxas adds some per release); a properties line without its numbers is E_PARSE.
func ParseInfo(log string) ([]Function, error) {
	var fns []Function
	entries := map[string]bool{}
	lines := strings.Split(strings.ReplaceAll(log, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := entryLine.FindStringSubmatch(l); m != nil {
			entries[m[1]] = true
			continue
		}
		if m := propsLine.FindStringSubmatch(l); m != nil {
			if i+1 >= len(lines) {
				return nil, errs.New(errs.Parse, "ptxas -v: properties of %s without their numbers", m[1])
			}
			s := stackLine.FindStringSubmatch(lines[i+1])
			if s == nil {
				return nil, errs.New(errs.Parse, "ptxas -v: properties of %s: %.80q is not 'N bytes stack frame, N bytes spill stores, N bytes spill loads'", m[1], lines[i+1])
			}
			f := Function{Name: m[1], Entry: entries[m[1]], StackBytes: atoi(s[1]), SpillStores: atoi(s[2]), SpillLoads: atoi(s[3])}
			i++
			if f.Entry && i+1 < len(lines) {
				if u := usedLine.FindStringSubmatch(lines[i+1]); u != nil {
					f.Registers = atoi(u[1])
					i++
				}
			}
			fns = append(fns, f)
		}
	}
	return fns, nil
}

// atoi reads a count the regexps matched as digits; one too large for an int reads as -1.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// olderThan compares "major.minor" versions.
func olderThan(a, b string) bool {
	am, an, _ := strings.Cut(a, ".")
	bm, bn, _ := strings.Cut(b, ".")
	if atoi(am) != atoi(bm) {
		return atoi(am) < atoi(bm)
	}
	return atoi(an) < atoi(bn)
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// errorLines is the first n lines of ptxas's output that say error or fatal, on one line.
func errorLines(out string, n int) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "error") || strings.Contains(l, "fatal") {
			keep = append(keep, strings.TrimSpace(l))
			if len(keep) == n {
				break
			}
		}
	}
	if len(keep) == 0 {
		return firstLine([]byte(out))
	}
	return strings.Join(keep, "; ")
}

// String is the result in one line: functions, registers of the entry, spills, time.
func (r Result) String() string {
	regs := 0
	for _, f := range r.Functions {
		if f.Entry {
			regs = f.Registers
		}
	}
	return fmt.Sprintf("%d functions, %d registers, %d bytes spilled, %s", len(r.Functions), regs, r.Spills(), r.Elapsed.Round(time.Millisecond))
}

func unknownArch(t *Tool, arch, what string) error {
	return errs.New(errs.Unsupported, "ptxas %s does not assemble %s (%s; sm_90a needs CUDA 12.0)", t.Release, arch, what)
}

// CheckArch is E_UNSUPPORTED when the assembler does not take arch.
func (t *Tool) CheckArch(arch string) error {
	if t.Knows(arch) {
		return nil
	}
	return unknownArch(t, arch, "asked for")
}
