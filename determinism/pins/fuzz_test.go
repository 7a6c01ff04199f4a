package pins

import (
	"reflect"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// FuzzParse: any input is refused with one E_INPUT line or read into a file that Marshal
// writes back to the same pins, and those bytes are a fixed point.
func FuzzParse(f *testing.F) {
	good, err := Marshal(file("cpu/amd64+fma", map[string][]string{"add/f32/1": {"a"}, "matmul/bf16/3x5": {"m", "m2"}}))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":"tessera.pins","version":1,"device_class":"c","cases":{"x":{"outputs":["nil"],"accepted":{"previous":"` +
		digest("p") + `","reason":"r","by":"b","date":"2026-01-01"}}}}`))
	f.Add([]byte(`{"format":"tessera.pins","version":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if errs.CodeOf(err) != errs.Input {
				t.Fatalf("refusal %v is not E_INPUT", err)
			}
			return
		}
		out, err := Marshal(p)
		if err != nil {
			t.Fatalf("Marshal of a parsed file: %v", err)
		}
		q, err := Parse(out)
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("read back: %+v, %v; want %+v", q, err, p)
		}
		if again, _ := Marshal(q); string(again) != string(out) {
			t.Fatal("Marshal(Parse(Marshal(f))) differs from Marshal(f)")
		}
	})
}
