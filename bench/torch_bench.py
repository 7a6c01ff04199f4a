"""PyTorch side of `tessera-qa bench --vs torch` (bench, docs/cli.md).

One long-lived process speaking JSON lines: a hello line first, then one result line per
request line. A request names an op, input files (raw little-endian element bytes; 16-bit
floats as their bit patterns) and an output file. The process computes the op once on the GPU,
writes the output, then times it like the engine side is timed: warm-up calls, then `reps`
calls each preceded by writing `flush_bytes` bytes (twice the L2, so every rep reads its
inputs from HBM) and bracketed by CUDA events; it answers with the per-rep milliseconds.
torch runs with its default settings (cuBLAS and SDPA pick their fastest kernels): this is
the speed a user gets from torch, not a bit-exact reference.
"""

import json
import os
import sys

PROTOCOL = 1


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means no oracle
        say({"type": "hello", "protocol": PROTOCOL, "error": "cannot import torch: %s" % e})
        return
    if not torch.cuda.is_available():
        say({"type": "hello", "protocol": PROTOCOL, "torch": torch.__version__,
             "error": "torch %s sees no CUDA device" % torch.__version__})
        return
    say({"type": "hello", "protocol": PROTOCOL, "torch": torch.__version__,
         "device": torch.cuda.get_device_name(0), "python": sys.version.split()[0]})
    storage = {"f64": np.float64, "f32": np.float32, "f16": np.int16, "bf16": np.int16, "fp8e4m3": np.uint8}
    tdtype = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    fp8 = {"fp8e4m3": getattr(torch, "float8_e4m3fn", None)}

    def load(t):
        raw = np.fromfile(t["file"], dtype=storage[t["dtype"]])
        x = torch.from_numpy(raw)
        if t["dtype"] in ("f16", "bf16"):
            x = x.view(tdtype[t["dtype"]])
        if t["dtype"] in fp8:
            if fp8[t["dtype"]] is None:
                raise ValueError("torch %s has no float8 dtype" % torch.__version__)
            x = x.view(fp8[t["dtype"]])
        return x.reshape(t["shape"]).to("cuda")

    def build(op, x, attrs):
        if op == "copy":
            # The engine's copy is a reshape to one dim; torch's reshape is a view, so the
            # clone after it is the device-to-device copy.
            return lambda: x[0].reshape(-1).clone()
        if op == "matmul":
            return lambda: torch.matmul(x[0], x[1])
        if op == "batch_matmul":
            return lambda: torch.bmm(x[0], x[1])
        if op == "fp8gemm":
            # b is [N,K] row-major: b.t() is the column-major [K,N] operand _scaled_mm wants.
            # use_fast_accum=False: f32 accumulation, as the engine's kernel promises; True only
            # when the engine measures its fast-accumulation tiling (TESSERA_PTX_FP8_SETS=0).
            a, b, sa, sb = x[0], x[1].t(), x[2].reshape(()), x[3].reshape(())
            fast = os.environ.get("TESSERA_PTX_FP8_SETS") == "0"

            def fp8gemm():
                out = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
                return out[0] if isinstance(out, tuple) else out  # torch 2.1-2.4: (out, amax)
            return fp8gemm
        if op in ("attention", "attention_causal"):
            causal = op == "attention_causal"
            return lambda: F.scaled_dot_product_attention(x[0], x[1], x[2], is_causal=causal)
        if op == "softmax":
            return lambda: torch.softmax(x[0], dim=-1)
        if op == "log_softmax":
            return lambda: torch.log_softmax(x[0], dim=-1)
        if op == "layernorm":
            n = x[0].shape[-1]
            return lambda: F.layer_norm(x[0], (n,), x[1], x[2], eps=attrs.get("eps", 1e-5))
        if op == "rmsnorm":
            n = x[0].shape[-1]
            return lambda: F.rms_norm(x[0], (n,), x[1], eps=attrs.get("eps", 1e-6))
        if op == "elementwise":
            return lambda: F.gelu(x[0] * x[1] + x[2], approximate="tanh")
        if op == "reduce_sum":
            return lambda: x[0].sum(dim=-1)
        if op == "reduce_max":
            return lambda: x[0].amax(dim=-1)
        if op == "reduce_sum_cols":
            return lambda: x[0].sum(dim=0)
        if op == "reduce_max_cols":
            return lambda: x[0].amax(dim=0)
        if op == "cast":
            to = torch.float32 if x[0].dtype == torch.bfloat16 else torch.bfloat16
            return lambda: x[0].to(to)
        if op == "transpose":
            # A view in torch; contiguous() is the copy the engine's transpose kernel does.
            return lambda: x[0].t().contiguous()
        if op == "fft_c2c":
            # The engine's complex tensors are torch.view_as_real's layout: both views are free.
            return lambda: torch.view_as_real(torch.fft.fft(torch.view_as_complex(x[0])))
        if op == "fft_r2c":
            return lambda: torch.view_as_real(torch.fft.rfft(x[0]))
        if op == "conv2d":
            # cuDNN may run an f32 conv in TF32 by default; the engine's f32 conv is f32 through
            # and is judged by f32 tolerances, so torch's is too (bf16 convs are unaffected).
            torch.backends.cudnn.allow_tf32 = False
            k = x[1].shape[-1]
            return lambda: F.conv2d(x[0], x[1], padding=k // 2)
        if op.startswith("train_step/"):
            return train_step(op[len("train_step/"):], x, attrs)
        raise ValueError("unknown op %r" % op)

    def train_step(model, x, attrs):
        # The reference workload's step (training): forward, backward, AdamW, as a torch
        # user writes it; the parameters come in the model's order, then x and target.
        n = len(x) - 2
        p = [t.clone().requires_grad_(True) for t in x[:n]]
        X, T = x[n], x[n + 1]
        opt = torch.optim.AdamW(p, lr=attrs["lr"], fused=True)
        if model == "mlp":
            def forward():
                w1, b1, w2, b2 = p
                return F.mse_loss(F.gelu(X @ w1 + b1) @ w2 + b2, T)
        elif model == "transformer-block":
            B, S, W, H = attrs["batch"], attrs["seq"], attrs["width"], attrs["heads"]

            def heads(t):
                return t.view(B, S, H, W // H).transpose(1, 2)

            def forward():
                g1, be1, wq, wk, wv, wo, g2, be2, w1, b1, w2, b2 = p
                h = F.layer_norm(X, (W,), g1, be1)
                a = F.scaled_dot_product_attention(heads(h @ wq), heads(h @ wk), heads(h @ wv), is_causal=True)
                r1 = X + a.transpose(1, 2).reshape(B * S, W) @ wo
                f = F.gelu(F.layer_norm(r1, (W,), g2, be2) @ w1 + b1) @ w2 + b2
                return F.mse_loss(r1 + f, T)
        else:
            raise ValueError("unknown model %r" % model)

        def step():
            loss = forward()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()
        return step

    def run(req):
        x = [load(t) for t in req["inputs"]]
        fn = build(req["op"], x, req.get("attrs") or {})
        out = fn()
        torch.cuda.synchronize()
        name = {v: k for k, v in tdtype.items()}[out.dtype]
        shape = list(out.shape)
        host = out.contiguous().cpu()
        if name in ("f16", "bf16"):
            host = host.view(torch.int16)
        host.numpy().tofile(req["output"])
        del out, host
        flush = torch.empty(max(int(req["flush_bytes"]), 1), dtype=torch.uint8, device="cuda")
        for _ in range(int(req["warmup"])):
            fn()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        times = []
        for i in range(int(req["reps"])):
            flush.fill_(i & 255)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        del flush, x
        torch.cuda.empty_cache()
        return {"type": "result", "id": req["id"], "times_ms": times, "dtype": name, "shape": shape}

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        if req.get("type") == "quit":
            break
        try:
            say(run(req))
        except Exception as e:  # noqa: BLE001 - reported to the Go side, which goes on
            say({"type": "error", "id": req.get("id"), "error": "%s: %s" % (type(e).__name__, e)})


if __name__ == "__main__":
    main()
