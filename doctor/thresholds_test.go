package doctor

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestEmbeddedThresholdsParse(t *testing.T) {
	th := DefaultThresholds()
	for _, want := range []struct{ kind, name, sku string }{{"gpu", "NVIDIA H100 80GB HBM3", "H100"}, {"gpu", "NVIDIA H200", "H200"}, {"cpu", "cpu linux/amd64 x2", "CPU"}} {
		s, ok := th.SKUFor(want.kind, want.name)
		if !ok || s.Name != want.sku {
			t.Errorf("SKUFor(%s, %q) = %q %v, want %s", want.kind, want.name, s.Name, ok, want.sku)
		}
	}
	if _, ok := th.SKUFor("gpu", "NVIDIA L4"); ok {
		t.Error("an L4 matched a SKU")
	}
}

// Every rule of the parser refuses with E_INPUT naming the field.
func TestThresholdsParserRefusals(t *testing.T) {
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(embeddedThresholds, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	sku0 := func(m map[string]any) map[string]any { return m["skus"].([]any)[0].(map[string]any) }
	for _, c := range []struct{ doc, want string }{
		{edit(func(m map[string]any) { m["format"] = "x" }), "format"},
		{edit(func(m map[string]any) { m["version"] = 2 }), "version 2"},
		{edit(func(m map[string]any) { m["extra"] = 1 }), "unknown field"},
		{edit(func(m map[string]any) { m["skus"] = []any{} }), "no skus"},
		{edit(func(m map[string]any) { sku0(m)["name"] = " " }), "no name"},
		{edit(func(m map[string]any) { sku0(m)["name"] = "H200" }), "name given twice"},
		{edit(func(m map[string]any) { sku0(m)["kind"] = "tpu" }), "kind"},
		{edit(func(m map[string]any) { sku0(m)["match"] = []any{} }), "no match"},
		{edit(func(m map[string]any) { sku0(m)["h2d_min_gbps"] = -1 }), "h2d_min_gbps"},
		{edit(func(m map[string]any) { sku0(m)["memtest_fraction"] = 1.5 }), "memtest_fraction"},
		{edit(func(m map[string]any) { sku0(m)["temperature_warn_c"] = 99 }), "temperature_warn_c 99 above temperature_fail_c"},
		{string(embeddedThresholds) + "{}", "data after"},
	} {
		_, err := ParseThresholds([]byte(c.doc))
		if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want E_INPUT with %q, got %v", c.want, err)
		}
	}
}

// FuzzParseThresholds: any input is refused with E_INPUT or parsed into a file that reads
// back the same after a round trip, whose limits are finite and >= 0.
func FuzzParseThresholds(f *testing.F) {
	f.Add(embeddedThresholds)
	f.Add([]byte(`{"format":"tessera.doctor.thresholds","version":1,"skus":[{"name":"x","kind":"cpu","match":["c"]}]}`))
	f.Add([]byte(`{"format":"tessera.doctor.thresholds","version":1,"skus":[{"name":"x","kind":"gpu","match":["c"],"memtest_fraction":1e400}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		th, err := ParseThresholds(b)
		if err != nil {
			if errs.CodeOf(err) != errs.Input {
				t.Fatalf("uncoded refusal: %v", err)
			}
			return
		}
		for _, s := range th.SKUs {
			for k, v := range s.limits() {
				if !(v >= 0) {
					t.Fatalf("%s %s = %v accepted", s.Name, k, v)
				}
			}
		}
		again, err := json.Marshal(th)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseThresholds(again)
		if err != nil || !reflect.DeepEqual(back, th) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, back, th)
		}
	})
}
