"""graphref.py — evaluates a tsopt YAML graph with numpy or PyTorch, by named axes.

A second, independent implementation of the graph semantics (README.md "The graph format"): the GPU check
uses it with PyTorch on the GPU as the fp32 reference at the bench sizes, where the float64 interpreter
would take too long, and tests/check_graphref.sh checks it against `tsopt eval --dump` on this machine.
Dim orders follow the checker's rules, so reshapes see the same layouts:
  - an elementwise op's result has the larger operand's order (ties: the first); sub, div, less_than and
    where keep their first operand's axes first, then the others' new axes;
  - matmul: the first operand's axes, then the second's new ones, minus the contraction axis;
  - reductions drop their axis; views change the order as written.
"""

import math

import yaml


def softplus(xp, d, beta, threshold):
    """PyTorch's softplus: x where beta·x > threshold, else log(1 + exp(beta·x)) / beta (computed stably)."""
    bx = beta * d
    return xp.where(bx > threshold, d, (xp.maximum(bx, 0 * bx) + xp.log1p(xp.exp(-xp.abs(bx)))) / beta)


def gelu(be, d, approximate):
    """PyTorch's GELU: the exact erf form (approximate: none, the default) or the tanh approximation."""
    if approximate == "tanh":
        return 0.5 * d * (1 + be.xp.tanh(math.sqrt(2 / math.pi) * (d + 0.044715 * d * d * d)))
    return 0.5 * d * (1 + be.erf(d / math.sqrt(2)))


class Backend:
    """The few array operations the evaluator needs, for numpy or torch."""

    def __init__(self, xp, device=None, dtype=None):
        self.xp = xp
        self.torch = xp.__name__ == "torch"
        self.device = device
        self.dtype = dtype if dtype is not None else xp.float64

    def const(self, v):
        if self.torch:
            return self.xp.tensor(v, dtype=self.dtype, device=self.device)
        return self.xp.array(v, dtype=self.dtype)

    def arange(self, n):
        if self.torch:
            return self.xp.arange(n, dtype=self.dtype, device=self.device)
        return self.xp.arange(n, dtype=self.dtype)

    def erf(self, a):
        if self.torch:
            return self.xp.erf(a)
        return self.xp.vectorize(math.erf, otypes=[a.dtype])(a)  # numpy has no erf; math.erf is exact

    def transpose(self, a, perm):
        return a.permute(tuple(perm)) if self.torch else a.transpose(perm)  # a tuple: also () for a scalar

    def amax(self, a, axis):
        return a.amax(dim=axis) if self.torch else a.max(axis=axis)

    def sum(self, a, axis):
        return a.sum(dim=axis) if self.torch else a.sum(axis=axis)

    def flip(self, a, axis):
        return a.flip(axis) if self.torch else self.xp.flip(a, axis)

    def round_to(self, a, dtype):
        if dtype == "fp32":
            return a.float().to(self.dtype) if self.torch else a.astype(self.xp.float32).astype(self.dtype)
        if dtype == "fp16":
            return a.half().to(self.dtype) if self.torch else a.astype(self.xp.float16).astype(self.dtype)
        if self.torch:
            return a.bfloat16().to(self.dtype)
        raise ValueError("bf16 rounding needs the torch backend")


class Tensor:
    def __init__(self, data, axes, dtype):
        self.data, self.axes, self.dtype = data, list(axes), dtype


def aligned(be, t, axes):
    """t's data permuted and unsqueezed to `axes` (a superset of t's axes), broadcastable."""
    present = [a for a in axes if a in t.axes]
    d = be.transpose(t.data, [t.axes.index(a) for a in present]) if t.axes else t.data
    shape = [t.data.shape[t.axes.index(a)] if a in t.axes else 1 for a in axes]
    return d.reshape(shape)


def union(*ts):
    axes = []
    for t in ts:
        axes += [a for a in t.axes if a not in axes]
    return axes


def elementwise(be, f, ts, order_first=False):
    big = 0
    if not order_first:
        for i, t in enumerate(ts):
            if len(t.axes) > len(ts[big].axes):
                big = i
    first = ts[big]
    axes = union(first, *ts)
    typed = [t for t in ts if t.axes]
    dtype = (typed[0] if typed else ts[0]).dtype
    return Tensor(f(*[aligned(be, t, axes) for t in ts]), axes, dtype)


def number(a, env, ops):
    """The value of an operand written as a number (0, 0.5, -inf, 1e-05: YAML reads the last two as strings),
    or None when it names a tensor."""
    if isinstance(a, bool):
        return None
    if isinstance(a, (int, float)):
        return float(a)
    if a in env or a in ops:
        return None
    try:
        return float(str(a).replace(".inf", "inf"))
    except ValueError:
        return None


class Graph:
    def __init__(self, path, dims=None):
        with open(path) as f:
            self.spec = yaml.safe_load(f)
        self.sizes = {}
        for name, v in (self.spec.get("axes") or {}).items():
            if isinstance(v, dict):
                self.sizes[name] = v.get("size", v.get("typical"))
            else:
                self.sizes[name] = v
        for name, v in (self.spec.get("axes") or {}).items():
            if isinstance(v, dict) and "like" in v:
                self.sizes[name] = None
        for k, v in (dims or {}).items():
            self.sizes[k] = v
        for name, v in (self.spec.get("axes") or {}).items():
            if isinstance(v, dict) and "like" in v:
                self.sizes[name] = self.sizes[v["like"]]
        self.inputs = [(n, v["dtype"], list(v["shape"])) for n, v in self.spec["inputs"].items()]
        self.outputs = list(self.spec["outputs"])

    def input_shape(self, name):
        for n, _, shape in self.inputs:
            if n == name:
                return [self.sizes[a] for a in shape]
        raise KeyError(name)

    def evaluate(self, be, inputs):
        """inputs: name → array (in be's dtype). Returns name → (array, axes) for every output."""
        env = {n: Tensor(inputs[n], shape, dt) for n, dt, shape in self.inputs}
        ops = {op["name"]: op for op in self.spec["ops"]}
        done = set()

        def get(name):
            if name not in env:
                raw = ops[name].get("args", [])
                args = [None if number(a, env, ops) is not None else get(a) for a in raw]
                # an operand written as a number is a constant of the op's first tensor operand's dtype
                dtype = next((t.dtype for t in args if t is not None), "fp32")
                args = [t if t is not None else Tensor(be.const(number(a, env, ops)), [], dtype) for a, t in zip(raw, args)]
                self.run(be, ops[name], args, env)
            return env[name]

        return {o: get(o) for o in self.outputs}

    # ---- ops ---------------------------------------------------------------------------------------
    def run(self, be, op, args, env):
        xp = be.xp
        kind = op["op"]
        ew = lambda f, first=False: elementwise(be, f, args, first)  # noqa: E731
        if kind == "matmul":
            over = op["over"]
            ka, kb = (over, over) if isinstance(over, str) else over
            x, y = args
            y = Tensor(y.data, [ka if a == kb else a for a in y.axes], y.dtype)
            axes = union(x, y)
            letter = {a: chr(ord("a") + i) for i, a in enumerate(axes)}
            rest = [a for a in axes if a != ka]
            spec = "%s,%s->%s" % ("".join(letter[a] for a in x.axes), "".join(letter[a] for a in y.axes),
                                  "".join(letter[a] for a in rest))
            r = Tensor(xp.einsum(spec, x.data, y.data), rest, x.dtype)
        elif kind in ("add", "mul", "max"):
            f = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": xp.maximum}[kind]
            r = ew(f)
        elif kind == "sub":
            r = ew(lambda a, b: a - b, True)
        elif kind == "div":
            r = ew(lambda a, b: a / b, True)
        elif kind == "less_than":
            r = ew(lambda a, b: (a < b) * be.const(1.0), True)
        elif kind == "where":
            r = elementwise(be, lambda c, a, b: xp.where(c != 0, a, b), args, True)
            r.dtype = args[1].dtype if args[1].axes else args[2].dtype
        elif kind in ("neg", "recip", "sqrt", "exp2", "log2", "sin", "exp", "rsqrt", "tanh", "silu", "gelu", "copy",
                      "erf", "softplus", "sigmoid", "relu", "abs", "log"):
            x = args[0]
            d = x.data
            f = {
                "neg": lambda: -d,
                "recip": lambda: 1 / d,
                "sqrt": lambda: xp.sqrt(d),
                "exp2": lambda: xp.exp2(d),
                "log2": lambda: xp.log2(d),
                "sin": lambda: xp.sin(d),
                "exp": lambda: xp.exp(d),
                "rsqrt": lambda: 1 / xp.sqrt(d),
                "tanh": lambda: xp.tanh(d),
                "silu": lambda: d / (1 + xp.exp(-d)),
                "gelu": lambda: gelu(be, d, op.get("approximate", "none")),
                "erf": lambda: be.erf(d),
                "copy": lambda: d,
                "softplus": lambda: softplus(xp, d, op.get("beta", 1.0), op.get("threshold", 20.0)),
                "sigmoid": lambda: 1 / (1 + xp.exp(-d)),
                "relu": lambda: xp.where(d > 0, d, 0 * d),
                "abs": lambda: xp.abs(d),
                "log": lambda: xp.log(d),
            }[kind]
            r = Tensor(f(), x.axes, x.dtype)
        elif kind == "min":
            r = ew(xp.minimum)
        elif kind == "clamp":
            d = args[0].data
            if "lo" in op:
                d = xp.maximum(d, be.const(float(op["lo"])))
            if "hi" in op:
                d = xp.minimum(d, be.const(float(op["hi"])))
            r = Tensor(d, args[0].axes, args[0].dtype)
        elif kind == "leaky_relu":
            d, slope = args[0].data, float(op.get("slope", 0.01))
            r = Tensor(xp.where(d > 0, d, slope * d), args[0].axes, args[0].dtype)
        elif kind == "pow":
            r = Tensor(args[0].data ** float(op["exponent"]), args[0].axes, args[0].dtype)
        elif kind == "scale":
            r = Tensor(args[0].data * op["by"], args[0].axes, args[0].dtype)
        elif kind == "cast":
            r = Tensor(be.round_to(args[0].data, op["dtype"]), args[0].axes, op["dtype"])
        elif kind == "constant":
            v = op["value"]
            v = float("-inf") if v in ("-inf", "-.inf") else float("inf") if v in ("inf", ".inf") else float(v)
            r = Tensor(be.const(v), [], op.get("dtype", "fp32"))
        elif kind == "iota":
            r = Tensor(be.arange(self.sizes[op["axis"]]), [op["axis"]], op.get("dtype", "fp32"))
        elif kind == "append":  # in place, as a KV cache is updated: row n-1 of the cache (or the block of
            cache, v = args     # `rows` rows ending there), then its first n rows
            ax, new, rows = op["axis"], op["as"], op.get("rows")
            n, i = self.sizes[new], cache.axes.index(ax)
            if rows is None:
                row = aligned(be, v, [a for a in cache.axes if a != ax])
            else:
                row = aligned(be, v, [rows if a == ax else a for a in cache.axes])
            first = n - (1 if rows is None else self.sizes[rows])
            if be.torch:
                if rows is None:
                    cache.data.select(i, n - 1).copy_(row)
                else:
                    cache.data.narrow(i, first, n - first).copy_(row)
                d = cache.data.narrow(i, 0, n)
            else:
                if rows is None:
                    be.xp.moveaxis(cache.data, i, 0)[n - 1] = row
                else:
                    be.xp.moveaxis(cache.data, i, 0)[first:n] = be.xp.moveaxis(row, i, 0)
                d = be.xp.take(cache.data, list(range(n)), axis=i)
            r = Tensor(d, [new if a == ax else a for a in cache.axes], cache.dtype)
        elif kind in ("reduce_sum", "reduce_max", "mean", "softmax", "rmsnorm", "logsumexp", "var", "layernorm"):
            r = self.reduction(be, kind, op, args)
        else:
            r = self.view(be, kind, op, args[0])
        env[op["name"]] = r

    def reduction(self, be, kind, op, args):
        xp = be.xp
        x = args[0]
        ax = op["axis"]
        i = x.axes.index(ax)
        rest = [a for a in x.axes if a != ax]
        d = x.data
        if kind == "reduce_sum":
            return Tensor(be.sum(d, i), rest, x.dtype)
        if kind == "reduce_max":
            return Tensor(be.amax(d, i), rest, x.dtype)
        if kind == "mean":
            return Tensor(be.sum(d, i) / d.shape[i], rest, x.dtype)
        keep = list(d.shape)
        keep[i] = 1
        if kind == "softmax":
            m = be.amax(d, i).reshape(keep)
            e = xp.exp(d - m)
            return Tensor(e / be.sum(e, i).reshape(keep), x.axes, x.dtype)
        if kind == "logsumexp":  # m = max(max x, -FLT_MAX): a row of -inf gives -inf, not NaN
            m = xp.maximum(be.amax(d, i), be.const(-3.4028234663852886e38))
            return Tensor(m + xp.log(be.sum(xp.exp(d - m.reshape(keep)), i)), rest, x.dtype)
        if kind in ("var", "layernorm"):
            c = d - (be.sum(d, i) / d.shape[i]).reshape(keep)
            if kind == "var":
                return Tensor(be.sum(c * c, i) / (d.shape[i] - float(op.get("correction", 1))), rest, x.dtype)
            y = c / xp.sqrt(be.sum(c * c, i).reshape(keep) / d.shape[i] + float(op.get("eps", 1e-5)))
            if len(args) >= 2:
                y = y * aligned(be, args[1], x.axes)
            if len(args) == 3:
                y = y + aligned(be, args[2], x.axes)
            return Tensor(y, x.axes, x.dtype)
        eps = float(op.get("eps", 1e-6))
        ms = be.sum(d * d, i).reshape(keep) / d.shape[i]
        y = d / xp.sqrt(ms + eps)
        if len(args) == 2:
            y = y * aligned(be, args[1], x.axes)
        return Tensor(y, x.axes, x.dtype)

    def view(self, be, kind, op, x):
        if kind == "permute":
            order = op["order"]
            return Tensor(be.transpose(x.data, [x.axes.index(a) for a in order]), order, x.dtype)
        if kind == "expand":
            shape = op["shape"]
            d = aligned(be, x, shape)
            full = [self.sizes[a] for a in shape]
            d = d.expand(*full) if be.torch else be.xp.broadcast_to(d, full)
            return Tensor(d, shape, x.dtype)
        if kind == "reshape":
            shape = op["shape"]
            return Tensor(x.data.reshape([self.sizes[a] for a in shape]), shape, x.dtype)
        if kind == "slice":
            ax, new = op["axis"], op["as"]
            start, step, size = int(op.get("start", 0)), int(op.get("step", 1)), self.sizes[new]
            i = x.axes.index(ax)
            idx = [start + j * step for j in range(size)]
            if be.torch:
                sel = x.data.index_select(i, be.xp.tensor(idx, device=x.data.device))
            else:
                sel = be.xp.take(x.data, idx, axis=i)
            return Tensor(sel, [new if a == ax else a for a in x.axes], x.dtype)
        if kind == "window":  # index (i, j) of the new axes is element i·step + j·dilation of the old
            ax, (out, tap) = op["axis"], op["as"]
            step, dil = int(op.get("step", 1)), int(op.get("dilation", 1))
            i = x.axes.index(ax)
            idx = [w * step + j * dil for w in range(self.sizes[out]) for j in range(self.sizes[tap])]
            if be.torch:
                sel = x.data.index_select(i, be.xp.tensor(idx, device=x.data.device))
            else:
                sel = be.xp.take(x.data, idx, axis=i)
            shape = list(sel.shape[:i]) + [self.sizes[out], self.sizes[tap]] + list(sel.shape[i + 1:])
            return Tensor(sel.reshape(shape), x.axes[:i] + [out, tap] + x.axes[i + 1:], x.dtype)
        raise ValueError("unknown op " + kind)


def ordered(be, t, axes):
    """t's data in the dim order `axes` (same axis set), contiguous."""
    d = be.transpose(t.data, [t.axes.index(a) for a in axes])
    return d.contiguous() if be.torch else be.xp.ascontiguousarray(d)
