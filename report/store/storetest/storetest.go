// Package storetest gives tests a fresh, empty database on every backend the store supports:
// a SQLite file in a temporary folder, and a private PostgreSQL schema when TESSERA_PG_URL
// names a server (ci/setup.d/30-postgres.sh sets it). Without it the PostgreSQL cases skip,
// saying why.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/tessera-qa/tessera-qa/report/store/driver"
)

// EnvPG names the PostgreSQL server URL variable.
const EnvPG = "TESSERA_PG_URL"

// Backend makes fresh databases of one kind.
type Backend struct {
	Name string
	// DSN returns the address of a new empty database, removed when t ends. It skips t when
	// the backend is not available here.
	DSN func(t testing.TB) string
}

// Backends lists SQLite and PostgreSQL.
func Backends() []Backend {
	return []Backend{{"sqlite", SQLite}, {"postgres", Postgres}}
}

// ForEach runs f as a subtest on every backend.
func ForEach(t *testing.T, f func(t *testing.T, dsn string)) {
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) { f(t, b.DSN(t)) })
	}
}

// SQLite returns a path in a fresh temporary folder.
func SQLite(t testing.TB) string {
	return filepath.Join(t.TempDir(), "results.db")
}

// Postgres creates a schema of its own on the server named by TESSERA_PG_URL and returns a URL
// whose search_path selects it; the schema is dropped at the end of t.
func Postgres(t testing.TB) string {
	base := os.Getenv(EnvPG)
	if base == "" {
		t.Skip(EnvPG + " is not set: no PostgreSQL server to test against (ci/setup.d/30-postgres.sh starts one)")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvPG, err)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("postgres: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Fatalf("postgres at %s: create schema: %v", u.Redacted(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
