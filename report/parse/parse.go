package parse

import (
	"bytes"
	"encoding/json"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// Report is a validated file: the rows to write and what the file says about its run
// (Batch.Run holds the file's own commit, machine, ... and may be partly empty).
type Report struct {
	Kind  string // "results", "ginkgo", "bench", "collectives", "chaos", "stress", "doctor"
	Batch store.Batch
}

// Parse validates a report of any of the six kinds (results, Ginkgo, bench, collectives, chaos,
// stress).
// Nothing it accepts can upset the store: names are bounded and free of control characters,
// text is valid UTF-8 without NUL, numbers are finite and in range. Errors are one line,
// E_PARSE or E_INPUT, naming the file and where.
func Parse(name string, data []byte) (*Report, error) {
	if len(data) > MaxFileBytes {
		return nil, errs.New(errs.Input, "report %s: larger than %d bytes", name, MaxFileBytes)
	}
	kind, err := sniff(name, data)
	if err != nil {
		return nil, err
	}
	var p *Report
	switch kind {
	case "results":
		p, err = parseResults(name, data)
	case "ginkgo":
		p, err = parseGinkgo(name, data)
	case "bench":
		p, err = parseBench(name, data, true)
	case "bench-rows":
		p, err = parseBench(name, data, false)
	case "collectives":
		p, err = parseCollectives(name, data, true)
	case "collectives-rows":
		p, err = parseCollectives(name, data, false)
	case "chaos":
		p, err = parseChaos(name, data)
	case "stress":
		p, err = parseStress(name, data)
	case "doctor":
		p, err = parseDoctor(name, data)
	}
	if err != nil {
		return nil, err
	}
	if p.Batch.Rows() == 0 {
		return nil, errs.New(errs.Input, "report %s: no results, specs or bench rows in it", name)
	}
	return p, nil
}

// sniff tells the formats apart by their top-level shape and first element's fields.
func sniff(name string, data []byte) (string, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return "", errs.New(errs.Parse, "report %s: empty file", name)
	}
	var first map[string]json.RawMessage
	switch trimmed[0] {
	case '{':
		if err := json.Unmarshal(trimmed, &first); err != nil {
			return "", parseErr(name, trimmed, err)
		}
		if string(bytes.TrimSpace(first["kind"])) == `"`+CollectivesKind+`"` {
			return "collectives", nil
		}
		if string(bytes.TrimSpace(first["format"])) == `"`+DoctorFormat+`"` {
			return "doctor", nil
		}
		if string(bytes.TrimSpace(first["kind"])) == `"`+ChaosKind+`"` {
			return "chaos", nil
		}
		if string(bytes.TrimSpace(first["kind"])) == `"`+StressKind+`"` || has(first, stressShape...) {
			return "stress", nil
		}
		if _, ok := first["rows"]; ok {
			return "bench", nil
		}
		return "", errs.New(errs.Parse, "report %s: a JSON object that is not a bench report (no \"rows\")", name)
	case '[':
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.Token() // '['
		if !dec.More() {
			return "", errs.New(errs.Input, "report %s: empty array: nothing to ingest", name)
		}
		if err := dec.Decode(&first); err != nil {
			return "", parseErr(name, trimmed, err)
		}
		switch {
		case has(first, "verdict"):
			return "results", nil
		case has(first, "SpecReports") || has(first, "SuitePath"):
			return "ginkgo", nil
		case has(first, "op", "engine_ms"):
			return "bench-rows", nil
		case has(first, "op", "transport", "busbw_gbs", "wrong"):
			return "collectives-rows", nil
		}
		return "", errs.New(errs.Parse, "report %s: not a results, Ginkgo or bench report (first element has none of their fields)", name)
	}
	return "", errs.New(errs.Parse, "report %s: not JSON (starts with %q)", name, clip(string(trimmed[:min(len(trimmed), 16)])))
}

func has(m map[string]json.RawMessage, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}
