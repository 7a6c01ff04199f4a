"""Runs torch.optim step by step for package optimizers (CheckTorch).

Usage: torch_optim.py CASES.json

CASES.json is a list of cases: {"opt": "sgd"|"adamw", "in": NPZ, "out": NPZ, "params": [names],
"steps": n, "hyper": {...}, "lrs": [lr per step]}. The input archive holds "<param>__p0" (the
initial value) and "<param>__g<k>" (the grad of step k, 1-based); the output archive gets, after
each step k, "<param>__p<k>" and "<param>__<buffer><k>" for every tensor in optimizer.state
except the step count. Single-tensor implementations (foreach=False) only.
"""
import json
import sys

import numpy as np
import torch


def make(opt, params, h):
    if opt == "sgd":
        return torch.optim.SGD(params, lr=h["lr"], momentum=h["momentum"], dampening=h["dampening"],
                               weight_decay=h["weight_decay"], nesterov=h["nesterov"], foreach=False)
    if opt == "adamw":
        return torch.optim.AdamW(params, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"],
                                 weight_decay=h["weight_decay"], foreach=False)
    raise ValueError("unknown optimizer " + opt)


def run(case):
    arrays = np.load(case["in"])
    names = case["params"]
    params = [torch.nn.Parameter(torch.from_numpy(arrays[n + "__p0"].copy())) for n in names]
    opt = make(case["opt"], params, case["hyper"])
    out = {}
    for k in range(1, case["steps"] + 1):
        for group in opt.param_groups:
            group["lr"] = case["lrs"][k - 1]
        for n, p in zip(names, params):
            p.grad = torch.from_numpy(arrays["%s__g%d" % (n, k)].copy())
        opt.step()
        for n, p in zip(names, params):
            out["%s__p%d" % (n, k)] = p.detach().numpy().copy()
            for key, val in opt.state[p].items():
                if key != "step" and val is not None:  # SGD without momentum stores None
                    out["%s__%s%d" % (n, key, k)] = val.numpy().copy()
    np.savez(case["out"], **out)


def main():
    torch.set_num_threads(1)
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        run(case)
    caps = [l.strip() for l in torch.__config__.show().splitlines() if "CPU capability" in l]
    print("torch", torch.__version__, *caps)


if __name__ == "__main__":
    main()
