package cuda

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// fakeSymbols answers lookups with distinct non-zero addresses, except for absent names.
func fakeSymbols(absent ...string) (symbolLookup, map[string]uintptr) {
	addrs := map[string]uintptr{}
	return func(name string) uintptr {
		for _, a := range absent {
			if a == name {
				return 0
			}
		}
		if _, ok := addrs[name]; !ok {
			addrs[name] = uintptr(0x1000 * (len(addrs) + 1))
		}
		return addrs[name]
	}, addrs
}

func TestBindRegistersEverySignature(t *testing.T) {
	look, _ := fakeSymbols()
	a := &api{}
	// The real purego.RegisterFunc checks each Go signature (argument kinds, register and
	// stack slots) without calling anything, so a signature purego cannot call fails here.
	if err := a.bind("libfake.so", look, purego.RegisterFunc); err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(a).Elem()
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("api.%s was not bound", v.Type().Field(i).Name)
		}
	}
	if n := len(a.bindings()) + len(a.optionalBindings()); n != v.NumField() {
		t.Errorf("%d bindings for %d api fields", n, v.NumField())
	}
}

// A driver without green contexts (before CUDA 12.4) still runs everything else; only a
// placement on an SM partition is refused, when asked for (greenContext).
func TestBindLeavesMissingOptionalSymbolsUnbound(t *testing.T) {
	look, _ := fakeSymbols("cuGreenCtxCreate", "cuDevSmResourceSplitByCount")
	a := &api{}
	if err := a.bind("libcuda.so.1", look, purego.RegisterFunc); err != nil {
		t.Fatalf("a missing green-context symbol made the driver unusable: %v", err)
	}
	if a.cuGreenCtxCreate != nil || a.cuDevSmResourceSplitByCount != nil {
		t.Error("a missing optional symbol was bound")
	}
	if a.cuGreenCtxStreamCreate == nil || a.cuMemAlloc == nil {
		t.Error("present symbols were not bound")
	}
	if a.hasGreen() {
		t.Error("hasGreen with cuGreenCtxCreate missing")
	}
}

func TestBindPrefersVersionedNamesAndFallsBack(t *testing.T) {
	look, addrs := fakeSymbols("cuEventElapsedTime_v2", "cuDeviceGetUuid_v2")
	got := map[uintptr]bool{}
	a := &api{}
	if err := a.bind("libfake.so", look, func(_ any, addr uintptr) { got[addr] = true }); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cuEventElapsedTime", "cuDeviceGetUuid", "cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuStreamDestroy_v2"} {
		if addrs[name] == 0 || !got[addrs[name]] {
			t.Errorf("%s was not the symbol bound", name)
		}
	}
	if _, asked := addrs["cuMemAlloc"]; asked {
		t.Error("unversioned cuMemAlloc (32-bit sizes) was looked up although cuMemAlloc_v2 exists")
	}
}

func TestBindReportsMissingSymbolsAsNoDevice(t *testing.T) {
	look, _ := fakeSymbols("cuMemAlloc_v2", "cuModuleLoadDataEx", "cuEventElapsedTime_v2", "cuEventElapsedTime")
	a := &api{}
	err := a.bind("libcuda.so.1", look, func(any, uintptr) {})
	if errs.CodeOf(err) != errs.NoDevice {
		t.Fatalf("code %s, want E_NO_DEVICE: %v", errs.CodeOf(err), err)
	}
	for _, want := range []string{"libcuda.so.1", "cuMemAlloc_v2", "cuModuleLoadDataEx", "cuEventElapsedTime_v2|cuEventElapsedTime"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err, want)
		}
	}
}
