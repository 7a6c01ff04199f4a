#!/usr/bin/env python3
"""Run a PTX bundle written by TestWriteGPUBundle (engine/compiler/ptx) on a GPU with CuPy and
compare every output with the CPU backend's bytes. Usage: gpucheck.py BUNDLE_DIR [FILTER].

Prints one line per case that is not bit-identical and a summary. A CUDA error (an illegal
address, say) poisons the context, so each batch of cases runs in a child process and the
parent restarts after the failing case."""
import json
import os
import subprocess
import sys

FORMATS = {  # dtype: (bits, exponent bits, mantissa bits, has Inf)
    "f64": (64, 11, 52, True), "f32": (32, 8, 23, True), "f16": (16, 5, 10, True),
    "bf16": (16, 8, 7, True), "fp8e4m3": (8, 4, 3, False), "fp8e5m2": (8, 5, 2, True),
}
SIZES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "fp8e4m3": 1, "fp8e5m2": 1, "int8": 1, "int32": 4, "bool": 1}


def compare(np, dtype, want, got):
    """Returns (status, mismatching elements, max ulp)."""
    if want == got:
        return "bitwise", 0, 0
    size = SIZES[dtype]
    ut = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
    w = np.frombuffer(want, ut).astype(np.uint64)
    g = np.frombuffer(got, ut).astype(np.uint64)
    diff = w != g
    if dtype not in FORMATS:
        return "MISMATCH", int(diff.sum()), -1
    bits, e, m, has_inf = FORMATS[dtype]
    sign = np.uint64(1 << (bits - 1))
    mag = np.uint64((1 << (bits - 1)) - 1)
    wm, gm = w & mag, g & mag
    if has_inf:
        inf = np.uint64(((1 << e) - 1) << m)
        wn, gn = wm > inf, gm > inf
    else:
        wn, gn = wm == mag, gm == mag
    real = diff & ~(wn & gn)
    if not real.any():
        return "nan-payload", int(diff.sum()), 0
    kw = np.where((w & sign) != 0, -wm.astype(np.int64), wm.astype(np.int64))
    kg = np.where((g & sign) != 0, -gm.astype(np.int64), gm.astype(np.int64))
    ulp = np.abs(kw - kg)
    ulp = np.where(wn != gn, np.int64(1 << 62), ulp)
    return ("ulp" if ulp[real].max() <= 2 else "MISMATCH"), int(real.sum()), int(ulp[real].max())


def child(root, cases, start):
    import cupy as cp
    import numpy as np
    mods = {}
    for i in range(start, len(cases)):
        c = cases[i]
        try:
            bufs = [cp.zeros(max(b["bytes"], 1), dtype=cp.uint8) for b in c["buffers"]]
            data = open(os.path.join(root, c["data"] + ".in"), "rb").read()
            off = 0
            for bi in c["inputs"]:
                n = c["buffers"][bi]["bytes"]
                bufs[bi][:n] = cp.asarray(np.frombuffer(data[off:off + n], np.uint8))
                off += n
            for k in c["kernels"]:
                if k["ptx"] not in mods:
                    mods[k["ptx"]] = cp.RawModule(path=os.path.join(root, k["ptx"]))
                fn = mods[k["ptx"]].get_function(k["entry"])
                if k["shared"] > 48 * 1024:
                    fn.max_dynamic_shared_size_bytes = k["shared"]
                fn(tuple(k["grid"]), (k["threads"], 1, 1), tuple(bufs[p] for p in k["params"]), shared_mem=k["shared"])
            cp.cuda.runtime.deviceSynchronize()
            want = open(os.path.join(root, c["data"] + ".out"), "rb").read()
            off = 0
            worst = ("bitwise", 0, 0)
            for bi in c["outputs"]:
                n = c["buffers"][bi]["bytes"]
                got = cp.asnumpy(bufs[bi][:n]).tobytes()
                r = compare(np, c["buffers"][bi]["dtype"], want[off:off + n], got)
                off += n
                rank = ["bitwise", "nan-payload", "ulp", "MISMATCH"]
                if rank.index(r[0]) > rank.index(worst[0]):
                    worst = r
            print("CASE %d %s %s %d %d" % (i, worst[0], c["name"], worst[1], worst[2]), flush=True)
        except Exception as ex:  # noqa: BLE001 - report and let the parent restart
            print("FATAL %d %s %s" % (i, c["name"], str(ex).replace("\n", " ")[:300]), flush=True)
            sys.exit(3)


def bench(root):
    """Times each bench.json case: the engine's kernels and the same op in PyTorch, on random
    normal inputs, median of CUDA-event timings after a warm-up."""
    import cupy as cp
    import torch
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    for c in json.load(open(os.path.join(root, "bench.json"))):
        bufs = [torch.zeros(max(b["bytes"], 1), dtype=torch.uint8, device="cuda") for b in c["buffers"]]
        named = {}
        for name, bi, shape in zip("abcdefgh", c["inputs"], c["shapes"]):
            x = torch.randn(*shape, device="cuda").to(tdt[c["buffers"][bi]["dtype"]])
            bufs[bi].copy_(x.contiguous().view(-1).view(torch.uint8))
            named[name] = x
        fns = []
        for k in c["kernels"]:
            fn = cp.RawModule(path=os.path.join(root, k["ptx"])).get_function(k["entry"])
            if k["shared"] > 48 * 1024:
                fn.max_dynamic_shared_size_bytes = k["shared"]
            fns.append((fn, k))
        ptrs = [cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(b.data_ptr(), b.numel(), b), 0) for b in bufs]
        args = [cp.ndarray((c["buffers"][i]["bytes"],), cp.uint8, ptrs[i]) for i in range(len(bufs))]

        def engine():
            for fn, k in fns:
                fn(tuple(k["grid"]), (k["threads"], 1, 1), tuple(args[p] for p in k["params"]), shared_mem=k["shared"])

        def reference():
            eval(c["torch"], {"torch": torch}, named)

        res = []
        for f in (engine, reference):
            f()
            torch.cuda.synchronize()
            times = []
            for _ in range(5):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                f()
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
            res.append(sorted(times)[len(times) // 2])
        eng, ref = res
        rate = lambda ms: ("%.1f TFLOP/s" % (c["flops"] / ms / 1e9)) if c["flops"] else ("%.0f GB/s" % (c["bytes"] / ms / 1e6))
        print("BENCH %s engine %.3f ms (%s) torch %.3f ms (%s) ratio %.3f" % (c["name"], eng, rate(eng), ref, rate(ref), ref / eng), flush=True)


def main():
    root = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "--bench":
        bench(root)
        return
    filt = sys.argv[2] if len(sys.argv) > 2 else ""
    cases = [c for c in json.load(open(os.path.join(root, "manifest.json"))) if filt in c["name"]]
    if os.environ.get("GPUCHECK_CHILD"):
        child(root, cases, int(os.environ["GPUCHECK_CHILD"]))
        return
    counts = {}
    start = 0
    while start < len(cases):
        env = dict(os.environ, GPUCHECK_CHILD=str(start))
        p = subprocess.run([sys.executable] + sys.argv, env=env, capture_output=True, text=True)
        last = start - 1
        for line in p.stdout.splitlines():
            f = line.split(" ")
            if f[0] in ("CASE", "FATAL"):
                last = int(f[1])
                status = f[2] if f[0] == "CASE" else "FATAL"
                counts[status] = counts.get(status, 0) + 1
                if status != "bitwise":
                    print(line, flush=True)
        if p.returncode not in (0, 3):
            print("child exited %d: %s" % (p.returncode, p.stderr[-2000:]), flush=True)
            last = max(last, start)
        start = last + 1
    print("SUMMARY %d cases: %s" % (len(cases), " ".join("%s=%d" % kv for kv in sorted(counts.items()))))


if __name__ == "__main__":
    main()
