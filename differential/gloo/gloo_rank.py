"""One rank of a torch.distributed gloo group started by Tessera's differential/gloo package.

Usage: python gloo_rank.py hello            -> prints one hello line and exits
       python gloo_rank.py DIR RANK         -> runs the job in DIR/job.json as rank RANK

Everything Go needs travels through files in DIR (job.json, in<RANK>.npy, out<RANK>.npy) and
one JSON object per line on stdout, in this order:
  hello   {"type":"hello","torch":...} or {"type":"hello","error":...} (then exit 0)
  rdzv    about to join the group (FileStore DIR/store: no port is ever fixed)
  ready   the group is initialised
  enter   {"step":k} about to run step k (the collective, or bench size k)
  step    {"step":k, ...} step k finished (bench: "times", one per timed repetition)
  done    outputs written, group destroyed
or, instead of the rest, one of
  refused {"step":k,"msg":...}    (batch jobs) gloo refused item k before communicating; then
                                  "step" k, and the next item
  unsupported {"msg":...}           gloo refused the op/dtype before communicating
  error       {"where":...,"msg":...} where is "init", "comm" or "io"
Go kills the whole process group when a rank hangs or dies; the script never waits on its own.

16-bit floats travel as '<u2' bit patterns in .npy files (NumPy has no bfloat16): f16 is
viewed as numpy float16, bf16 through torch's int16 view. Data-only ops (all_gather, broadcast,
all_to_all) move bf16 as bytes (uint8), since gloo in torch 1.13 refuses bfloat16 and int16
("Invalid scalar type").

Test-only switches (environment): TESSERA_GLOO_TEST_HANG_RANK=R hangs rank R before step 0,
=R:init before the rendezvous; TESSERA_GLOO_TEST_EXIT_RANK=R makes rank R exit with status 3
before step 0.
"""

import json
import os
import sys
import time

# The protocol owns the real stdout; whatever a library prints goes to stderr.
OUT = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr

# Refusals that gloo raises on every rank before any byte moves: an unsupported op or dtype.
UNSUPPORTED = ("does not support", "no support", "not supported", "Invalid scalar type",
               "Cannot use ReduceOp", "Unsupported")

DATA_OPS = ("all_gather", "broadcast", "all_to_all")


def send(msg):
    OUT.write(json.dumps(msg, separators=(",", ":"), allow_nan=False))
    OUT.write("\n")
    OUT.flush()


def one_line(e):
    return "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:400])


class Refused(Exception):
    pass


def hello():
    pyver = sys.version.split()[0]
    try:
        import numpy
        import torch
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise RuntimeError("torch %s was built without the gloo backend" % torch.__version__)
    except Exception as e:
        send({"type": "hello", "python": pyver, "error": one_line(e)})
        return False
    send({"type": "hello", "python": pyver, "torch": torch.__version__, "numpy": numpy.__version__})
    return True


def test_switch(name, rank):
    v = os.environ.get(name, "")
    if not v:
        return None
    r, _, where = v.partition(":")
    if r.strip() != str(rank):
        return None
    return where or "step"


def hang():
    while True:
        time.sleep(3600)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "hello":
        hello()
        return 0
    if len(sys.argv) != 3:
        sys.stderr.write("usage: gloo_rank.py hello | DIR RANK\n")
        return 2
    if not hello():
        return 0
    import datetime
    import numpy as np
    import torch
    import torch.distributed as dist

    workdir, rank = sys.argv[1], int(sys.argv[2])
    with open(os.path.join(workdir, "job.json")) as f:
        job = json.load(f)
    world = job["world"]

    if test_switch("TESSERA_GLOO_TEST_HANG_RANK", rank) == "init":
        sys.stderr.write("test switch: rank %d hangs before the rendezvous\n" % rank)
        hang()
    send({"type": "rdzv"})
    try:
        store = dist.FileStore(os.path.join(workdir, "store"), world)
        # Go's deadline is the one that counts; torch's own is a backstop behind it.
        timeout = datetime.timedelta(seconds=job["timeout_s"] + 30)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    except Exception as e:
        send({"type": "error", "where": "init", "msg": one_line(e)})
        return 1
    send({"type": "ready"})

    sw = test_switch("TESSERA_GLOO_TEST_HANG_RANK", rank)
    if sw == "step":
        sys.stderr.write("test switch: rank %d hangs before step 0\n" % rank)
        hang()
    if test_switch("TESSERA_GLOO_TEST_EXIT_RANK", rank):
        sys.stderr.write("test switch: rank %d exits before step 0\n" % rank)
        sys.stderr.flush()
        os._exit(3)

    try:
        if job["mode"] == "batch":
            batch(job, rank, world, np, torch, dist, workdir)
        elif job["mode"] == "collective":
            collective(Ctx(job, rank, world, np, torch, dist), workdir)
        else:
            bench(Ctx(job, rank, world, np, torch, dist))
    except Refused as e:
        send({"type": "unsupported", "msg": str(e)})
        return 0
    except Failed as e:
        send({"type": "error", "where": e.where, "msg": e.msg})
        return 1
    dist.destroy_process_group()
    send({"type": "done"})
    return 0


class Failed(Exception):
    def __init__(self, where, msg):
        Exception.__init__(self, msg)
        self.where, self.msg = where, msg


class Ctx:
    def __init__(self, job, rank, world, np, torch, dist):
        self.job, self.rank, self.world = job, rank, world
        self.np, self.torch, self.dist = np, torch, dist
        self.dtype = job["dtype"]
        self.tdtype = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16,
                       "bf16": torch.bfloat16, "int32": torch.int32, "int8": torch.int8}[self.dtype]
        self.red = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                    "min": dist.ReduceOp.MIN}.get(job.get("red", ""))

    def wire(self, t):
        """What gloo moves: bf16 travels as its bytes (flattened) for the data-only ops, since
        gloo in torch 1.13 has neither bfloat16 nor int16. Flattening keeps every op's meaning:
        dim 0 blocks of a row-major tensor are contiguous runs of its bytes."""
        if self.bytewise():
            return t.reshape(-1).view(self.torch.uint8)
        return t

    def unwire(self, t, shape):
        if self.bytewise():
            return t.view(self.torch.bfloat16).reshape(shape)
        return t

    def bytewise(self):
        return self.dtype == "bf16" and self.job["op"] in DATA_OPS

    def run(self, t):
        """Runs the job's op on the wire tensor t and returns this rank's output (wire dtype).
        A refusal raised before any communication becomes Refused; anything else is Failed."""
        torch, dist, op, world = self.torch, self.dist, self.job["op"], self.world
        try:
            if op == "all_reduce":
                dist.all_reduce(t, op=self.red)
                return t
            if op == "broadcast":
                dist.broadcast(t, src=self.job["root"])
                return t
            if op == "all_gather":
                parts = [torch.empty_like(t) for _ in range(world)]
                dist.all_gather(parts, t)
                return torch.cat(parts) if t.dim() > 0 else torch.stack(parts)
            if op == "all_to_all":
                out = torch.empty_like(t)
                dist.all_to_all_single(out, t)
                return out
            if op == "reduce_scatter":
                out = torch.empty((t.shape[0] // world,) + tuple(t.shape[1:]), dtype=t.dtype)
                if hasattr(dist, "reduce_scatter_tensor"):
                    dist.reduce_scatter_tensor(out, t, op=self.red)
                else:
                    dist.reduce_scatter(out, list(t.chunk(world)), op=self.red)
                return out
        except Exception as e:
            msg = one_line(e)
            if isinstance(e, (RuntimeError, ValueError)) and any(s in msg for s in UNSUPPORTED):
                raise Refused("gloo (torch %s) refuses %s on %s: %s" % (torch.__version__, op, self.dtype, msg))
            raise Failed("comm", msg)
        raise Failed("io", "unknown op %r" % op)


def to_torch(ctx, arr):
    np, torch = ctx.np, ctx.torch
    if ctx.dtype == "f16":
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.float16).copy())
    if ctx.dtype == "bf16":
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(arr).copy())


def to_numpy(ctx, t):
    np, torch = ctx.np, ctx.torch
    t = t.contiguous()
    if ctx.dtype == "f16":
        return t.numpy().view(np.uint16)
    if ctx.dtype == "bf16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def collective(ctx, workdir, step=0, name=""):
    """Runs the job's collective on DIR/in<name><RANK>.npy into out<name><RANK>.npy as step."""
    try:
        x = to_torch(ctx, ctx.np.load(os.path.join(workdir, "in%s%d.npy" % (name, ctx.rank)), allow_pickle=False))
    except Exception as e:
        raise Failed("io", "read input: " + one_line(e))
    shape = tuple(x.shape)
    if ctx.job["op"] == "all_gather":
        shape = (ctx.world * shape[0],) + shape[1:] if shape else (ctx.world,)
    send({"type": "enter", "step": step})
    out = ctx.unwire(ctx.run(ctx.wire(x)), shape)
    send({"type": "step", "step": step})
    try:
        path = os.path.join(workdir, "out%s%d.npy" % (name, ctx.rank))
        ctx.np.save(path + ".tmp.npy", to_numpy(ctx, out), allow_pickle=False)
        os.replace(path + ".tmp.npy", path)
    except Exception as e:
        raise Failed("io", "write output: " + one_line(e))


def batch(job, rank, world, np, torch, dist, workdir):
    """Runs job["items"] in order in one group, item k on in<k>_<RANK>.npy, so that a table of
    collectives pays for one interpreter start and one rendezvous per world, not per row. A
    refusal is one item's ("refused" with its step, on every rank alike, before any byte
    moves); the items after it still run."""
    for k, item in enumerate(job["items"]):
        ctx = Ctx(dict(item, world=world, timeout_s=job["timeout_s"]), rank, world, np, torch, dist)
        try:
            collective(ctx, workdir, k, "%d_" % k)
        except Refused as e:
            send({"type": "refused", "step": k, "msg": str(e)})
            send({"type": "step", "step": k})


def random_tensor(ctx, n):
    """Fresh random values (never zeros), seeded by rank."""
    torch = ctx.torch
    g = torch.Generator().manual_seed(1234 + ctx.rank)
    if ctx.tdtype.is_floating_point:
        return torch.randn(n, generator=g, dtype=torch.float32).to(ctx.tdtype)
    return torch.randint(-3, 4, (n,), generator=g, dtype=torch.int32).to(ctx.tdtype)


def bench(ctx):
    torch, dist, world = ctx.torch, ctx.dist, ctx.world
    op = ctx.job["op"]
    iters, warmup = ctx.job["iters"], ctx.job["warmup"]
    for k, count in enumerate(ctx.job["counts"]):
        send_n = count // world if op == "all_gather" else count
        src = ctx.wire(random_tensor(ctx, send_n))
        buf = src.clone()
        send({"type": "enter", "step": k})
        times = []
        for i in range(warmup + iters):
            if op in ("all_reduce", "broadcast"):
                buf.copy_(src)  # in-place ops: the same input every repetition, outside the clock
            try:
                dist.barrier()
            except Exception as e:
                raise Failed("comm", "barrier: " + one_line(e))
            t0 = time.perf_counter()
            ctx.run(buf)
            t1 = time.perf_counter()
            if i >= warmup:
                times.append(t1 - t0)
        send({"type": "step", "step": k, "times": times})


if __name__ == "__main__":
    sys.exit(main())
