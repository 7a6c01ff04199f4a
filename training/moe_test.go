package training

import (
	"context"
	"testing"
)

func TestMoEGradientsDoNotChangeWithTheMesh(t *testing.T) {
	ctx := context.Background()
	one := pipeCfg(t, MoEModel, "", "", 0)
	ref, err := FirstStep(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mesh     string
		unpadded bool
	}{{"dp=2,ep=4", false}, {"dp=2,ep=4", true}, {"ep=2", false}, {"ep=4", true}, {"dp=8", false}, {"dp=4,ep=2", true}} {
		cfg := pipeCfg(t, MoEModel, c.mesh, "", 0)
		cfg.MoEUnpadded = c.unpadded
		got, err := FirstStep(ctx, cfg)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		d, err := CompareGrads(ref.Grads[0], got.Grads, 1e-5, 4e-5)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v: loss %v vs %v (bits %v); max |diff| %g at %s, bitwise %v, norm %v", c, got.Loss.Float64(0), ref.Loss.Float64(0), string(got.Loss.Data) == string(ref.Loss.Data), d.MaxAbs, d.Worst, d.Bitwise, GradNorm(ref))
		if d.Violates != "" {
			t.Errorf("%+v: %s", c, d.Violates)
		}
	}
}
