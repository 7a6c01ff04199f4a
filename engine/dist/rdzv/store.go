package rdzv

import (
	"context"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Store is the key-value store the ranks of one job meet through. Every call is bounded by
// ctx's deadline, or by DefaultTimeout when ctx has none: no call waits forever.
type Store interface {
	// Set stores value under key, replacing any previous value.
	Set(ctx context.Context, key string, value []byte) error
	// Get returns key's value, waiting until some rank sets it.
	Get(ctx context.Context, key string) ([]byte, error)
	// Add adds delta to the decimal counter under key (absent counts as 0) and returns the sum.
	Add(ctx context.Context, key string, delta int64) (int64, error)
	// Wait returns when every key is set.
	Wait(ctx context.Context, keys ...string) error
	// Check reports, without waiting, which of keys are set.
	Check(ctx context.Context, keys ...string) ([]bool, error)
	// Delete removes key; deleting an absent key is not an error.
	Delete(ctx context.Context, key string) error
	// Addr names the store in messages (host:port).
	Addr() string
	// Close releases the client's connections; the store itself lives on.
	Close() error
}

// DefaultTimeout bounds a store call, a Join or a Dial whose context has no deadline (the
// same five minutes torch's TCPStore waits by default).
const DefaultTimeout = 5 * time.Minute

// bounded gives ctx a deadline when it has none.
func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	if d <= 0 {
		d = DefaultTimeout
	}
	return context.WithTimeout(ctx, d)
}

// etcdDialer opens an etcd-backed Store; package rdzv/etcd registers it when a program imports
// it, so that programs without it do not link etcd's client.
var etcdDialer func(ctx context.Context, url, job string) (Store, error)

// RegisterEtcd installs the etcd store's dialer (package rdzv/etcd calls it from init).
func RegisterEtcd(dial func(ctx context.Context, url, job string) (Store, error)) { etcdDialer = dial }

func dialEtcd(ctx context.Context, url, job string) (Store, error) {
	if etcdDialer == nil {
		return nil, errs.New(errs.Unsupported, "TESSERA_RDZV=%s: this program was built without the etcd store (import engine/dist/rdzv/etcd)", url)
	}
	return etcdDialer(ctx, url, job)
}

// Bounded is ctx with a deadline: its own, or d (DefaultTimeout when d <= 0). Every Store
// implementation bounds its calls with it.
func Bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return bounded(ctx, d)
}

// CheckKey refuses a key no store accepts (empty or too long), naming the store.
func CheckKey(addr, key string) error { return checkKey(addr, key) }

// MaxKeys is how many keys one Wait or Check may name, for every store.
const MaxKeys = maxArgs
