package ptx

// knownOps is every opcode the generator may emit. The emitter refuses anything else, and the
// well-formedness test checks the text against the same table, so a new instruction form has
// to be added here deliberately (and then validated with ptxas on the GPU machine).
var knownOps = setOf(
	// f64 arithmetic: .rn everywhere, so ptxas never contracts a mul and an add into an FMA
	"add.rn.f64", "sub.rn.f64", "mul.rn.f64", "div.rn.f64", "fma.rn.f64", "sqrt.rn.f64",
	"neg.f64", "abs.f64", "cvt.rni.f64.f64", "mov.f64", "selp.f64",
	"setp.lt.f64", "setp.le.f64", "setp.gt.f64", "setp.ge.f64", "setp.eq.f64", "setp.nan.f64", "setp.neu.f64",
	// f32 arithmetic
	"add.rn.f32", "sub.rn.f32", "mul.rn.f32", "div.rn.f32", "mov.f32", "selp.f32",
	"setp.nan.f32", "setp.neu.f32", "neg.f32",
	// conversions
	"cvt.rzi.s64.f64", "cvt.rzi.s32.f64", "cvt.rn.f64.s64", "cvt.rn.f64.s32", "cvt.f64.f32", "cvt.rn.f32.f64",
	"cvt.rn.f32.s32", "cvt.f32.f16", "cvt.rn.f16.f32", "cvt.rn.bf16.f32",
	"cvt.u32.u64", "cvt.u64.u32", "cvt.u64.u16", "cvt.u32.u16", "cvt.s32.s16", "cvt.u16.u32", "cvt.u16.u64", "cvt.s64.s32",
	// 64-bit integers
	"mov.b64", "mov.u64", "neg.s64", "add.s64", "sub.s64", "mul.lo.s64", "div.s64", "mad.lo.s64", "and.b64", "or.b64",
	"shl.b64", "shr.u64", "shr.s64", "min.s64", "max.s64", "selp.b64",
	"setp.lt.s64", "setp.lt.u64", "setp.eq.s64", "setp.ne.s64",
	"mul.wide.s32", "mad.wide.s32",
	// 32-bit integers
	"mov.b32", "mov.u32", "add.s32", "sub.s32", "mul.lo.s32", "mad.lo.s32", "div.u32", "rem.u32", "div.s32", "rem.s32",
	"min.s32", "max.s32", "shl.b32", "shr.u32", "and.b32", "bfe.u32", "selp.b32", "mov.b16", "selp.b16",
	"setp.lt.s32", "setp.ge.s32", "setp.gt.s32", "setp.lt.u32", "setp.ge.u32", "setp.ne.u32",
	// predicates
	"and.pred", "or.pred", "not.pred",
	// memory
	"ld.param.u64", "cvta.to.global.u64",
	"ld.global.f64", "ld.global.f32", "ld.global.b16", "ld.global.u8", "ld.global.s8", "ld.global.s32",
	"st.global.f64", "st.global.f32", "st.global.b32", "st.global.b16", "st.global.u8", "st.global.s32",
	"ld.shared.f32", "ld.shared.f64", "st.shared.f32", "st.shared.f64", "ld.shared.b16", "st.shared.b16", "ld.const.f64",
	// tensor cores (sm_80+)
	"ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
	"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
	// dedicated matmul kernels (gemm_*.go): cp.async (sm_80+), wgmma (sm_90a)
	"cp.async.cg.shared.global", "cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all",
	"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32",
	"xor.b32", "or.b32", "fence.proxy.async.shared::cta",
	"wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned",
	"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
	"wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16",
	// the fp8 kernel (scaled_matmul): e4m3 wgmma, an always-false scale-d, f32 pair stores
	"wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3",
	"setp.eq.u32", "st.global.v2.f32",
	// control
	"bra", "bar.sync", "ret", "call",
)

func setOf(ss ...string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}
