"""Line protocol shared by Tessera's oracle scripts (docs/differential.md).

One JSON object per line on stdin/stdout. The oracle first writes a hello line, then answers
each {"type": "eval"} request with one {"type": "result"} line, until {"type": "quit"} or EOF.
A framework plugs in through a backend object with info(), decode(), encode() and apply().
"""

import base64
import json
import os
import sys

PROTOCOL = 1


class Unsupported(Exception):
    """The framework cannot compute this op/dtype: reported per case, not as a broken oracle."""


def serve(framework, setup):
    # The protocol owns the real stdout. Whatever a library prints (torch warnings, XLA banners)
    # is moved to stderr, so it cannot corrupt a protocol line.
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    pyver = sys.version.split()[0]
    try:
        backend = setup()
    except Exception as e:  # the framework is missing or broken: say so and stop
        send(out, {"type": "hello", "protocol": PROTOCOL, "framework": framework, "python": pyver,
                   "error": "%s: %s" % (type(e).__name__, e)})
        return 0
    hello = {"type": "hello", "protocol": PROTOCOL, "framework": framework, "python": pyver}
    hello.update(backend.info())
    send(out, hello)
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return 0
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            send(out, {"type": "error", "id": None, "error": "request is not JSON: %s" % e})
            continue
        kind = req.get("type")
        if kind == "quit":
            return 0
        if kind != "eval":
            send(out, {"type": "error", "id": req.get("id"), "error": "unknown request type %r" % kind})
            continue
        opts = Options(req.get("device", "cpu"), bool(req.get("native", False)))
        results = [run_case(backend, opts, c) for c in req.get("cases", [])]
        send(out, {"type": "result", "id": req.get("id"), "results": results})


class Options:
    """Per-request settings: the device, and native=True to use the framework's own kernels
    for 16-bit floats even where they round intermediates (to show differences, not to judge)."""

    def __init__(self, device, native):
        self.device, self.native = device, native


def send(out, msg):
    out.write(json.dumps(msg, separators=(",", ":"), allow_nan=False))
    out.write("\n")
    out.flush()


def run_case(backend, opts, case):
    """Evaluates one case's nodes in order; every failure stays inside this case's result."""
    name = case.get("name", "?")
    node = None
    try:
        env = {}
        for t in case["inputs"]:
            env[t["name"]] = backend.decode(t, opts.device)
        modes = []
        for node in case["nodes"]:
            args = [env[i] for i in node["inputs"]]
            val, mode = backend.apply(node, args, opts)
            check(backend, node, val)
            env[node["output"]] = val
            if mode != "native" and mode not in modes:
                modes.append(mode)
        node = None
        outs = [backend.encode(o, env[o]) for o in case["outputs"]]
        return {"name": name, "outputs": outs, "mode": "; ".join(modes) or "native"}
    except Unsupported as e:
        return {"name": name, "unsupported": True, "error": where(node) + str(e)}
    except Exception as e:
        return {"name": name, "error": where(node) + "%s: %s" % (type(e).__name__, one_line(e))}


def where(node):
    if node is None:
        return ""
    return "%%%s = %s: " % (node.get("output", "?"), node.get("op", "?"))


def one_line(e):
    return " ".join(str(e).split())


def check(backend, node, val):
    """A mapping that returns the wrong dtype or shape is a bug of the oracle, caught here."""
    dt, shape = backend.describe(val)
    if dt != node["dtype"] or list(shape) != list(node["shape"]):
        raise ValueError("oracle produced %s%s, the graph declares %s%s"
                         % (dt, list(shape), node["dtype"], list(node["shape"])))


def b64decode(s):
    return base64.b64decode(s) if s else b""


def b64encode(raw):
    return base64.b64encode(raw).decode("ascii")


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n
