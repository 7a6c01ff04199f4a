package cli

import (
	"github.com/tessera-qa/tessera-qa/doctor"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func doctorAbsent(r doctor.Report) error {
	return errs.New(errs.NoDevice, "doctor level %d: asked for %s", r.Level, r.Absent)
}
