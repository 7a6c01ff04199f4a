package negative

import (
	"testing"
)

func TestEveryCaseIsRefused(t *testing.T) {
	for _, c := range Cases() {
		if err := Refuse(c); err != nil {
			t.Error(err)
		}
	}
}
