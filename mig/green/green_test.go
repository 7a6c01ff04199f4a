package green

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestPlan(t *testing.T) {
	for _, c := range []struct{ total, groups, min, want int }{
		{132, 2, 0, 64}, {132, 4, 0, 32}, {132, 1, 0, 128}, {132, 3, 0, 40},
		{132, 2, 64, 64}, {132, 2, 60, 64}, {132, 3, 33, 40}, {132, 4, 1, 8}, {8, 1, 0, 8},
	} {
		got, err := Plan(c.total, c.groups, c.min)
		if err != nil || got != c.want {
			t.Errorf("Plan(%d, %d, %d) = %d, %v; want %d", c.total, c.groups, c.min, got, err, c.want)
		}
		if got%Granularity != 0 || got*c.groups > c.total {
			t.Errorf("Plan(%d, %d, %d) = %d: not a multiple of %d or does not fit", c.total, c.groups, c.min, got, Granularity)
		}
	}
	for _, c := range []struct{ total, groups, min int }{
		{132, 2, 66}, {132, 4, 34}, {132, 0, 0}, {132, 17, 0}, {0, 2, 0}, {132, 2, -1}, {132, 5, 32},
	} {
		if got, err := Plan(c.total, c.groups, c.min); errs.CodeOf(err) != errs.Input {
			t.Errorf("Plan(%d, %d, %d) = %d, %v; want E_INPUT", c.total, c.groups, c.min, got, err)
		}
	}
}

func TestBindMissing(t *testing.T) {
	all := func(string) uintptr { return 1 }
	noop := func(any, uintptr) {}
	if err := (&api{}).bind("x", all, noop); err != nil {
		t.Fatalf("all symbols present: %v", err)
	}
	noGreen := func(n string) uintptr {
		if strings.Contains(n, "Green") || strings.Contains(n, "DevResource") || strings.Contains(n, "SmResource") {
			return 0
		}
		return 1
	}
	registered := 0
	err := (&api{}).bind("libcuda.so.1", noGreen, func(any, uintptr) { registered++ })
	if errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "cuGreenCtxCreate") {
		t.Errorf("driver without green contexts: %v; want E_UNSUPPORTED naming cuGreenCtxCreate", err)
	}
	if registered != 0 {
		t.Errorf("%d functions registered although binding failed", registered)
	}
	noInit := func(n string) uintptr {
		if n == "cuInit" {
			return 0
		}
		return 1
	}
	if err := (&api{}).bind("libcuda.so.1", noInit, noop); errs.CodeOf(err) != errs.NoDevice {
		t.Errorf("driver without cuInit: %v; want E_NO_DEVICE", err)
	}
}

func TestNoDriver(t *testing.T) {
	LibName = "libcuda-absent-for-tessera-test.so.1"
	_, err := Split(3, 2, 0)
	if errs.CodeOf(err) != errs.NoDevice || !strings.Contains(err.Error(), "device 3") {
		t.Errorf("Split without a driver: %v; want E_NO_DEVICE naming device 3", err)
	}
	if _, err := DeviceSMs(1); errs.CodeOf(err) != errs.NoDevice || !strings.Contains(err.Error(), "device 1") {
		t.Errorf("DeviceSMs without a driver: %v; want E_NO_DEVICE naming device 1", err)
	}
}

func TestCodes(t *testing.T) {
	for r, want := range map[cuResult]errs.Code{2: errs.OOM, 100: errs.NoDevice, 700: errs.IllegalAddress, 801: errs.Unsupported, 1: errs.Internal} {
		if got := codeOf(r); got != want {
			t.Errorf("codeOf(%d) = %s; want %s", r, got, want)
		}
	}
	err := (*api)(nil).cuError(700, "green: device %d: x", 0)
	if errs.CodeOf(err) != errs.IllegalAddress || !strings.Contains(err.Error(), "device 0") {
		t.Errorf("cuError: %v", err)
	}
}
