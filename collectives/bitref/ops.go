package bitref

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The collectives, each from every rank's inputs (index: rank). They say what every rank
// must receive; nothing here knows how the engine moves or cuts the data.

// AllReduce is what every rank receives: parts[r] are rank r's contributions (one for
// AllReduce, several for AllReduceMulti), reduced in global order.
func AllReduce(mode Mode, dt numerics.DType, red Red, parts [][][]byte) ([]byte, error) {
	var flat [][]byte
	for _, p := range parts {
		flat = append(flat, p...)
	}
	return Reduce(mode, dt, red, flat)
}

// ReduceScatter is what each rank receives: chunk r (len(send)/n bytes) of the reduction of
// every rank's send buffer.
func ReduceScatter(mode Mode, dt numerics.DType, red Red, sends [][]byte) ([][]byte, error) {
	full, err := Reduce(mode, dt, red, sends)
	if err != nil {
		return nil, err
	}
	n := len(sends)
	if len(full)%(n*dt.Size()) != 0 {
		return nil, fmt.Errorf("bitref: reduce_scatter of %d bytes of %s does not split over %d ranks", len(full), dt, n)
	}
	b := len(full) / n
	out := make([][]byte, n)
	for r := range out {
		out[r] = full[r*b : (r+1)*b]
	}
	return out, nil
}

// AllGather is what every rank receives: every rank's buffer, in rank order.
func AllGather(sends [][]byte) []byte {
	var out []byte
	for _, s := range sends {
		out = append(out, s...)
	}
	if out == nil {
		out = []byte{}
	}
	return out
}

// Broadcast is what every rank receives: root's buffer.
func Broadcast(sends [][]byte, root int) []byte { return append([]byte{}, sends[root]...) }

// AllToAll is what each rank r receives: chunk r of every rank q's buffer, at chunk q.
func AllToAll(dt numerics.DType, sends [][]byte) ([][]byte, error) {
	n := len(sends)
	out := make([][]byte, n)
	for q, s := range sends {
		if len(s)%(n*dt.Size()) != 0 || len(s) != len(sends[0]) {
			return nil, fmt.Errorf("bitref: all_to_all: rank %d's %d bytes of %s do not split over %d ranks", q, len(s), dt, n)
		}
	}
	for r := range out {
		for _, s := range sends {
			b := len(s) / n
			out[r] = append(out[r], s[r*b:(r+1)*b]...)
		}
		if out[r] == nil {
			out[r] = []byte{}
		}
	}
	return out, nil
}
