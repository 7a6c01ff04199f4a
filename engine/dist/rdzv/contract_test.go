package rdzv_test

import (
	"context"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv/storetest"
)

// The TCP store keeps the Store contract that every store keeps.
func TestStoreOperations(t *testing.T) {
	srv, err := rdzv.Serve(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dial := func() rdzv.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := rdzv.Dial(ctx, srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	storetest.Contract(t, dial(), dial())
}
