package store

import (
	"strconv"
	"strings"
)

// dialect is what differs between SQLite and PostgreSQL; the SQL itself is shared.
type dialect struct {
	name string
	// types substituted into migrations: {{ID}}, {{REAL}}, {{BIGINT}}, {{BLOB}}
	types map[string]string
	// dollar: placeholders are $1, $2 ... instead of ?
	dollar bool
	// maxParams bounds one statement's bind parameters.
	maxParams int
}

var (
	sqliteDialect = &dialect{
		name: "sqlite",
		types: map[string]string{
			"{{ID}}":     "INTEGER PRIMARY KEY AUTOINCREMENT",
			"{{REAL}}":   "REAL",
			"{{BIGINT}}": "INTEGER",
			"{{BLOB}}":   "BLOB",
		},
		maxParams: 30000,
	}
	postgresDialect = &dialect{
		name: "postgres",
		types: map[string]string{
			"{{ID}}":     "BIGSERIAL PRIMARY KEY",
			"{{REAL}}":   "DOUBLE PRECISION",
			"{{BIGINT}}": "BIGINT",
			"{{BLOB}}":   "BYTEA",
		},
		dollar:    true,
		maxParams: 60000,
	}
)

// ddl fills a migration's type tokens.
func (d *dialect) ddl(s string) string {
	for k, v := range d.types {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// bind rewrites ? placeholders for PostgreSQL. The shared SQL never has ? inside literals.
func (d *dialect) bind(q string) string {
	if !d.dollar || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + len(q)/4)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}
