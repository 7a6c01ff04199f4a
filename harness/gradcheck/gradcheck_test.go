package gradcheck

import (
	"fmt"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
)

func TestCatalogueGradients(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := Cases(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		r := Check(b, c)
		if !r.Pass {
			t.Errorf("%s: %s %+v", c.Name, r.Err, r.Inputs)
		} else if testing.Verbose() {
			fmt.Printf("ok %s %v %+v %s\n", c.Name, r.DType, r.Inputs, r.NoGrad)
		}
	}
}
