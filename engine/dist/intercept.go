package dist

import "context"

// Hook sees every frame a rank sends, before the transport does, and returns what to send in
// its place: the frame itself, nothing (a drop), several (a duplicate) or a changed copy (a
// corruption). It may sleep (a delay). A hook must not modify f.Payload in place, because
// the payload is the caller's buffer: copy it first.
type Hook func(ctx context.Context, to int, f *Frame) []*Frame

// Intercept returns t with h applied to every outgoing frame. Faults injected this way act on
// the real frames of a real transport; the receiving communicator's checks are what must
// catch them.
func Intercept(t Transport, h Hook) Transport { return &intercepted{Transport: t, h: h} }

type intercepted struct {
	Transport
	h Hook
}

func (t *intercepted) Send(ctx context.Context, to int, f *Frame) error {
	for _, g := range t.h(ctx, to, f) {
		if err := t.Transport.Send(ctx, to, g); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (t *intercepted) Unwrap() Transport { return t.Transport }
