//go:build !purego

// Vector adds of the reduction (add_amd64.go): dst[i] = a[i] + b[i], one IEEE add per element
// with a as the first operand (as Go's scalar a + b compiles), so the bits are the scalar
// loop's; the result says whether any sum was NaN, for the caller's canonical-NaN rule.
// SSE2 only, which every amd64 has: no feature check.

#include "textflag.h"

// func addF32(dst, a, b *float32, n int) (nan bool); n is a multiple of 16.
TEXT ·addF32(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	XORPS X7, X7
	SHRQ $4, CX
	JZ   done32

loop32:
	MOVUPS (SI), X0
	MOVUPS 16(SI), X1
	MOVUPS 32(SI), X2
	MOVUPS 48(SI), X3
	MOVUPS (DX), X4
	MOVUPS 16(DX), X5
	MOVUPS 32(DX), X6
	MOVUPS 48(DX), X8
	ADDPS  X4, X0
	ADDPS  X5, X1
	ADDPS  X6, X2
	ADDPS  X8, X3
	MOVUPS X0, (DI)
	MOVUPS X1, 16(DI)
	MOVUPS X2, 32(DI)
	MOVUPS X3, 48(DI)
	CMPPS  X0, X0, $3
	CMPPS  X1, X1, $3
	CMPPS  X2, X2, $3
	CMPPS  X3, X3, $3
	ORPS   X0, X7
	ORPS   X1, X7
	ORPS   X2, X7
	ORPS   X3, X7
	ADDQ   $64, SI
	ADDQ   $64, DX
	ADDQ   $64, DI
	DECQ   CX
	JNZ    loop32

done32:
	MOVMSKPS X7, AX
	TESTL    AX, AX
	SETNE    nan+32(FP)
	RET

// func addF64(dst, a, b *float64, n int) (nan bool); n is a multiple of 8.
TEXT ·addF64(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	XORPD X7, X7
	SHRQ $3, CX
	JZ   done64

loop64:
	MOVUPD (SI), X0
	MOVUPD 16(SI), X1
	MOVUPD 32(SI), X2
	MOVUPD 48(SI), X3
	MOVUPD (DX), X4
	MOVUPD 16(DX), X5
	MOVUPD 32(DX), X6
	MOVUPD 48(DX), X8
	ADDPD  X4, X0
	ADDPD  X5, X1
	ADDPD  X6, X2
	ADDPD  X8, X3
	MOVUPD X0, (DI)
	MOVUPD X1, 16(DI)
	MOVUPD X2, 32(DI)
	MOVUPD X3, 48(DI)
	CMPPD  X0, X0, $3
	CMPPD  X1, X1, $3
	CMPPD  X2, X2, $3
	CMPPD  X3, X3, $3
	ORPD   X0, X7
	ORPD   X1, X7
	ORPD   X2, X7
	ORPD   X3, X7
	ADDQ   $64, SI
	ADDQ   $64, DX
	ADDQ   $64, DI
	DECQ   CX
	JNZ    loop64

done64:
	MOVMSKPD X7, AX
	TESTL    AX, AX
	SETNE    nan+32(FP)
	RET
