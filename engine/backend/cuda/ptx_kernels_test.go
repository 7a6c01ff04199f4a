package cuda

import "fmt"

// Hand-written PTX for the GPU tests, independent of engine/compiler/ptx: they check the
// runtime (linking, caching, launching, faults) with kernels whose correctness is obvious.
// All parameters are .u64 global pointers, as the Module launch contract says; sizes are
// baked into the text.

const ptxHeader = `.version 8.0
.target sm_90
.address_size 64
`

// vaddPTX is c[i] = a[i] + b[i] (f32, round to nearest) for i < n, one element per thread.
func vaddPTX(n int) string {
	return ptxHeader + fmt.Sprintf(`
.visible .entry vadd(
	.param .u64 vadd_a,
	.param .u64 vadd_b,
	.param .u64 vadd_c
)
{
	.reg .pred %%p<2>;
	.reg .b32 %%r<5>;
	.reg .f32 %%f<4>;
	.reg .b64 %%rd<11>;

	ld.param.u64 %%rd1, [vadd_a];
	ld.param.u64 %%rd2, [vadd_b];
	ld.param.u64 %%rd3, [vadd_c];
	mov.u32 %%r1, %%ctaid.x;
	mov.u32 %%r2, %%ntid.x;
	mov.u32 %%r3, %%tid.x;
	mad.lo.s32 %%r4, %%r1, %%r2, %%r3;
	setp.ge.s32 %%p1, %%r4, %d;
	@%%p1 bra DONE;
	cvta.to.global.u64 %%rd4, %%rd1;
	cvta.to.global.u64 %%rd5, %%rd2;
	cvta.to.global.u64 %%rd6, %%rd3;
	mul.wide.s32 %%rd7, %%r4, 4;
	add.s64 %%rd8, %%rd4, %%rd7;
	add.s64 %%rd9, %%rd5, %%rd7;
	add.s64 %%rd10, %%rd6, %%rd7;
	ld.global.f32 %%f1, [%%rd8];
	ld.global.f32 %%f2, [%%rd9];
	add.rn.f32 %%f3, %%f1, %%f2;
	st.global.f32 [%%rd10], %%f3;
DONE:
	ret;
}
`, n)
}

// smemPTX uses shared bytes of dynamic shared memory: thread t of T writes t+1 into the top
// T words of the window, waits at a barrier, and stores its right neighbour's word
// ((t+1) mod T)+1 to out[t]. The top words lie beyond 48 KiB, so the launch only works if the
// launcher raised the function's dynamic shared memory limit.
func smemPTX(shared, threads int) string {
	return ptxHeader + fmt.Sprintf(`
.extern .shared .align 16 .b8 dsmem[];

.visible .entry smem_ring(
	.param .u64 smem_ring_out
)
{
	.reg .b32 %%r<12>;
	.reg .b64 %%rd<4>;

	ld.param.u64 %%rd1, [smem_ring_out];
	cvta.to.global.u64 %%rd1, %%rd1;
	mov.u32 %%r1, %%tid.x;
	mov.u32 %%r2, %%ntid.x;
	mov.u32 %%r3, dsmem;
	add.u32 %%r4, %%r3, %d;
	shl.b32 %%r5, %%r1, 2;
	add.u32 %%r6, %%r4, %%r5;
	add.u32 %%r7, %%r1, 1;
	st.shared.u32 [%%r6], %%r7;
	bar.sync 0;
	rem.u32 %%r8, %%r7, %%r2;
	shl.b32 %%r9, %%r8, 2;
	add.u32 %%r10, %%r4, %%r9;
	ld.shared.u32 %%r11, [%%r10];
	mul.wide.u32 %%rd2, %%r1, 4;
	add.s64 %%rd3, %%rd1, %%rd2;
	st.global.u32 [%%rd3], %%r11;
	ret;
}
`, shared-4*threads)
}

// faultPTX stores through its pointer parameter; launched with an unmapped address it faults
// with an illegal address.
const faultPTX = ptxHeader + `
.visible .entry fault_store(
	.param .u64 fault_store_p
)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;

	ld.param.u64 %rd1, [fault_store_p];
	mov.u32 %r1, 7;
	st.global.u32 [%rd1], %r1;
	ret;
}
`

// badPTX does not assemble: the JIT must refuse it with a log.
const badPTX = ptxHeader + `
.visible .entry bad_kernel()
{
	.reg .b32 %r<2>;
	frobnicate.u32 %r1, 3;
	ret;
}
`
