package negative

import "github.com/tessera-qa/tessera-qa/engine/errs"

const convGo = "engine/graph/ops_conv.go ConvDims"

// convCases break each rule of conv1d/conv2d (issue 26) once.
var convCases = []Case{
	node("conv1d/input-rank", "conv1d", convGo, errs.Shape, []string{"%x: f32[2,8]", "%w: f32[3,2,3]"}, "%y = conv1d(%x, %w)", "%y", "conv1d", "batched input"),
	node("conv1d/weight-rank", "conv1d", convGo, errs.Shape, []string{"%x: f32[1,2,8]", "%w: f32[3,2]"}, "%y = conv1d(%x, %w)", "%y", "conv1d", "weight"),
	node("conv1d/empty-dim", "conv1d", convGo, errs.Shape, []string{"%x: f32[0,2,8]", "%w: f32[3,2,3]"}, "%y = conv1d(%x, %w)", "%y", "conv1d", ">= 1"),
	node("conv1d/stride-positive", "conv1d", convGo, errs.Input, []string{"%x: f32[1,2,8]", "%w: f32[3,2,3]"}, "%y = conv1d(%x, %w) {stride=[0]}", "%y", "conv1d", "stride"),
	node("conv1d/padding-nonnegative", "conv1d", convGo, errs.Input, []string{"%x: f32[1,2,8]", "%w: f32[3,2,3]"}, "%y = conv1d(%x, %w) {padding=[-1]}", "%y", "conv1d", "padding"),
	node("conv1d/dilation-entries", "conv1d", convGo, errs.Input, []string{"%x: f32[1,2,8]", "%w: f32[3,2,3]"}, "%y = conv1d(%x, %w) {dilation=[1,1]}", "%y", "conv1d", "1 entry"),
	node("conv1d/groups-positive", "conv1d", convGo, errs.Input, []string{"%x: f32[1,2,8]", "%w: f32[3,2,3]"}, "%y = conv1d(%x, %w) {groups=0}", "%y", "conv1d", "groups"),
	node("conv1d/groups-divide", "conv1d", convGo, errs.Shape, []string{"%x: f32[1,3,8]", "%w: f32[4,1,3]"}, "%y = conv1d(%x, %w) {groups=2}", "%y", "conv1d", "divide"),
	node("conv1d/weight-channels", "conv1d", convGo, errs.Shape, []string{"%x: f32[1,4,8]", "%w: f32[4,4,3]"}, "%y = conv1d(%x, %w) {groups=2}", "%y", "conv1d", "input channels"),
	node("conv2d/kernel-larger", "conv2d", convGo, errs.Shape, []string{"%x: f32[1,2,2,2]", "%w: f32[3,2,3,3]"}, "%y = conv2d(%x, %w)", "%y", "conv2d", "dilated kernel"),
	node("conv2d/bias-shape", "conv2d", convGo, errs.Shape, []string{"%x: f32[1,2,5,5]", "%w: f32[3,2,3,3]", "%b: f32[2]"}, "%y = conv2d(%x, %w, %b)", "%y", "conv2d", "bias"),
	node("conv2d/dtype", "conv2d", regGo, errs.DType, []string{"%x: int32[1,2,5,5]", "%w: int32[3,2,3,3]"}, "%y = conv2d(%x, %w)", "%y", "conv2d", "int32"),
}
