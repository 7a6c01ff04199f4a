package report

import (
	"context"
	"sync"

	"github.com/tessera-qa/tessera-qa/report/store"
	_ "github.com/tessera-qa/tessera-qa/report/store/driver"
)

// DefaultDB is where `tessera-qa` keeps its history unless --db says otherwise.
const DefaultDB = "tessera-qa-out/results.db"

// DB is the results history with its analyses.
type DB struct {
	st  store.Store
	cfg Config

	mu    sync.Mutex
	cache *snapshot // analyses of one store generation
}

// Open opens or creates the store at dsn (a SQLite path or a postgres:// URL) and migrates it
// to the latest schema.
func Open(ctx context.Context, dsn string, cfg Config) (*DB, error) {
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		return nil, err
	}
	return &DB{st: st, cfg: cfg.withDefaults()}, nil
}

// OpenReadOnly opens an existing store for reading only (the dashboard): no migration, and
// every write is refused.
func OpenReadOnly(ctx context.Context, dsn string, cfg Config) (*DB, error) {
	st, err := store.Open(ctx, dsn, store.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &DB{st: st, cfg: cfg.withDefaults()}, nil
}

// NewDB wraps an opened store (tests, and callers that open the store themselves).
func NewDB(st store.Store, cfg Config) *DB { return &DB{st: st, cfg: cfg.withDefaults()} }

// Store is the underlying store.
func (db *DB) Store() store.Store { return db.st }

// Config is the configuration in force.
func (db *DB) Config() Config { return db.cfg }

// Close closes the store.
func (db *DB) Close() error { return db.st.Close() }
