package job

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// preference is the order in which `run` looks for a backend when none is named: the GPU
// when there is one, else the CPU, which runs the same Tile IR.
var preference = []string{"cuda", "cpu"}

// Choice is the backend a job runs on and why that one.
type Choice struct {
	Backend backend.Backend
	// Reason says why it was chosen: "requested", "best available", or which preferred
	// backends were passed over and why ("cuda unavailable: E_NO_DEVICE: ...").
	Reason string
}

// ChooseBackend returns the named backend, or the best available one when name is "". A named
// backend that is not compiled in is E_UNSUPPORTED; one that cannot run here is E_NO_DEVICE
// (exit 3: the user asked for an environment that is missing).
func ChooseBackend(name string) (Choice, error) {
	if name != "" {
		b, err := backend.Get(name)
		if err != nil {
			return Choice{}, err
		}
		if err := b.Available(); err != nil {
			return Choice{}, noDevice(name, err)
		}
		return Choice{Backend: b, Reason: "requested"}, nil
	}
	var passed []string
	for _, n := range preference {
		b, err := backend.Get(n)
		if err != nil {
			passed = append(passed, n+" not compiled in")
			continue
		}
		if err := b.Available(); err != nil {
			passed = append(passed, n+" unavailable: "+err.Error())
			continue
		}
		reason := "best available"
		if len(passed) > 0 {
			reason = strings.Join(passed, "; ")
		}
		return Choice{Backend: b, Reason: reason}, nil
	}
	// Any other registered backend that can run beats giving up.
	for _, b := range backend.All() {
		if b.Available() == nil {
			return Choice{Backend: b, Reason: strings.Join(passed, "; ")}, nil
		}
	}
	return Choice{}, errs.New(errs.NoDevice, "no backend can run here (%s)", strings.Join(passed, "; "))
}

// noDevice makes sure an unavailable backend reads as E_NO_DEVICE whatever code its
// Available returned, since that is what the exit code is chosen by.
func noDevice(name string, err error) error {
	if errs.CodeOf(err) == errs.NoDevice {
		return errs.Wrap(errs.NoDevice, err, "backend %s", name)
	}
	return &errs.Error{Code: errs.NoDevice, Msg: "backend " + name + " unavailable: " + errs.Message(err), Err: err}
}
