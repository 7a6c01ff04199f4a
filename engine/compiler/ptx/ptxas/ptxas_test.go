package ptxas

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// testdata/v-11.8.txt is what ptxas 11.8 printed with -v for a stream kernel that calls three
// routines.
func TestParseInfoOfARecordedReport(t *testing.T) {
	b, err := os.ReadFile("testdata/v-11.8.txt")
	if err != nil {
		t.Fatal(err)
	}
	fns, err := ParseInfo(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 4 {
		t.Fatalf("%d functions: %+v", len(fns), fns)
	}
	e := fns[0]
	if e.Name != "tq_k5" || !e.Entry || e.Registers != 72 || e.StackBytes != 0 || e.SpillStores != 0 {
		t.Errorf("entry %+v", e)
	}
	for _, f := range fns[1:] {
		if f.Entry || f.Registers != 0 || !strings.HasPrefix(f.Name, "tq_") {
			t.Errorf("routine %+v", f)
		}
	}
}

func TestParseInfoReadsSpillsAndRefusesATornReport(t *testing.T) {
	log := "ptxas info    : Compiling entry function 'k' for 'sm_90'\n" +
		"ptxas info    : Function properties for k\n" +
		"    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads\n" +
		"ptxas info    : Used 255 registers, 380 bytes cmem[0]\n"
	fns, err := ParseInfo(log)
	if err != nil || len(fns) != 1 || fns[0].Registers != 255 || fns[0].StackBytes != 24 {
		t.Fatalf("%+v %v", fns, err)
	}
	if (Result{Functions: fns}).Spills() != 24 {
		t.Errorf("spills %d", Result{Functions: fns}.Spills())
	}
	for _, torn := range []string{
		"ptxas info    : Function properties for k\n",
		"ptxas info    : Function properties for k\n    lots of bytes\n",
	} {
		if _, err := ParseInfo(torn); errs.CodeOf(err) != errs.Parse {
			t.Errorf("%q: %v, want E_PARSE", torn, err)
		}
	}
}

func FuzzParseInfo(f *testing.F) {
	if b, err := os.ReadFile("testdata/v-11.8.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("ptxas info    : Function properties for k\n    1 bytes stack frame, 2 bytes spill stores, 3 bytes spill loads\n")
	f.Add("ptxas info    : Function properties for k\n    99999999999999999999 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
	f.Fuzz(func(t *testing.T, log string) {
		fns, err := ParseInfo(log)
		if err != nil {
			if errs.CodeOf(err) != errs.Parse {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		if len(fns) > strings.Count(log, "Function properties for ") {
			t.Fatalf("%d functions from %d properties lines", len(fns), strings.Count(log, "Function properties for "))
		}
		for _, fn := range fns {
			if fn.Name == "" {
				t.Fatalf("function without a name: %+v", fn)
			}
		}
	})
}

func TestVersionOrder(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"7.8", "8.0", true}, {"8.0", "7.8", false}, {"11.8", "12.0", true}, {"12.10", "12.9", false}, {"8.0", "8.0", false}} {
		if got := olderThan(c.a, c.b); got != c.want {
			t.Errorf("olderThan(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

// A stand-in ptxas (a shell script) proves Find's version handling where no real one exists.
func TestFindReadsTheRelease(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "ptxas")
	script := "#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Var, fake)
	tool, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	if tool.Release != "12.4" || tool.MaxPTX != "8.4" || !tool.arches["sm_90a"] {
		t.Errorf("%+v", tool)
	}
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho something else\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(); errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "no release") {
		t.Errorf("a tool without a release: %v", err)
	}
	t.Setenv(Var, filepath.Join(dir, "absent"))
	if _, err := Find(); errs.CodeOf(err) != errs.Unsupported {
		t.Errorf("a missing tool: %v", err)
	}
}

const goodModule = `.version 8.0
.target sm_90
.address_size 64

.func (.reg .f64 %ret) tq_twice(.reg .f64 %arg)
{
	add.rn.f64 %ret, %arg, %arg;
	ret;
}

.visible .entry k(
	.param .u64 k_p0
)
{
	.reg .b64 %rd<3>;
	.reg .f64 %fd<3>;
	ld.param.u64 %rd1, [k_p0];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.f64 %fd1, [%rd2];
	call (%fd2), tq_twice, (%fd1);
	st.global.f64 [%rd2], %fd2;
	ret;
}
`

// With the real assembler (CI installs it): a good module assembles and is reported, a bad
// one is E_INTERNAL with ptxas's own words, an unknown target E_UNSUPPORTED.
func TestAssembleWithTheRealTool(t *testing.T) {
	tool, err := Find()
	if err != nil {
		t.Skipf("no ptxas: %v", err)
	}
	ctx := context.Background()
	res, err := tool.Assemble(ctx, goodModule, "good")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Functions) != 2 || !res.Functions[0].Entry || res.Functions[0].Name != "k" || res.Functions[0].Registers == 0 {
		t.Errorf("%+v", res)
	}
	if olderThan(tool.MaxPTX, "8.0") && res.Lowered != "8.0" {
		t.Errorf("ptxas %s reads up to %s, and the 8.0 module was not lowered: %+v", tool.Release, tool.MaxPTX, res)
	}
	bad := strings.Replace(goodModule, "add.rn.f64 %ret, %arg, %arg;", "add.rn.f64 %ret, %arg, %nope;", 1)
	if _, err := tool.Assemble(ctx, bad, "bad"); errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "%nope") {
		t.Errorf("bad module: %v", err)
	}
	if !tool.arches["sm_90a"] {
		a := strings.Replace(goodModule, ".target sm_90", ".target sm_90a", 1)
		if _, err := tool.Assemble(ctx, a, "a"); errs.CodeOf(err) != errs.Unsupported {
			t.Errorf("sm_90a on ptxas %s: %v", tool.Release, err)
		}
	}
}
