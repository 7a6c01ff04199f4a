// Package driver registers the database/sql drivers the store opens: "sqlite"
// (modernc.org/sqlite, pure Go) and "pgx" (PostgreSQL). It is separate from package store so
// that code needing only the store's types (the parser, its fuzz test) does not link a SQL
// engine: SQLite's translated C, coverage-instrumented for fuzzing, slows every execution.
package driver

import (
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)
