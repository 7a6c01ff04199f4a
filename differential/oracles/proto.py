"""Line protocol shared by Tessera's oracle scripts (docs/differential.md).

One JSON object per line on stdin/stdout. The oracle first writes a hello line, then answers
each {"type": "eval"} request with one {"type": "result"} line, until {"type": "quit"} or EOF.
A framework plugs in through a backend object with info(), decode(), encode(), describe() and
apply(); gradient requests (protocol 2) also use to_f64(), round_to(), zeros_like() and vjp().

Protocol 2 adds gradient cases: a case with "grad": {"wrt": [input names], "cotangents":
[one tensor per output]} is answered with its outputs, "grads" (one per wrt input, in that
input's dtype) and "unused" (the wrt inputs no gradient reaches: their gradients are zeros).
A case without "grad" is a protocol-1 case and is answered exactly as before.
"""

import base64
import json
import os
import sys

PROTOCOL = 2

FLOAT_NAMES = ("f64", "f32", "f16", "bf16", "fp8e4m3", "fp8e5m2")


class Unsupported(Exception):
    """The framework cannot compute this op/dtype: reported per case, not as a broken oracle."""


class BadRequest(ValueError):
    """A gradient case that contradicts itself (unknown wrt name, cotangent of the wrong type)."""


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
    if case.get("grad") is not None:
        return run_vjp_case(backend, opts, case)
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


def run_vjp_case(backend, opts, case):
    """A gradient case: the outputs and the vector-Jacobian product of the graph with the
    case's cotangents, with respect to the wrt inputs.

    Default (f64) mode: float inputs and cotangents are upcast to f64 and every node computes
    in f64 (declared float dtypes, cast targets and accumulators all read as f64), so the
    answer is the mathematical gradient at the given inputs; outputs and gradients are then
    rounded once to their own dtypes. Native mode (the request's native flag): the graph runs
    as a forward native request does, in the inputs' dtypes with the framework's own kernels,
    and the framework's autodiff differentiates that."""
    name = case.get("name", "?")
    cur = [None]  # the node being evaluated, for error messages
    try:
        types = declared_types(case)
        wrt, cot_wires = check_grad(case, types)
        f64 = not opts.native
        env = {}
        for t in case["inputs"]:
            env[t["name"]] = lift(backend, backend.decode(t, opts.device), t["dtype"], f64)
        cots = [lift(backend, backend.decode(c, opts.device), c["dtype"], f64) for c in cot_wires]
        nodes = [promote(n) for n in case["nodes"]] if f64 else case["nodes"]
        modes = []

        def forward(leaves):
            e = dict(env)
            e.update(zip(wrt, leaves))
            for node in nodes:
                cur[0] = node
                val, mode = backend.apply(node, [e[i] for i in node["inputs"]], opts)
                check(backend, node, val)
                e[node["output"]] = val
                if mode != "native" and mode not in modes:
                    modes.append(mode)
            cur[0] = None
            return [e[o] for o in case["outputs"]]

        outs, grads = backend.vjp(forward, [env[w] for w in wrt], cots)
        cur[0] = None
        reach = reachable(case)
        unused = [w for w, g in zip(wrt, grads) if g is None or w not in reach]
        grads = [backend.zeros_like(env[w]) if g is None else g for w, g in zip(wrt, grads)]
        res = {"name": name,
               "outputs": [backend.encode(o, backend.round_to(x, types[o][0])) for o, x in zip(case["outputs"], outs)],
               "grads": [backend.encode(w, backend.round_to(g, types[w][0])) for w, g in zip(wrt, grads)],
               "mode": vjp_mode(f64, modes, unused)}
        if unused:
            res["unused"] = unused
        return res
    except Unsupported as e:
        return {"name": name, "unsupported": True, "error": where(cur[0]) + str(e)}
    except BadRequest as e:
        return {"name": name, "error": "bad gradient request: %s" % e}
    except Exception as e:
        return {"name": name, "error": where(cur[0]) + "%s: %s" % (type(e).__name__, one_line(e))}


def declared_types(case):
    """Every value's declared (dtype, shape): the inputs' and each node's output."""
    types = {}
    for t in case["inputs"]:
        types[t["name"]] = (t["dtype"], list(t["shape"]))
    for n in case["nodes"]:
        types[n["output"]] = (n["dtype"], list(n["shape"]))
    return types


def check_grad(case, types):
    """The wrt names and the cotangents, checked against the case: each wrt name is a distinct
    float input, and there is one cotangent per output with the output's dtype and shape."""
    grad = case["grad"]
    wrt = list(grad.get("wrt") or [])
    cots = list(grad.get("cotangents") or [])
    inputs = [t["name"] for t in case["inputs"]]
    for i, w in enumerate(wrt):
        if w not in inputs:
            raise BadRequest("wrt names %%%s, which is not an input of the case (inputs: %s)"
                             % (w, ", ".join("%" + n for n in inputs)))
        if w in wrt[:i]:
            raise BadRequest("wrt names %%%s twice" % w)
        if types[w][0] not in FLOAT_NAMES:
            raise BadRequest("wrt input %%%s is %s: only float inputs have gradients" % (w, typename(*types[w])))
    outs = case["outputs"]
    if len(cots) != len(outs):
        raise BadRequest("%d cotangents for %d outputs" % (len(cots), len(outs)))
    for i, (c, o) in enumerate(zip(cots, outs)):
        if o not in types:
            raise BadRequest("output %%%s is not defined by the case" % o)
        dt, shape = types[o]
        if c.get("dtype") != dt or list(c.get("shape", [])) != shape:
            raise BadRequest("cotangent %d (for output %%%s) is %s, the output is %s"
                             % (i, o, typename(c.get("dtype"), c.get("shape", [])), typename(dt, shape)))
    return wrt, cots


def typename(dtype, shape):
    return "%s[%s]" % (dtype, ",".join(str(d) for d in shape))


def lift(backend, x, dtype, f64):
    """A float value upcast to f64 in f64 mode (exact: f64 holds every value of the others)."""
    return backend.to_f64(x) if f64 and dtype in FLOAT_NAMES else x


def promote(node):
    """The node as computed in f64 mode: a float output dtype, and any float dtype attribute
    (cast's `to`, `accum`), read as f64. Integer and bool dtypes are kept."""
    n = dict(node)
    if n["dtype"] in FLOAT_NAMES:
        n["dtype"] = "f64"
    at = dict(n.get("attrs") or {})
    for k, v in at.items():
        if isinstance(v, str) and v in FLOAT_NAMES:
            at[k] = "f64"
    n["attrs"] = at
    return n


def reachable(case):
    """The names some output depends on, following the nodes backwards."""
    need = set(case["outputs"])
    for n in reversed(case["nodes"]):
        if n["output"] in need:
            need.update(n["inputs"])
    return need


def vjp_mode(f64, modes, unused):
    head = ("vjp in f64: inputs and cotangents upcast to f64, every node in f64, outputs and gradients rounded once to their dtypes"
            if f64 else "vjp native: the framework's autodiff in the inputs' dtypes")
    parts = [head] + modes
    if unused:
        parts.append("no gradient reaches %s (no output depends on it, or only through ops without one): zeros"
                     % ", ".join("%" + w for w in unused))
    return "; ".join(parts)


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
