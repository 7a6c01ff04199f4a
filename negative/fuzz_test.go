package negative

import "testing"

// FuzzOneEdit: a graph one edit away from a valid one (the edit drawn from the fuzzer's
// bytes) is refused with a coded one-line error, or runs on the CPU and agrees with
// engine/ref: never a panic, an out-of-bounds read or a silent wrong answer.
// Run: go test -run=^$ -fuzz=FuzzOneEdit ./negative
func FuzzOneEdit(f *testing.F) {
	for i := range Bases {
		for _, kind := range []byte{0, 1, 2, 3} {
			f.Add(uint8(i), uint64(i), []byte{kind, 1, 2, 3, 4, 5})
		}
	}
	f.Fuzz(func(t *testing.T, base uint8, seed uint64, choices []byte) {
		b := Bases[int(base)%len(Bases)]
		e, err := OneEdit(b, bytesChooser(choices))
		if err != nil {
			t.Fatal(err)
		}
		if err := Judge(e.Text, seed); err != nil {
			t.Fatalf("%s: %v\n%s", e.What, err, e.Text)
		}
	})
}

// bytesChooser reads one choice per byte, then 0s.
func bytesChooser(b []byte) Chooser {
	return func(n int) int {
		if len(b) == 0 {
			return 0
		}
		c := int(b[0]) % n
		b = b[1:]
		return c
	}
}
