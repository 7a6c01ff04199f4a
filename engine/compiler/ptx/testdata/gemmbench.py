#!/usr/bin/env python3
"""Check and time the dedicated matmul kernels of a bundle written by TestWriteGemmBundle
(engine/compiler/ptx). Usage: gemmbench.py BUNDLE_DIR [check|bench]...

check: every manifest.json case (ragged shapes, normal and random-bit inputs) is run on the GPU
and compared with the CPU backend's bytes (gpucheck.compare); cases of one group ran on the same
inputs, so the script also reports which kernels gave identical bits.

bench: every bench.json case on random normal inputs (the same per group): output poisoned
first, checked against torch.matmul (relative Frobenius error), then timed with CUDA events,
median of 30 runs with the L2 flushed before each, against torch.matmul in the same process."""
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucheck  # noqa: E402


def launch(cp, root, mods, k, args):
    if k["ptx"] not in mods:
        mods[k["ptx"]] = cp.RawModule(path=os.path.join(root, k["ptx"]))
    fn = mods[k["ptx"]].get_function(k["entry"])
    if k["shared"] > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = k["shared"]
    fn(tuple(k["grid"]), (k["threads"], 1, 1), tuple(args[p] for p in k["params"]), shared_mem=k["shared"])


def check(root):
    import cupy as cp
    import numpy as np
    mods, groups, counts = {}, {}, {}
    for c in json.load(open(os.path.join(root, "manifest.json"))):
        try:
            bufs = [cp.full(max(b["bytes"], 1), 0xFF, dtype=cp.uint8) for b in c["buffers"]]
            data = open(os.path.join(root, c["data"] + ".in"), "rb").read()
            off = 0
            for bi in c["inputs"]:
                n = c["buffers"][bi]["bytes"]
                bufs[bi][:n] = cp.asarray(np.frombuffer(data[off:off + n], np.uint8))
                off += n
            for k in c["kernels"]:
                launch(cp, root, mods, k, bufs)
            cp.cuda.runtime.deviceSynchronize()
            bi = c["outputs"][0]
            got = cp.asnumpy(bufs[bi][:c["buffers"][bi]["bytes"]]).tobytes()
            want = open(os.path.join(root, c["data"] + ".out"), "rb").read()
            status, n, ulp = gpucheck.compare(np, c["buffers"][bi]["dtype"], want, got)
        except Exception as ex:  # noqa: BLE001
            print("FATAL %s %s" % (c["name"], str(ex).replace("\n", " ")[:300]), flush=True)
            counts["FATAL"] = counts.get("FATAL", 0) + 1
            continue
        digest = hashlib.sha1(got).hexdigest()[:10]
        groups.setdefault(c["group"], []).append((c["name"][len(c["group"]) + 1:], digest))
        counts[status] = counts.get(status, 0) + 1
        print("CHECK %-60s %-9s %6d elems max %d ulp  %s" % (c["name"], status, n, ulp, digest), flush=True)
    for g, ds in groups.items():
        same = {}
        for label, d in ds:
            same.setdefault(d, []).append(label)
        print("BITS %s: %s" % (g, " | ".join("=".join(v) for v in same.values())), flush=True)
    print("CHECK SUMMARY " + " ".join("%s=%d" % kv for kv in sorted(counts.items())), flush=True)


def bench(root):
    import cupy as cp
    import torch
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows, digests = [], {}
    for c in json.load(open(os.path.join(root, "bench.json"))):
        torch.manual_seed(int(c["group"]))
        bufs = [torch.zeros(max(b["bytes"], 1), dtype=torch.uint8, device="cuda") for b in c["buffers"]]
        named = {}
        for name, bi, shape in zip("abcdefgh", c["inputs"], c["shapes"]):
            x = torch.randn(*shape, device="cuda").to(torch.bfloat16)
            bufs[bi].copy_(x.contiguous().view(-1).view(torch.uint8))
            named[name] = x
        out = [i for i in range(len(bufs)) if i not in c["inputs"]][0]
        ptrs = [cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(b.data_ptr(), b.numel(), b), 0) for b in bufs]
        args = [cp.ndarray((c["buffers"][i]["bytes"],), cp.uint8, ptrs[i]) for i in range(len(bufs))]
        mods = {}

        def engine():
            for k in c["kernels"]:
                launch(cp, root, mods, k, args)

        def reference():
            return eval(c["torch"], {"torch": torch}, named)

        bufs[out].fill_(0xFF)
        engine()
        torch.cuda.synchronize()
        ref = reference()
        got = bufs[out].view(torch.bfloat16).view(ref.shape)
        err = ((got.float() - ref.float()).norm() / ref.float().norm()).item()
        nan = int(torch.isnan(got).sum().item())
        digests.setdefault(c["group"], []).append((c["name"], hashlib.sha1(got.cpu().view(torch.int16).numpy().tobytes()).hexdigest()[:10]))
        res = []
        # GEMMBENCH_AFTER=1 times the engine once more after torch (does torch's run change
        # the GPU's state, clocks or power, for what follows?).
        order = (engine, reference, engine) if os.environ.get("GEMMBENCH_AFTER") else (engine, reference)
        for f in order:
            for _ in range(3):
                f()
            times = []
            for _ in range(30):
                flush.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                f()
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
            times.sort()
            res.append((times[len(times) // 2], times[0], times[-1]))
        (eng, emin, emax), (tor, tmin, tmax) = res[:2]
        if len(res) > 2:
            print("AFTER %-40s engine before torch %.3f ms, after torch %.3f ms" % (c["name"], eng, res[2][0]), flush=True)
        tf = lambda ms: c["flops"] / ms / 1e9
        row = "BENCH %-40s engine %7.3f ms %6.1f TFLOP/s [%.3f..%.3f]  torch %7.3f ms %6.1f TFLOP/s  ratio %.3f  relerr %.2e nan %d" % (
            c["name"], eng, tf(eng), emin, emax, tor, tf(tor), tor / eng, err, nan)
        print(row, flush=True)
        rows.append(row)
    for g, ds in digests.items():
        same = {}
        for name, d in ds:
            same.setdefault(d, []).append(name)
        print("BITS %s: %s" % (g, " | ".join("=".join(v) for v in same.values())), flush=True)
    print("\n".join(rows))


def main():
    root = sys.argv[1]
    for what in sys.argv[2:] or ["check", "bench"]:
        {"check": check, "bench": bench}[what](root)


if __name__ == "__main__":
    main()
