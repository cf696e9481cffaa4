"""aten.py — the table from ATen ops (as torch.export leaves them) to tsopt ops, one handler per op family.

A handler gets the converter context `cx` (cx.g: the graph.Graph; cx.shape, cx.dtype: the node's result as
PyTorch traced it) and the node's arguments with tensors already converted to graph.Val; it returns a Val (or
a tuple for ops with several results). An op missing here, or an argument a handler cannot express, raises
ExportError; export.py adds the ATen op and the source line.
"""

import itertools
import math

from .graph import ExportError, Val, atoms, flat

# ---- elementwise --------------------------------------------------------------------------------------


def ew(cx, op, *args, **attrs):
    return cx.g.elementwise(cx.hint, op, list(args), cx.shape, cx.dtype, **attrs)


def unary(op, **attrs):
    return lambda cx, x, *rest: cx.g.op(cx.hint, op, [x], x.axes, x.dtype, **attrs)


def add(cx, a, b, alpha=1):
    if alpha != 1:
        b = scaled(cx, b, alpha)
    return ew(cx, "add", a, b)


def sub(cx, a, b, alpha=1):
    if alpha != 1:
        b = scaled(cx, b, alpha)
    return ew(cx, "sub", a, b)


def rsub(cx, a, b, alpha=1):
    return sub(cx, b, a, alpha) if alpha == 1 else sub(cx, b, scaled(cx, a, alpha))


def scaled(cx, x, c):
    if not isinstance(x, Val):
        return x * c
    return cx.g.op(cx.hint, "scale", [x], x.axes, x.dtype, by=float(c))


def div(cx, a, b, rounding_mode=None):
    if rounding_mode is not None:
        raise ExportError("division with rounding_mode=%r has no tsopt op" % rounding_mode)
    if not isinstance(b, Val):
        return scaled(cx, a, 1.0 / b)
    return ew(cx, "div", a, b)


def less(cx, a, b):
    return ew(cx, "less_than", a, b)


def not_less(cx, a, b):  # a >= b  ⇔  1 - (a < b)
    return ew(cx, "sub", 1.0, less(cx, a, b))


def boolean(name, combine):
    """and / or / xor of boolean tensors (tsopt holds them as 0.0 / 1.0): combine(cx, a, b) on those values. Of other
    dtypes (integer bit operations) refused: tsopt has no integer tensors."""
    def h(cx, a, b):
        kinds = [cx.arg_dtype(i) for i in range(2)]
        if any(k not in ("bool", None) for k in kinds) or not any(k == "bool" for k in kinds):
            raise ExportError("%s of %s tensors: tsopt maps it for boolean masks only" % (name, "/".join(str(k) for k in kinds)))
        return combine(cx, a, b)
    return h


def where(cx, c, a, b):
    return ew(cx, "where", c, a, b)


def masked_fill(cx, x, mask, value):
    return ew(cx, "where", mask, value, x)


def pow_(cx, x, e):
    if isinstance(x, Val) and not isinstance(e, Val):
        if e == 1:
            return x
        return cx.g.op(cx.hint, "pow", [x], x.axes, x.dtype, exponent=float(e))
    if not isinstance(x, Val) and isinstance(e, Val) and x > 0:  # b^e = 2^(e·log2 b)
        return cx.g.op(cx.hint, "exp2", [scaled(cx, e, math.log2(x))], e.axes, e.dtype)
    raise ExportError("pow of a tensor exponent has no tsopt op")


def cos(cx, x):  # cos x = sin(x + π/2)
    return cx.g.op(cx.hint, "sin", [ew(cx, "add", x, math.pi / 2)], x.axes, x.dtype)


def gelu(cx, x, approximate="none"):
    return cx.g.op(cx.hint, "gelu", [x], x.axes, x.dtype, approximate=approximate)


def leaky_relu(cx, x, slope=0.01):
    return cx.g.op(cx.hint, "leaky_relu", [x], x.axes, x.dtype, slope=float(slope))


def softplus(cx, x, beta=1, threshold=20):
    return cx.g.op(cx.hint, "softplus", [x], x.axes, x.dtype, beta=float(beta), threshold=float(threshold))


def elu(cx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    """x > 0 ? scale·x : scale·alpha·(e^(input_scale·x) − 1), as aten.elu (selu and celu are elu)."""
    xs = scaled(cx, x, input_scale) if input_scale != 1 else x
    em1 = ew(cx, "sub", unary("exp")(cx, xs), 1.0)
    y = where(cx, less(cx, 0.0, x), x, scaled(cx, em1, alpha))
    return scaled(cx, y, scale) if scale != 1 else y


def selu(cx, x):
    return elu(cx, x, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946)


def celu(cx, x, alpha=1.0):
    return elu(cx, x, alpha, 1.0, 1.0 / alpha)


def hardsigmoid(cx, x):
    """clamp(x/6 + 1/2, 0, 1)"""
    return clamp(cx, ew(cx, "add", scaled(cx, x, 1.0 / 6.0), 0.5), 0.0, 1.0)


def hardswish(cx, x):
    return ew(cx, "mul", x, hardsigmoid(cx, x))


def mish(cx, x):
    """x · tanh(softplus(x))"""
    return ew(cx, "mul", x, unary("tanh")(cx, softplus(cx, x)))


def log_sigmoid(cx, x):
    """log σ(x) = −softplus(−x)"""
    return unary("neg")(cx, softplus(cx, unary("neg")(cx, x)))


def threshold(cx, x, th, value):
    """x > th ? x : value"""
    return where(cx, less(cx, float(th), x), x, float(value))


def hardshrink(cx, x, lambd=0.5):
    """|x| > λ ? x : 0"""
    return where(cx, less(cx, float(lambd), unary("abs")(cx, x)), x, 0.0)


def softshrink(cx, x, lambd=0.5):
    """x > λ ? x − λ : x < −λ ? x + λ : 0, as x − clamp(x, −λ, λ)"""
    return ew(cx, "sub", x, clamp(cx, x, -float(lambd), float(lambd)))


def clamp(cx, x, lo=None, hi=None):
    if isinstance(lo, Val) or isinstance(hi, Val):  # tensor bounds: max, then min, broadcast
        y = x if lo is None else ew(cx, "max", x, lo)
        return y if hi is None else ew(cx, "min", y, hi)
    bounds = {k: float(v) for k, v in (("lo", lo), ("hi", hi)) if v is not None}
    if not bounds:
        return x
    return cx.g.op(cx.hint, "clamp", [x], x.axes, x.dtype, **bounds)


def cast(cx, x, *args, **kw):
    if cx.dtype == x.dtype:
        return x
    made = cx.g.producer.get(x.name)
    if cx.dtype != "fp32" and made and made[0] == "softmax":  # softmax(s.float()).type_as(s): a softmax of s
        inner = cx.g.producer.get(made[1][0])
        if inner and inner[0] == "cast" and cx.g.dtype_of(inner[1][0]) == cx.dtype:
            return cx.g.op(cx.hint, "softmax", [Val(inner[1][0], x.axes, cx.dtype)], x.axes, cx.dtype, **made[2])
    return cx.g.op(cx.hint, "cast", [x], x.axes, cx.dtype, dtype=cx.dtype)


def identity(cx, x, *args, **kw):
    return x


def dropout(cx, x, p=0.0, train=False):
    if train and p > 0:
        raise ExportError("dropout in training mode; export the module in eval() mode")
    return x


# ---- views ----------------------------------------------------------------------------------------------


def reshape(cx, x, *args, **kw):
    return cx.g.reshape(x, cx.shape, compound=True)


def permute(cx, x, dims):
    n = len(x.axes)
    return cx.g.permute(x, [d % n for d in dims])


def transpose(cx, x, d0, d1):
    order = list(range(len(x.axes)))
    order[d0], order[d1] = order[d1], order[d0]
    return cx.g.permute(x, order)


def t(cx, x):
    return cx.g.permute(x, list(range(len(x.axes)))[::-1])


def broadcast_tensors(cx, xs):
    """each of xs expanded to their common shape (mse_loss's and huber_loss's decompositions)"""
    return tuple(broadcast_tensors_to(cx, xs, list(cx.node.meta["val"][0].shape)))


def cosine_similarity(cx, a, b, dim=1, eps=1e-8):
    """Σ (a / max(‖a‖, eps)) · (b / max(‖b‖, eps)) over dim, as ATen computes it"""
    g = cx.g
    shape = pair_shape(cx)
    a, b = broadcast_tensors_to(cx, [a, b], shape)
    d = dim % len(shape)
    norm_shape = shape[:d] + [1] + shape[d + 1:]

    def unit(x):
        n = unary("sqrt")(cx, reduce_over(cx, "reduce_sum", g.op(cx.hint, "mul", [x, x], x.axes, x.dtype), [d], True))
        return g.elementwise(cx.hint, "div", [x, g.elementwise(cx.hint, "max", [n, float(eps)], norm_shape, x.dtype)],
                             shape, x.dtype)

    p = g.elementwise(cx.hint, "mul", [unit(a), unit(b)], shape, a.dtype)
    return reduce_over(cx, "reduce_sum", p, [d], False)


def pair_shape(cx):
    """The PyTorch shape operands 0 and 1 broadcast to (right-aligned)."""
    p, q = cx.in_shape(0), cx.in_shape(1)
    r = max(len(p), len(q))
    p, q = [1] * (r - len(p)) + p, [1] * (r - len(q)) + q
    return [max(x, y) for x, y in zip(p, q)]


def loss_reduced(cx, x, reduction):
    """A pointwise loss reduced as ATen's `reduction` says: 0 none, 1 mean, 2 sum (over every dim)."""
    if reduction == 0:
        return x
    return reduce_over(cx, "mean" if reduction == 1 else "reduce_sum", x, list(range(len(x.axes))), False)


def pointwise_loss(f):
    """A loss of (input, target) as f(cx, d = input − target, input, target), reduced."""
    def handler(cx, a, b, reduction=1, *rest):
        shape = pair_shape(cx)
        a, b = broadcast_tensors_to(cx, [a, b], shape)
        return loss_reduced(cx, f(cx, cx.g.elementwise(cx.hint, "sub", [a, b], shape, a.dtype), shape, *rest), reduction)
    return handler


def mse(cx, d, shape):
    return cx.g.elementwise(cx.hint, "mul", [d, d], shape, d.dtype)


def smooth_l1(cx, d, shape, beta=1.0):
    """|d| < β: d²/(2β); else |d| − β/2"""
    g = cx.g
    a = g.op(cx.hint, "abs", [d], d.axes, d.dtype)
    if beta == 0:
        return a
    small = g.elementwise(cx.hint, "mul", [g.elementwise(cx.hint, "mul", [a, a], shape, d.dtype), 0.5 / beta], shape, d.dtype)
    big = g.elementwise(cx.hint, "sub", [a, 0.5 * beta], shape, d.dtype)
    return g.elementwise(cx.hint, "where", [g.elementwise(cx.hint, "less_than", [a, float(beta)], shape, d.dtype), small, big],
                         shape, d.dtype)


def huber(cx, d, shape, delta=1.0):
    """|d| < δ: d²/2; else δ(|d| − δ/2)"""
    g = cx.g
    a = g.op(cx.hint, "abs", [d], d.axes, d.dtype)
    small = g.elementwise(cx.hint, "mul", [g.elementwise(cx.hint, "mul", [a, a], shape, d.dtype), 0.5], shape, d.dtype)
    big = g.elementwise(cx.hint, "mul", [g.elementwise(cx.hint, "sub", [a, 0.5 * delta], shape, d.dtype), float(delta)],
                        shape, d.dtype)
    return g.elementwise(cx.hint, "where", [g.elementwise(cx.hint, "less_than", [a, float(delta)], shape, d.dtype), small, big],
                         shape, d.dtype)


def paired(cx, a, b):
    """A loss's operands 0 and 1 broadcast to their common PyTorch shape, and e(op, *args): an elementwise op at that
    shape in a's dtype."""
    shape = pair_shape(cx)
    a, b = broadcast_tensors_to(cx, [a, b], shape)
    return a, b, lambda op, *args: cx.g.elementwise(cx.hint, op, list(args), shape, a.dtype)


def kl_div(cx, x, t, reduction=1, log_target=False):
    """target · (log target − input) (0 where target is 0, as xlogy), reduced; log_target: e^t · (t − input)"""
    g = cx.g
    x, t, e = paired(cx, x, t)
    if log_target:
        loss = e("mul", g.op(cx.hint, "exp", [t], t.axes, t.dtype), e("sub", t, x))
    else:
        tlogt = e("where", e("less_than", 0.0, t), e("mul", t, g.op(cx.hint, "log", [t], t.axes, t.dtype)), 0.0)
        loss = e("sub", tlogt, e("mul", t, x))
    return loss_reduced(cx, loss, reduction)


def broadcast_tensors_to(cx, xs, shape):
    g = cx.g
    out = g.broadcast_axes(xs, shape)
    return [g.expand_to(g.align(x, out), out) for x in xs]


def expand(cx, x, *args, **kw):
    g, shape = cx.g, cx.shape
    r = len(shape)
    axes = [None] * r
    for p in range(r):
        q = p - (r - len(x.axes))
        if q >= 0 and x.axes[q] is not None:
            axes[p] = x.axes[q]
        elif shape[p] != 1:
            axes[p] = g.axis_for(shape[p], static=True)
    axes = g.distinct(axes)
    x = Val(x.name, [None] * (r - len(x.axes)) + x.axes, x.dtype)
    return g.expand_to(x, axes)


def norm_index(i, n, default):
    if i is None:
        return default
    i = i + n if i < 0 else i
    return min(max(i, 0), n)


def slice_(cx, x, dim=0, start=None, end=None, step=1):
    dim %= len(x.axes)
    n = cx.in_shape(0)[dim]
    return cx.g.slice(x, dim, norm_index(start, n, 0), norm_index(end, n, n), step)


def select(cx, x, dim, index):
    dim %= len(x.axes)
    n = cx.in_shape(0)[dim]
    index %= n
    y = cx.g.slice(x, dim, index, index + 1, 1)
    return Val(y.name, y.axes[:dim] + y.axes[dim + 1:], y.dtype)


def flip(cx, x, dims):
    """x reversed along dims: a slice of step -1 onto the same axis"""
    g = cx.g
    for d in dims:
        a = x.axes[d % len(x.axes)]
        if a is None:
            continue
        if g.is_dynamic(a):
            raise ExportError("cannot flip dynamic axis '%s'" % a)
        x = g.op(cx.hint, "slice", [x], x.axes, x.dtype, axis=a, start=g.size(a) - 1, step=-1, **{"as": a})
    return x


def split_sizes(cx, x, sizes, dim=0):
    """a tuple of slices of x along dim, of the given sizes (of a projection's output: projections of its
    parts, projection_parts)"""
    dim %= len(x.axes)
    parts = projection_parts(cx, x, dim, sizes)
    if parts is not None:
        return parts
    out, at = [], 0
    for n in sizes:
        out.append(cx.g.slice(x, dim, at, at + n, 1))
        at += n
    return tuple(out)


def parts_meet(split_node):
    """Whether the two results of a split meet in one op within two steps of it (a · gelu(g)): the gated form
    a dual GEMM computes in its epilogue."""
    def near(n):
        first = set(n.users)
        return first | {u for f in first for u in f.users}
    parts = [u for u in split_node.users]
    return len(parts) == 2 and bool(near(parts[0]) & near(parts[1]))


def projection_parts(cx, x, dim, sizes):
    """x = a @ w (+ bias), split in two along its last dim, which is w's own (a fused gate-and-up projection,
    then chunk), the halves meeting again (a · gelu(g)): a @ w_part (+ bias_part) for each half, so that the
    second GEMM's epilogue reads the first's result (or the search joins them into a dual GEMM) instead of the
    whole output being written and sliced. None otherwise, or where something else reads x (or the matmul
    under its bias)."""
    g = cx.g
    src = cx.node.args[0]
    if dim != len(x.axes) - 1 or len(getattr(src, "users", ())) != 1 or x.axes[dim] is None:
        return None
    if len(sizes) != 2 or not parts_meet(cx.node):  # q, k, v parts read apart: one wide GEMM is faster
        return None
    made = g.producer.get(x.name)
    bias = None
    if made and made[0] == "add" and g.readers(made[1][0]) == 1:
        m, bias = g.vals.get(made[1][0]), g.vals.get(made[1][1])
        made = g.producer.get(made[1][0])
    else:
        m = x
    if not made or made[0] != "matmul" or m is None or m.axes != x.axes:
        return None
    a, w, k = g.vals.get(made[1][0]), g.vals.get(made[1][1]), made[2]["over"]
    n_axis = x.axes[dim]
    if a is None or w is None or n_axis in a.dims or n_axis not in w.axes or (bias is not None and bias.dims != [n_axis]):
        return None
    out, at = [], 0
    for size in sizes:
        part = g.slice(x, dim, at, at + size, 1)  # the part's axes (the slice itself is left unread)
        taken = set(a.dims) | set(w.dims) | set(x.dims)
        if part.axes[dim] in taken - {n_axis}:  # a part as wide as the contraction (q of a q-k-v projection)
            part = Val(part.name, part.axes[:dim] + [g.alt(part.axes[dim], taken)], part.dtype)
        wp = g.rename(g.slice(w, w.axes.index(n_axis), at, at + size, 1), [part.axes[dim] if e == n_axis else e
                                                                           for e in w.axes])
        mp = g.op(cx.hint + "_part", "matmul", [a, wp], part.axes, x.dtype, over=k)
        if bias is not None:
            bp = g.rename(g.slice(bias, 0, at, at + size, 1), [part.axes[dim]])
            mp = g.op(cx.hint + "_part", "add", [mp, bp], part.axes, x.dtype)
        out.append(mp)
        at += size
    return tuple(out)


def split(cx, x, size, dim=0):
    if isinstance(size, (list, tuple)):
        return split_sizes(cx, x, size, dim)
    n = cx.in_shape(0)[dim % len(x.axes)]
    return split_sizes(cx, x, [min(size, n - i) for i in range(0, n, size)], dim)


def chunk(cx, x, chunks, dim=0):
    n = cx.in_shape(0)[dim % len(x.axes)]
    return split(cx, x, -(-n // chunks), dim)


VIEW_OPS = ("slice", "expand", "permute", "reshape")  # the exporter's views: the same values re-indexed


def zero_one(g, x):
    """Whether tensor x holds only 0 and 1 (tsopt's booleans): a comparison, 1 − such, a product or maximum of such
    (and, or), or where(c, a, b) with a and b each 0, 1 or such — as a registered tril(ones) mask computed is."""
    if not isinstance(x, Val) or x.name not in g.producer:
        return False
    op, args, _ = g.producer[x.name]

    def arg(a):  # a formatted number, or a tensor's name
        return a in ("0", "1") or (a in g.vals and zero_one(g, g.vals[a]))

    if op == "less_than":
        return True
    if op in VIEW_OPS:
        return arg(args[0])
    if op == "where":
        return arg(args[1]) and arg(args[2])
    if op == "sub":
        return args[0] == "1" and arg(args[1])
    return op in ("mul", "max") and all(arg(a) for a in args)


def equal(cx, a, b):  # a == b  ⇔  1 - (a < b) - (b < a)
    """a == b as 1 − (a < b) − (b < a); a boolean compared with 0 or 1 (`mask == 0`, as nanoGPT masks its causal
    buffer) is 1 − it or itself, so that the rules see the comparison it was made of (a causal mask stays one)."""
    for x, c in ((a, b), (b, a)):
        if not isinstance(c, Val) and c in (0, 1) and zero_one(cx.g, x):
            return x if c == 1 else not01(cx, x)
    return ew(cx, "sub", ew(cx, "sub", 1.0, less(cx, a, b)), less(cx, b, a))


def not01(cx, x):
    """1 − x of a boolean x, as the comparison it negates where x is one: 1 − where(c, 0, 1) is c, 1 − where(c, 1, 0)
    is 1 − c, 1 − (1 − y) is y, and of a view of y the same view of 1 − y."""
    g = cx.g
    op, args, attrs = g.producer[x.name]
    if op in VIEW_OPS:  # the view of the negation: a slice of a causal buffer stays a slice of its comparison
        inner = not01(cx, g.vals[args[0]])
        return g.op(cx.hint, op, [inner], x.axes, x.dtype, **attrs)
    if op == "where" and args[0] in g.vals and zero_one(g, g.vals[args[0]]) and (args[1], args[2]) in (("0", "1"), ("1", "0")):
        c = g.vals[args[0]]
        return c if args[1] == "0" else not01(cx, c)
    if op == "sub" and args[0] == "1" and args[1] in g.vals:
        return g.vals[args[1]]
    return ew(cx, "sub", 1.0, x)


def concat(cx, xs, dim=0, stack=False):
    """cat/stack of k equal parts: where over a new part axis P (iota(P) < j + 0.5 picks part j), then P
    merged with the cat dim (cat) or kept (stack)."""
    g = cx.g
    shapes = cx.in_shape(0)
    if len({tuple(s) for s in shapes}) != 1:
        raise ExportError("cat of parts of different shapes %s; tsopt concatenates equal parts only" % shapes)
    k, part = len(xs), shapes[0]
    if k == 1:
        return reshape(cx, xs[0])
    rank = len(part)
    dim %= rank + (1 if stack else 0)
    xs = [g.rename(x, xs[0].axes) for x in xs]
    p_axis = g.fresh_axis(k)

    def with_part(v, a=None):  # v seen with the part axis (or a size-1 dim for it) inserted at dim
        return Val(v.name, v.axes[:dim] + [a] + v.axes[dim:], v.dtype)

    pi = g.op(cx.hint + "_part", "iota", (), [p_axis], cx.dtype, axis=p_axis)
    pshape = part[:dim] + [k] + part[dim:]
    r = with_part(xs[-1])
    for j in range(k - 2, -1, -1):
        sel = g.op(cx.hint + "_sel", "less_than", [pi, j + 0.5], [p_axis], cx.dtype)
        sel_full = with_part(Val(sel.name, [None] * rank, sel.dtype), p_axis)
        r = g.elementwise(cx.hint, "where", [sel_full, with_part(xs[j]), r], pshape, cx.dtype)
    if stack:
        return r
    return g.reshape(r, cx.shape)


def cat(cx, xs, dim=0):
    return concat(cx, xs, dim)


def stack(cx, xs, dim=0):
    return concat(cx, xs, dim, stack=True)


# ---- reductions -----------------------------------------------------------------------------------------


def dims_of(x, dims):
    n = len(x.axes)
    if dims is None or dims == []:
        return list(range(n))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % n for d in dims})


def reduce(op):
    def handler(cx, x, dims=None, keepdim=False, *rest, **kw):
        return reduce_over(cx, op, x, dims_of(x, dims), keepdim)

    return handler


def reduce_over(cx, op, x, dims, keepdim, **attrs):
    axes = list(x.axes)
    y = x
    for d in dims:
        if x.axes[d] is None:
            continue
        axes[d] = None
        y = cx.g.op(cx.hint, op, [y], axes, x.dtype, axis=x.axes[d], **attrs)
    if y is x:
        y = Val(x.name, axes, x.dtype)
    if not keepdim:
        y = Val(y.name, [a for i, a in enumerate(y.axes) if i not in dims], y.dtype)
    return y


def min_reduce(cx, x, dims=None, keepdim=False, *rest, **kw):
    """amin, and min over a dim: −max(−x)."""
    m = reduce_over(cx, "reduce_max", unary("neg")(cx, x), dims_of(x, dims), keepdim)
    return unary("neg")(cx, m)


def max_min(reducer, binary):
    """aten.max / aten.min: over a dim ((values, indices): tsopt computes the values only), over every dim, or
    elementwise against another tensor (max.other)."""
    def h(cx, x, dim=None, keepdim=False):
        if isinstance(dim, Val):
            return ew(cx, binary, x, dim)
        if dim is None:
            return reducer(cx, x, None, False)
        return (reducer(cx, x, dim, keepdim), None)

    return h


def per_dim(v, nd):
    """A convolution's or pool's int-or-list argument, one value per spatial dim."""
    v = list(v) if isinstance(v, (list, tuple)) else [v] * nd
    return v * nd if len(v) == 1 else v


# A pool over windows of at most this many taps in two or more dims is written tap by tap (pool_taps): one
# elementwise kernel, where the reductions over the taps' non-nesting axes would be a kernel each.
SMALL_WINDOW_TAPS = 16


def tap_slices(g, x, first, ks, st, dil, windows):
    """Per tap (j_0, ..., j_n) of windows over x's PyTorch dims first, first + 1, ...: (the tap, x's strided slice
    x[..., j_0·dil_0 :: st_0, ...] over the windows' positions) — the values that tap reads in every window."""
    for taps in itertools.product(*[range(k) for k in ks]):
        v = x
        for j, t in enumerate(taps):
            start = t * dil[j]
            v = g.slice(v, first + j, start, start + (windows[j] - 1) * st[j] + 1, st[j])
        yield taps, v


def pool_taps(cx, reducer, x, ks, st, dil, windows):
    """A pool as the max (or the mean) of one strided slice of x per tap (tap_slices), so that the pool is one
    elementwise kernel reading Π ks slices (overlapping windows share their reads through the cache)."""
    g = cx.g
    acc = None
    for _, v in tap_slices(g, x, len(x.axes) - len(ks), ks, st, dil, windows):
        acc = v if acc is None else g.elementwise(cx.hint, "max" if reducer == "reduce_max" else "add", [acc, v],
                                                  cx.shape, x.dtype)
    if reducer == "mean":
        acc = g.op(cx.hint, "scale", [acc], acc.axes, x.dtype, by=1.0 / math.prod(ks))
    return acc


def pool(reducer, nd):
    """avg_poolNd / max_poolNd without padding: windows that tile the last nd dims (stride = kernel, dilation 1) are
    a reshape splitting each pooled dim into (windows, kernel), a remainder past the last whole window sliced off
    first as PyTorch drops it; overlapping, strided or dilated windows are `window` views. Then the mean or max
    over the kernel axes. ceil_mode is taken where it adds no partial window."""
    def h(cx, x, kernel_size, stride=None, padding=0, *rest):
        ks = per_dim(kernel_size, nd)
        st = per_dim(stride, nd) if stride not in (None, [], ()) else ks
        pad = per_dim(padding, nd)
        dil = per_dim(rest[0], nd) if reducer == "reduce_max" and rest else [1] * nd
        if any(pad):
            raise ExportError("pooling with kernel %s, stride %s, padding %s: tsopt pools without padding (it has no "
                              "padding op)" % (ks, st, pad))
        if reducer == "mean" and len(rest) > 2 and rest[2] is not None:  # (ceil_mode, count_include_pad, divisor)
            raise ExportError("avg_pool with a divisor_override")
        shape, g, rank = cx.in_shape(0), cx.g, len(x.axes)
        windows = [(shape[rank - nd + j] - dil[j] * (ks[j] - 1) - 1) // st[j] + 1 for j in range(nd)]
        if list(cx.shape[rank - nd:]) != windows:  # ceil_mode adding a partial window
            raise ExportError("pooling with ceil_mode over a partial last window (%s windows, %s whole): tsopt pools "
                              "whole windows" % (list(cx.shape[rank - nd:]), windows))
        if all(k == 1 for k in ks) and all(s == 1 for s in st):
            return x
        if sum(k > 1 for k in ks) > 1 and math.prod(ks) <= SMALL_WINDOW_TAPS:
            return pool_taps(cx, reducer, x, ks, st, dil, windows)
        if st == ks and all(d == 1 for d in dil):
            for j, k in enumerate(ks):
                d = rank - nd + j
                if windows[j] * k != shape[d]:
                    x = g.slice(x, d, 0, windows[j] * k, 1)
            split = list(shape[:rank - nd])
            for j, k in enumerate(ks):
                split += [windows[j], k]
            y = g.reshape(x, split)
        else:
            y = x
            for j in range(nd):
                y = g.window(y, rank - nd + 2 * j, windows[j], ks[j], st[j], dil[j])
        return reduce_over(cx, reducer, y, [rank - nd + 2 * j + 1 for j in range(nd)], False)

    return h


def one_axis(x, dims, what):
    ds = [d for d in dims_of(x, dims) if x.axes[d] is not None]
    if len(ds) != 1:
        raise ExportError("%s over %d dims; tsopt's works over one axis" % (what, len(ds)))
    return ds[0]


def var(cx, x, dims=None, correction=1, keepdim=False, **kw):
    """over one dim, or over several consecutive ones (every dim: x.var()) merged into one by a reshape"""
    c = 1 if correction is None else correction
    ds = [d for d in dims_of(x, dims) if x.axes[d] is not None]
    if len(ds) > 1 and ds == list(range(ds[0], ds[-1] + 1)):
        g, shape = cx.g, cx.in_shape(0)
        flat = shape[:ds[0]] + [math.prod(shape[ds[0]:ds[-1] + 1])] + shape[ds[-1] + 1:]
        y = reduce_over(cx, "var", g.reshape(x, flat), [ds[0]], False, correction=float(c))
        if not keepdim:
            return y
        return g.reshape(y, shape[:ds[0]] + [1] * len(ds) + shape[ds[-1] + 1:])
    d = one_axis(x, dims, "var")
    return reduce_over(cx, "var", x, [d], keepdim, correction=float(c))


def std(cx, x, dims=None, correction=1, keepdim=False, **kw):
    """√var"""
    return unary("sqrt")(cx, var(cx, x, dims, correction, keepdim))


def vector_norm(cx, x, ord=2, dims=None, keepdim=False, **kw):
    """linalg.vector_norm / norm: p = 2 (F.normalize's) √Σ x², p = 1 Σ |x|, p = ∞ max |x|"""
    if ord in (1, 1.0):
        return reduce_over(cx, "reduce_sum", unary("abs")(cx, x), dims_of(x, dims), keepdim)
    if ord == math.inf:
        return reduce_over(cx, "reduce_max", unary("abs")(cx, x), dims_of(x, dims), keepdim)
    if ord not in (2, 2.0, None, "fro"):
        raise ExportError("a vector norm of order %r; tsopt maps the 1-, 2- and ∞-norms" % (ord,))
    sq = reduce_over(cx, "reduce_sum", cx.g.op(cx.hint, "mul", [x, x], x.axes, x.dtype), dims_of(x, dims), keepdim)
    return unary("sqrt")(cx, sq)


def matrix_norm(cx, x, ord="fro", dim=(-2, -1), keepdim=False, **kw):
    """the Frobenius norm over two dims (the nuclear and spectral norms have no tsopt op)"""
    if ord != "fro":
        raise ExportError("matrix_norm of order %r; tsopt maps the Frobenius norm" % (ord,))
    return vector_norm(cx, x, 2, list(dim), keepdim)


def std_mean(cx, x, dims=None, correction=1, keepdim=False, **kw):
    """(std, mean)"""
    return (std(cx, x, dims, correction, keepdim), reduce("mean")(cx, x, dims, keepdim))


def var_mean(cx, x, dims=None, correction=1, keepdim=False, **kw):
    """(var, mean) over one dim."""
    return (var(cx, x, dims, correction, keepdim), reduce("mean")(cx, x, dims, keepdim))


def prod(cx, x, dim=None, keepdim=False, *rest, **kw):
    """Π x over one dim (or every dim) as sign · e^(Σ log|x|): the sign from the count c of negatives, cos(π·c) =
    sin(π·c + π/2), ±1 for a whole c; a zero gives log 0 = −∞ and so 0; an ∞ and a zero NaN, as the product does."""
    g, dims, t = cx.g, dims_of(x, dim), x.dtype
    logs = reduce_over(cx, "reduce_sum", g.op(cx.hint, "log", [unary("abs")(cx, x)], x.axes, t), dims, keepdim)
    negative = g.elementwise(cx.hint, "less_than", [x, 0.0], cx.in_shape(0), t)
    c = reduce_over(cx, "reduce_sum", negative, dims, keepdim)
    turn = g.op(cx.hint, "sin", [g.op(cx.hint, "add", [g.op(cx.hint, "scale", [c], c.axes, t, by=math.pi), math.pi / 2],
                                      c.axes, t)], c.axes, t)
    return g.op(cx.hint, "mul", [turn, g.op(cx.hint, "exp", [logs], logs.axes, t)], logs.axes, t)


def distance(cx, a, b, shape, p, eps, keepdim=False):
    """‖a − b + eps‖_p over the last dim of `shape` (the two broadcast to it), as ATen's pairwise_distance."""
    g = cx.g
    a, b = broadcast_tensors_to(cx, [a, b], shape)
    d = g.elementwise(cx.hint, "add", [g.elementwise(cx.hint, "sub", [a, b], shape, a.dtype), float(eps)], shape, a.dtype)
    return vector_norm(cx, d, p, [len(shape) - 1], keepdim)


def pairwise_distance(cx, a, b, p=2.0, eps=1e-6, keepdim=False):
    return distance(cx, a, b, pair_shape(cx), p, eps, keepdim)


def triplet_margin_loss(cx, anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=1):
    """max(d(a, p) − d(a, n) + margin, 0) with d the pairwise distance (swap: d(a, n) the smaller of it and
    d(p, n)), reduced as ATen's `reduction` says; the three of one shape."""
    g = cx.g
    shape = cx.in_shape(0)
    if cx.in_shape(1) != shape or cx.in_shape(2) != shape:
        raise ExportError("triplet_margin_loss of operands of different shapes %s, %s, %s; tsopt maps equal ones" %
                          (shape, cx.in_shape(1), cx.in_shape(2)))
    d_pos, d_neg = distance(cx, anchor, positive, shape, p, eps), distance(cx, anchor, negative, shape, p, eps)
    if swap:
        d_neg = g.op(cx.hint, "min", [d_neg, distance(cx, positive, negative, shape, p, eps)], d_neg.axes, d_neg.dtype)
    gap = g.op(cx.hint, "add", [g.op(cx.hint, "sub", [d_pos, d_neg], d_pos.axes, d_pos.dtype), float(margin)],
               d_pos.axes, d_pos.dtype)
    return loss_reduced(cx, g.op(cx.hint, "relu", [gap], gap.axes, gap.dtype), reduction)


def prelu(cx, x, w):
    """x > 0 ? x : w·x, w one slope or one a channel (dim 1)"""
    one = cx.in_shape(1) in ([1], []) or len(x.axes) < 2  # one slope (an input of fewer than 2 dims has no channels)
    slope = Val(w.name, [None] * len(x.axes), w.dtype) if one else per_channel(cx, w, x)
    return ew(cx, "where", less(cx, 0.0, x), x, cx.g.elementwise(cx.hint, "mul", [x, slope], cx.shape, x.dtype))


def rrelu(cx, x, lower=1.0 / 8, upper=1.0 / 3, training=False, *rest):
    """in eval mode a leaky ReLU of slope (lower + upper) / 2 (training draws random slopes: refused)"""
    if training:
        raise ExportError("rrelu in training mode draws random slopes; tsopt maps it in eval mode")
    return leaky_relu(cx, x, (lower + upper) / 2)


def logit(cx, x, eps=None):
    """log(x / (1 − x)), x clamped to [eps, 1 − eps] where eps is given"""
    if eps is not None:
        x = clamp(cx, x, eps, 1 - eps)
    return unary("log")(cx, ew(cx, "div", x, ew(cx, "sub", 1.0, x)))


def log10(cx, x):
    """log2(x) · log10(2)"""
    return scaled(cx, unary("log2")(cx, x), math.log10(2.0))


def hyperbolic(sign):
    """sinh (sign −1) and cosh (+1): (e^x ± e^−x) / 2"""
    def handler(cx, x):
        e = unary("exp")(cx, x)
        return scaled(cx, ew(cx, "add", e, scaled(cx, unary("exp")(cx, unary("neg")(cx, x)), sign)), 0.5)
    return handler


def tan(cx, x):
    """sin x / cos x"""
    return ew(cx, "div", unary("sin")(cx, x), cos(cx, x))


def hypot(cx, a, b):
    """√(a² + b²)"""
    return unary("sqrt")(cx, ew(cx, "add", ew(cx, "mul", a, a), ew(cx, "mul", b, b)))


def lerp(cx, a, b, w):
    """a + w·(b − a), w a number or a tensor"""
    return ew(cx, "add", a, ew(cx, "mul", ew(cx, "sub", b, a), w) if isinstance(w, Val) else scaled(cx, ew(cx, "sub", b, a), w))


def addcdiv(cx, x, a, b, value=1):
    """x + value · a / b"""
    q = ew(cx, "div", a, b)
    return ew(cx, "add", x, scaled(cx, q, value) if value != 1 else q)


def binary_cross_entropy(cx, p, t, weight=None, reduction=1):
    """−(t·log p + (1 − t)·log(1 − p)), each log at least −100 (as ATen clamps them)"""
    if weight is not None:
        raise ExportError("binary_cross_entropy with a weight; tsopt maps it without")
    g = cx.g
    p, t, e = paired(cx, p, t)
    lp = e("max", g.op(cx.hint, "log", [p], p.axes, p.dtype), -100.0)
    lq = e("max", g.op(cx.hint, "log", [e("sub", 1.0, p)], p.axes, p.dtype), -100.0)
    return loss_reduced(cx, g.op(cx.hint, "neg", [e("add", e("mul", t, lp), e("mul", e("sub", 1.0, t), lq))], p.axes,
                                 p.dtype), reduction)


def binary_cross_entropy_with_logits(cx, x, t, weight=None, pos_weight=None, reduction=1):
    """max(x, 0) − x·t + log(1 + e^(−|x|)): the stable form of −(t·log σ(x) + (1 − t)·log(1 − σ(x)))"""
    if weight is not None or pos_weight is not None:
        raise ExportError("binary_cross_entropy_with_logits with a weight or pos_weight; tsopt maps it without")
    g = cx.g
    x, t, e = paired(cx, x, t)
    tail = softplus(cx, g.op(cx.hint, "neg", [g.op(cx.hint, "abs", [x], x.axes, x.dtype)], x.axes, x.dtype))
    return loss_reduced(cx, e("add", e("sub", e("max", x, 0.0), e("mul", x, t)), tail), reduction)


def soft_margin_loss(cx, x, t, reduction=1):
    """log(1 + e^(−t·x))"""
    x, t, e = paired(cx, x, t)
    m = e("mul", x, t)
    return loss_reduced(cx, softplus(cx, cx.g.op(cx.hint, "neg", [m], m.axes, m.dtype)), reduction)


def margin_ranking_loss(cx, a, b, t, margin=0.0, reduction=1):
    """max(0, −t·(a − b) + margin), the three of one shape"""
    g, shape = cx.g, cx.in_shape(0)
    if cx.in_shape(1) != shape or cx.in_shape(2) != shape:
        raise ExportError("margin_ranking_loss of operands of different shapes; tsopt maps equal ones")
    d = g.op(cx.hint, "sub", [b, a], a.axes, a.dtype)
    m = g.op(cx.hint, "add", [g.op(cx.hint, "mul", [t, d], a.axes, a.dtype), float(margin)], a.axes, a.dtype)
    return loss_reduced(cx, g.op(cx.hint, "relu", [m], m.axes, m.dtype), reduction)


def sign(cx, x):
    """(0 < x) − (x < 0)"""
    return ew(cx, "sub", less(cx, 0.0, x), less(cx, x, 0.0))


def addcmul(cx, x, a, b, value=1):
    """x + value · a · b"""
    p = ew(cx, "mul", a, b)
    return ew(cx, "add", x, p if value == 1 else ew(cx, "mul", p, float(value)))


def expm1(cx, x):
    """eˣ − 1 (computed as written: no extra precision near 0)"""
    return ew(cx, "sub", unary("exp")(cx, x), 1.0)


def log1p(cx, x):
    """log(1 + x) (computed as written)"""
    return unary("log")(cx, ew(cx, "add", x, 1.0))


def glu(cx, x, dim=-1):
    """a · σ(b) of x's two halves along dim"""
    a, b = split(cx, x, cx.in_shape(0)[dim % len(x.axes)] // 2, dim)
    return cx.g.elementwise(cx.hint, "mul", [a, unary("sigmoid")(cx, b)], cx.shape, x.dtype)


def logsumexp(cx, x, dims, keepdim=False):
    """Over each dim in turn (log Σ_ab e^x = log Σ_b e^(log Σ_a e^x)); over size-1 dims only: x itself."""
    return reduce_over(cx, "logsumexp", x, dims_of(x, dims), keepdim)


def softmax(cx, x, dim, *rest):
    dim %= len(x.axes)
    if x.axes[dim] is None:
        return ew(cx, "add", ew(cx, "mul", x, 0.0), 1.0)
    return cx.g.op(cx.hint, "softmax", [x], x.axes, x.dtype, axis=x.axes[dim])


def log_softmax(cx, x, dim, *rest):
    dim %= len(x.axes)
    lse = reduce_over(cx, "logsumexp", x, [dim], True)
    return ew(cx, "sub", x, lse)


# ---- contractions ---------------------------------------------------------------------------------------


def right_aligned(part, names):
    """part's axes renamed to `names` (a longer or equal list) position by position from the right."""
    off = len(names) - len(part)
    return [None if x is None else names[i + off] for i, x in enumerate(part)]


def diag_product(cx, a, b, shape, hint):
    """diag(v) @ b = v_i · b[i, m] and a @ diag(v) = a[i, j] · v_j: a scale of rows or columns, not a GEMM
    (KernelBench's diag(A) @ B)."""
    g = cx.g
    if a.name in g.diag_of:  # v seen along b's rows
        v = g.rename(g.diag_of[a.name], [b.axes[0]])
        return g.elementwise(hint, "mul", [b, Val(v.name, [b.axes[0], None], v.dtype)], shape, b.dtype)
    v = g.rename(g.diag_of[b.name], [a.axes[1]])  # v seen along a's columns
    return g.elementwise(hint, "mul", [a, v], shape, a.dtype)


def contract(cx, a, b, shape=None, hint=None):
    """a @ b with PyTorch's matmul semantics for operands of 2 or more dims; result of PyTorch shape `shape`."""
    g, shape, hint = cx.g, shape or cx.shape, hint or cx.hint
    if len(a.axes) == 2 and len(b.axes) == 2 and (a.name in g.diag_of or b.name in g.diag_of):
        return diag_product(cx, a, b, shape, hint)
    if len(a.axes) >= 2:  # only the rows may stay a compound dim (A's free axes)
        a = g.solid(a, keep=len(a.axes) - 2)
    b = g.solid(b)
    if len(a.axes) < 2 or len(b.axes) < 2:
        raise ExportError("matmul of a 1-dim operand; reshape it to 2 dims")
    if a.axes[-1] is None or b.axes[-2] is None:
        raise ExportError("matmul over a contraction dim of size 1")
    nb = len(shape) - 2
    batch = g.broadcast_axes([Val(a.name, a.axes[:-2], a.dtype), Val(b.name, b.axes[:-2], b.dtype)], shape[:nb])
    m, k, n = a.axes[-2], a.axes[-1], b.axes[-1]
    taken = set(batch)
    if m is not None and m in taken:
        m = g.alt(m, taken | set(a.axes))
    taken.add(m)
    if k in taken or k == n:  # the contraction axis disappears: rename it rather than the result's axis
        k = g.alt(k, taken | set(a.axes) | set(b.axes))
    taken.add(k)
    if n is not None and n in taken:
        n = g.alt(n, taken | set(b.axes))
    a = g.rename(a, right_aligned(a.axes[:-2], batch) + [m, k])
    b = g.rename(b, right_aligned(b.axes[:-2], batch) + [k, n])
    tsopt_dims = [x for x in a.dims if x != k] + [x for x in b.dims if x not in a.dims]
    out_axes = batch + [m, n]
    y = g.op(hint, "matmul", [a, b], out_axes, a.dtype, over=k)
    return g.in_order(y, tsopt_dims)


def einsum(cx, equation, operands):
    """torch.einsum of one or two operands: each subscript letter one named axis (letters whose axes share a
    name, as axes of one size do, are told apart); a letter only one operand has and the output lacks is
    summed there first; the two operands meet in a matmul over a letter both have and the output lacks (the
    others such summed after it), or, with none, in a product broadcast over both; then the output's order.
    Ellipses and repeated letters in one operand (diagonals) are refused."""
    g, eq = cx.g, equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if "." in eq or len(subs) != len(operands) or len(operands) not in (1, 2):
        raise ExportError("einsum %r: tsopt maps one or two operands without an ellipsis" % equation)
    if not arrow:  # implicit output: the letters that appear once, in alphabetical order
        rhs = "".join(sorted(c for c in set(lhs) - {","} if lhs.count(c) == 1))
    if any(len(set(sub)) != len(sub) for sub in subs):
        raise ExportError("einsum %r: a letter repeated in one operand (a diagonal) has no tsopt op" % equation)
    name, taken = {}, set()
    for sub, x in zip(subs, operands):
        for letter, a in zip(sub, x.axes):
            if a is not None and letter not in name:
                name[letter] = g.alt(a, taken) if a in taken else a
                taken.add(name[letter])
    ops = []
    for i, (sub, x) in enumerate(zip(subs, operands)):
        y = g.rename(x, [name[c] if a is not None else None for c, a in zip(sub, x.axes)])
        dims = list(y.dims)
        others = "".join(subs[:i] + subs[i + 1:])
        for c in sub:
            if c in name and c not in rhs and c not in others and name[c] in dims:
                dims.remove(name[c])
                y = g.op(cx.hint, "reduce_sum", [y], list(dims), cx.dtype, axis=name[c])
        ops.append(Val(y.name, list(dims), cx.dtype))
    dims = list(ops[0].dims)
    y = ops[0]
    if len(ops) == 2:
        a, b = ops
        shared = [d for d in a.dims if d in b.dims and d not in [name.get(c) for c in rhs]]
        if shared:
            dims = [d for d in a.dims if d != shared[0]] + [d for d in b.dims if d not in a.dims]
            y = g.op(cx.hint, "matmul", [a, b], list(dims), cx.dtype, over=shared[0])
            for d in shared[1:]:
                dims.remove(d)
                y = g.op(cx.hint, "reduce_sum", [y], list(dims), cx.dtype, axis=d)
        else:
            dims = a.dims + [d for d in b.dims if d not in a.dims]
            y = g.op(cx.hint, "mul", [g.expand_to(a, dims), g.expand_to(b, dims)], list(dims), cx.dtype)
    return g.in_order(Val(y.name, [name.get(c) for c in rhs], cx.dtype), dims)


def conv_pointwise(transposed):
    """conv1d/2d/3d (and conv_transpose, aten.convolution): see conv_nd."""
    def handler(cx, x, w, bias=None, stride=1, padding=0, *rest):
        xs, ws = cx.in_shape(0), cx.in_shape(1)
        nd = len(ws) - 2
        if transposed:  # conv_transposeNd(input, weight, bias, stride, padding, output_padding, groups, dilation)
            output_padding, groups = (rest[0] if rest else 0), (rest[1] if len(rest) > 1 else 1)
            dilation = rest[2] if len(rest) > 2 else 1
        else:  # convNd(input, weight, bias, stride, padding, dilation, groups)
            output_padding, groups = 0, (rest[1] if len(rest) > 1 else 1)
            dilation = rest[0] if rest else 1
        return conv_nd(cx, x, w, bias, stride, padding, dilation, output_padding, groups, transposed, nd, xs, ws)
    return handler


def convolution(cx, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """aten.convolution: as conv_pointwise."""
    xs, ws = cx.in_shape(0), cx.in_shape(1)
    return conv_nd(cx, x, w, bias, stride, padding, dilation, output_padding, groups, transposed, len(ws) - 2, xs, ws)


def conv_nd(cx, x, w, bias, stride, padding, dilation, output_padding, groups, transposed, nd, xs, ws):
    """A convolution without padding: with a kernel of size 1 in every dim and one group, a GEMM over the
    channels reading x channel-first in place (pointwise_conv); otherwise windows of x (`window` views), laid
    out as [n, groups, positions, channels · taps] by one copy (im2col) and contracted with the weight by a
    GEMM batched over the groups (window_conv). Padding, and transposed convolutions with a larger kernel or a
    stride, are refused."""
    kernel, st, dil = ws[2:], per_dim(stride, nd), per_dim(dilation, nd)
    pad = padding if isinstance(padding, str) else per_dim(padding, nd)
    pointwise = all(k == 1 for k in kernel)
    zero_pad = pad == "valid" or (pad == "same" and pointwise) or (not isinstance(pad, str) and not any(pad))
    if not zero_pad or any(per_dim(output_padding, nd)) or \
            (transposed and (not pointwise or groups != 1 or any(s != 1 for s in st))):
        raise ExportError("a convolution with kernel %s, stride %s, padding %s, groups %s%s: tsopt maps convolutions "
                          "without padding (and transposed ones of kernel 1, stride 1, one group); it has no padding "
                          "op" % (kernel, st, pad, groups, " (transposed)" if transposed else ""))
    if pointwise and groups == 1:
        return pointwise_conv(cx, x, w, bias, st, nd, xs, transposed)
    if groups == xs[-nd - 1] == ws[0] and math.prod(kernel) <= SMALL_WINDOW_TAPS:
        return depthwise_taps(cx, x, w, bias, st, dil, nd, xs, ws)
    return window_conv(cx, x, w, bias, st, dil, groups, nd, xs, ws)


def depthwise_taps(cx, x, w, bias, st, dil, nd, xs, ws):
    """A depthwise convolution (a group per channel, one output channel each) of few taps as pool_taps writes a
    pool: Σ over the taps of the tap's weight per channel times x's strided slice for that tap, + the bias — one
    elementwise kernel, where the im2col copy would write taps× the input."""
    g, rank = cx.g, len(xs)
    ch = rank - nd - 1
    out_sp = cx.shape[ch + 1:]
    acc = None
    for taps, v in tap_slices(g, x, ch + 1, ws[2:], st, dil, out_sp):
        wt = w
        for j, t in enumerate(taps):
            wt = g.slice(wt, 2 + j, t, t + 1, 1)
        wc = g.rename(Val(wt.name, [wt.axes[0]], wt.dtype), [x.axes[ch]])
        wv = Val(wc.name, [None] * ch + [x.axes[ch]] + [None] * nd, w.dtype)
        term = g.elementwise(cx.hint, "mul", [v, wv], cx.shape, cx.dtype)
        acc = term if acc is None else g.elementwise(cx.hint, "add", [acc, term], cx.shape, cx.dtype)
    if bias is not None:
        b = g.rename(bias, [x.axes[ch]])
        acc = g.elementwise(cx.hint, "add", [acc, Val(b.name, [None] * ch + [x.axes[ch]] + [None] * nd, bias.dtype)],
                            cx.shape, cx.dtype)
    return acc


def window_conv(cx, x, w, bias, st, dil, groups, nd, xs, ws):
    """Σ_{c, taps} W[g, o, c, taps]·x[n, g, c, windows(taps)] (+ bias): x's spatial dims as windows, the
    windowed channels and taps merged into one contraction axis by a reshape (one copy: the im2col matrix), the
    weight [O, C/groups, *kernel] seen as [groups, O/groups, C/groups · Π kernel] in place; the GEMM's result
    [groups, O/groups, n, positions] read back as [n, O, *positions]."""
    g, batched = cx.g, len(xs) == nd + 2
    ch, out_sp = (1 if batched else 0), cx.shape[(2 if batched else 1):]
    cg, og = xs[ch] // groups, ws[0] // groups
    if groups > 1:  # channels split into (groups, channels of a group): a view
        x = g.reshape(x, xs[:ch] + [groups, cg] + xs[ch + 1:])
    first = ch + (2 if groups > 1 else 1)  # the first spatial dim
    for j in range(nd):
        x = g.window(x, first + 2 * j, out_sp[j], ws[2 + j], st[j], dil[j])
    lead = x.axes[:first - 1]  # n, groups (None where absent)
    cg_ax, outs, taps = x.axes[first - 1], x.axes[first::2], x.axes[first + 1::2]
    k_axes = [a for a in [cg_ax] + taps if a is not None]
    order = [a for a in lead + outs if a is not None] + k_axes
    xp = g.op(x.name + "_t", "permute", [x], order, x.dtype, order=order) if order != x.dims else x
    k_ax = k_axes[0] if len(k_axes) == 1 else g.fresh_axis(math.prod(g.size(a) for a in k_axes))
    pos = [a for a in outs if a is not None]  # the output positions, one axis (the GEMM's rows or columns)
    p_ax = pos[0] if len(pos) == 1 else g.fresh_axis(math.prod(g.size(a) for a in pos)) if pos else None
    rows = [a for a in lead + [p_ax] if a is not None]
    xm = g.op(x.name + "_cols", "reshape", [xp], rows + [k_ax], x.dtype, shape=rows + [k_ax]) \
        if len(k_axes) > 1 or len(pos) > 1 else xp
    g_ax = lead[-1] if groups > 1 else None
    o_ax = g.fresh_axis(og) if og > 1 else None
    w_axes = [a for a in (g_ax, o_ax, k_ax) if a is not None]
    wm = g.op(w.name + "_m", "reshape", [w], w_axes, w.dtype, shape=w_axes)
    n_ax = lead[0] if batched else None
    if o_ax is None and n_ax is not None:  # one output channel a group (depthwise): the weight broadcast over n, so
        wm = g.expand_to(wm, [n_ax] + w_axes)  # that the per-position dot products come out [n, g, p], in place
        w_axes = [n_ax] + w_axes
    y_dims = [a for a in w_axes if a != k_ax] + [a for a in rows if a not in w_axes]
    y = g.op(cx.hint, "matmul", [wm, xm], y_dims, cx.dtype, over=k_ax)
    o_merged = g.axis_for(ws[0], static=True) if groups > 1 and og > 1 else (g_ax or o_ax)
    if o_merged in y_dims and o_merged not in (g_ax, o_ax):
        o_merged = g.alt(o_merged, set(y_dims))
    pt = [a for a in (n_ax, g_ax, o_ax, p_ax) if a is not None]
    y = g.op(cx.hint + "_t", "permute", [y], pt, cx.dtype, order=pt) if pt != y_dims else y
    final = [n_ax] if batched else []
    # the output's positions as axes of their own when p is split back: the windows' axes are also the copy's, whose
    # view of x does not nest them, which would keep the checker from merging them again after the GEMM (a global
    # average pool over [oh, ow] as one reduction)
    final += [o_merged] + ([g.fresh_axis(g.size(a)) if a is not None else None for a in outs] if len(pos) > 1 else list(outs))
    if (groups > 1 and og > 1) or len(pos) > 1:
        y = g.op(cx.hint + "_o", "reshape", [y], final, cx.dtype, shape=[a for a in final if a is not None])
    else:
        y = Val(y.name, final, cx.dtype)
    if bias is not None:
        b = g.rename(bias, [o_merged])
        y = g.elementwise(cx.hint, "add", [y, Val(b.name, [None] * ch + [o_merged] + [None] * nd, bias.dtype)],
                          cx.shape, cx.dtype)
    return y


def pointwise_conv(cx, x, w, bias, st, nd, xs, transposed):
    """Σ_c W[o, c]·x[n, c, *S] (W[c, o] transposed), S strided by the stride, + a bias per channel: a GEMM over
    the channels, which the plans read channel-first in place."""
    g, batched = cx.g, len(xs) == nd + 2
    ch = 1 if batched else 0
    merged = nd > 1 and all(s == 1 for s in st)
    if merged:  # the spatial dims nest: one axis, so that the GEMM reads x[n] as a [c, h·w] matrix in place
        x = g.reshape(x, xs[:ch + 1] + [math.prod(xs[ch + 1:])])
    else:
        for j, s in enumerate(st):
            if s > 1:
                d = ch + 1 + j
                x = g.slice(x, d, 0, xs[d], s)
    space = "p" if merged else "pqr"[:nd]
    lead = "n" if batched else ""
    w2 = Val(w.name, w.axes[:2], w.dtype)  # [O, C] or, transposed, [C, O] (the kernel's dims are of size 1)
    y = einsum(cx, "%s,%sc%s->%so%s" % ("co" if transposed else "oc", lead, space, lead, space), [w2, x])
    if bias is not None:
        b = g.rename(bias, [y.axes[ch]])
        shape = cx.shape[:ch + 1] + [math.prod(cx.shape[ch + 1:])] if merged else cx.shape
        y = g.elementwise(cx.hint, "add", [y, Val(b.name, [None] * ch + [y.axes[ch]] + [None] * len(space), bias.dtype)],
                          shape, cx.dtype)
    return g.reshape(y, cx.shape) if merged else y


def matmul(cx, a, b):
    return contract(cx, a, b)


# Handlers that take Vals with compound dims (graph.py) as they are: views, copies, and the products, whose
# rows may be one (contract merges the others first).
COMPOUND_SAFE = {"view", "reshape", "_unsafe_view", "flatten", "unflatten", "view_as", "reshape_as", "squeeze",
                 "unsqueeze", "permute", "transpose", "t", "numpy_T", "clone", "contiguous", "alias", "detach",
                 "detach_", "lift_fresh_copy", "_assert_tensor_metadata", "linear", "mm", "bmm", "matmul", "addmm",
                 "scaled_dot_product_attention"}


def linear(cx, x, w, bias=None):
    wt = cx.g.permute(w, [1, 0])
    y = contract(cx, x, wt)
    return y if bias is None else cx.g.elementwise(cx.hint, "add", [y, bias], cx.shape, cx.dtype)


def add_scaled(cx, c, y, beta, alpha):
    """beta·c + alpha·y (ATen's addmm family; beta 0 ignores c, as ATen does, NaN and ∞ in it included)."""
    y = scaled(cx, y, alpha) if alpha != 1 else y
    if beta == 0:
        return y
    return cx.g.elementwise(cx.hint, "add", [y, scaled(cx, c, beta) if beta != 1 else c], cx.shape, cx.dtype)


def addmm(cx, bias, a, b, beta=1, alpha=1):
    """beta·bias + alpha·(a @ b); also baddbmm (batched) and addmv (a matrix times a vector)."""
    return add_scaled(cx, bias, contract(cx, a, b), beta, alpha)


def addbmm(cx, c, a, b, beta=1, alpha=1):
    """beta·c + alpha·Σ_i a[i] @ b[i]: the batched product summed over the batch."""
    sa, sb = cx.in_shape(1), cx.in_shape(2)
    y = contract(cx, a, b, [sa[0], sa[1], sb[2]])
    return add_scaled(cx, c, reduce_over(cx, "reduce_sum", y, [0], False), beta, alpha)


def outer(cx, a, b):
    """a[i]·b[j]"""
    return ew(cx, "mul", Val(a.name, [a.axes[0], None], a.dtype), Val(b.name, [None, b.axes[0]], b.dtype))


# ---- normalisation --------------------------------------------------------------------------------------


def norm_axis(x, normalized_shape, what):
    if len(normalized_shape) != 1:
        raise ExportError("%s over %d dims; tsopt normalises over one axis" % (what, len(normalized_shape)))
    return x.axes[-1]


def layer_norm(cx, x, normalized_shape, weight=None, bias=None, eps=1e-5, *rest):
    k = len(normalized_shape)
    if k > 1:  # over several trailing dims (KernelBench's LayerNorm over [features, h, w]): over them merged
        g, shape = cx.g, cx.in_shape(0)
        flat = shape[:-k] + [math.prod(shape[-k:])]
        merged = [None if p is None else g.solid(g.reshape(p, [flat[-1]], compound=True)) for p in (weight, bias)]
        y = layer_norm(cx, g.solid(g.reshape(x, flat, compound=True)), [flat[-1]], merged[0], merged[1], eps)
        return g.reshape(y, shape, compound=True)
    a = norm_axis(x, normalized_shape, "layer_norm")
    args = [x] + [cx.g.rename(p, [a]) for p in (weight, bias) if p is not None]
    if weight is None and bias is not None:
        raise ExportError("layer_norm with a bias and no weight")
    return cx.g.op(cx.hint, "layernorm", args, x.axes, x.dtype, axis=a, eps=float(eps))


def native_layer_norm(cx, x, normalized_shape, weight, bias, eps):
    return (layer_norm(cx, x, normalized_shape, weight, bias, eps), None, None)


def rms_norm(cx, x, normalized_shape, weight=None, eps=None):
    a = norm_axis(x, normalized_shape, "rms_norm")
    if eps is None:
        eps = {"fp32": 1.1920928955078125e-07, "fp16": 0.0009765625, "bf16": 0.0078125}[x.dtype]
    args = [x] + ([cx.g.rename(weight, [a])] if weight is not None else [])
    return cx.g.op(cx.hint, "rmsnorm", args, x.axes, x.dtype, axis=a, eps=float(eps))


# A group's row length (elements) up to which group_norm keeps the LayerNorm row kernel and a per-channel map.
GROUP_ROW_CACHED = 65536


def group_norm(cx, x, groups, weight=None, bias=None, eps=1e-5, *rest):
    """x [N, C, *S]: layernorm over (C/G · S) of [N, G, C/G · S], then the per-channel weight and bias."""
    g = cx.g
    shape = cx.in_shape(0)
    n, c = shape[0], shape[1]
    rest_n = 1
    for s in shape[2:]:
        rest_n *= s
    grouped = g.reshape(x, [n, groups, c // groups * rest_n])
    if (weight is None and bias is None) or c // groups * rest_n <= GROUP_ROW_CACHED:
        y = g.op(cx.hint, "layernorm", [grouped], grouped.axes, x.dtype, axis=grouped.axes[-1], eps=float(eps))
        return channel_affine(cx, g.rename(g.reshape(y, shape), x.axes), x, weight, bias)
    # Groups longer than a row kernel caches, with an affine part: each group's statistics over its row, then one
    # elementwise pass over x with its channels split into [groups, channels of a group] (a view; the spatial dims
    # kept) that normalises and applies the weight and bias seen the same way — where the row kernel writing the
    # normalised rows in passes was followed by a map reading them again for the per-channel affine (the channel a
    # division of the row position): x read three times and written once instead of read three times, written,
    # read and written (GroupNorm(8, 64) over [16, 64, 256, 256] fp32: 0.594 → 0.392 ms predicted; at rows of 32K
    # the cached row kernel and the map are the faster, 0.028 against 0.033).
    row = grouped.axes[-1]
    mu = g.op(cx.hint, "mean", [grouped], grouped.axes[:2], x.dtype, axis=row)
    xc = g.op(cx.hint, "sub", [grouped, mu], grouped.axes, x.dtype)
    var = g.op(cx.hint, "mean", [g.op(cx.hint, "mul", [xc, xc], grouped.axes, x.dtype)], grouped.axes[:2], x.dtype, axis=row)
    inv = g.op(cx.hint, "rsqrt", [g.op(cx.hint, "add", [var, float(eps)], var.axes, x.dtype)], var.axes, x.dtype)
    split = g.reshape(x, [n, groups, c // groups] + list(shape[2:]))
    lead = split.axes[:3]
    y = g.op(cx.hint, "mul", [g.op(cx.hint, "sub", [split, mu], split.axes, x.dtype), inv], split.axes, x.dtype)
    for op, p in (("mul", weight), ("add", bias)):
        if p is not None:
            pv = g.rename(g.reshape(p, [groups, c // groups]), lead[1:3])
            y = g.op(cx.hint, op, [y, pv], split.axes, x.dtype)
    return g.rename(g.reshape(y, shape), x.axes)


def per_channel(cx, p, x):
    """A [C] parameter (a norm's weight, bias or running statistic) as a Val broadcast along x's other dims."""
    pr = cx.g.rename(p, [x.axes[1]])
    return Val(pr.name, [None, x.axes[1]] + [None] * (len(x.axes) - 2), p.dtype)


def channel_affine(cx, y, x, weight, bias):
    """y · weight + bias per channel (dim 1 of x; either may be None): a norm's affine part."""
    for op, p in (("mul", weight), ("add", bias)):
        if p is not None:
            y = cx.g.elementwise(cx.hint, op, [y, per_channel(cx, p, x)], cx.in_shape(0), x.dtype)
    return y


def channel_norm(cx, x, stat_dims, weight, bias, eps, mean=None, var=None):
    """(x − mean) · rsqrt(var + eps) · weight + bias per channel (dim 1): the statistics over stat_dims
    (biased variance), or the given running ones (eval-mode batch norm)."""
    g, shape, dt = cx.g, cx.in_shape(0), x.dtype
    if mean is None:
        mu = reduce_over(cx, "mean", x, stat_dims, True)
        xc = g.elementwise(cx.hint, "sub", [x, mu], shape, dt)
        var = reduce_over(cx, "mean", g.elementwise(cx.hint, "mul", [xc, xc], shape, dt), stat_dims, True)
    else:
        xc = g.elementwise(cx.hint, "sub", [x, per_channel(cx, mean, x)], shape, dt)
        var = per_channel(cx, var, x)
    inv = unary("rsqrt")(cx, g.op(cx.hint, "add", [var, float(eps)], var.axes, dt))
    return channel_affine(cx, g.elementwise(cx.hint, "mul", [xc, inv], shape, dt), x, weight, bias)


def batch_norm(cx, x, weight=None, bias=None, running_mean=None, running_var=None, training=False, momentum=0.1,
               eps=1e-5, *rest):
    """x [N, C, *S]: training (or no running statistics): per channel over N and S, as BatchNorm in a forward
    pass while training; the update of the running statistics is not part of the graph (export.py drops
    it). Eval: the running statistics."""
    if len(x.axes) < 2:
        raise ExportError("batch_norm of a tensor with fewer than 2 dims")
    if training or running_mean is None or running_var is None:
        return channel_norm(cx, x, [0] + list(range(2, len(x.axes))), weight, bias, eps)
    return channel_norm(cx, x, [], weight, bias, eps, running_mean, running_var)


def instance_norm(cx, x, weight=None, bias=None, running_mean=None, running_var=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5, *rest):
    """x [N, C, *S]: per sample and channel over S."""
    if not use_input_stats:
        raise ExportError("instance_norm with running statistics (track_running_stats in eval mode)")
    if len(x.axes) < 3:
        raise ExportError("instance_norm of a tensor with fewer than 3 dims")
    return channel_norm(cx, x, list(range(2, len(x.axes))), weight, bias, eps)


def native_group_norm(cx, x, weight, bias, n, c, hw, groups, eps):
    return (group_norm(cx, x, groups, weight, bias, eps), None, None)


# ---- attention ------------------------------------------------------------------------------------------


def unrepeated_heads(g, x):
    """x [.., heads, L, d] whose heads dim is a compound (kv heads, r) broadcast over r — a GQA's K or V repeated
    for every query head of a group by HF's repeat_kv (expand, then reshape) or by repeat_interleave — as the
    tensor before the broadcast, its heads the kv heads alone (so that attention reads each kv head once, not a
    copy of it per query head); else None."""
    if len(x.axes) < 3 or not isinstance(x.axes[-3], tuple) or len(x.axes[-3]) != 2:
        return None
    kv_heads, r = x.axes[-3]
    made = g.producer.get(x.name)
    src = g.vals.get(made[1][0]) if made and made[0] == "expand" else None
    if src is None or r in src.dims or any(isinstance(e, tuple) for e in x.axes[:-3] + x.axes[-2:]):
        return None
    axes = x.axes[:-3] + [kv_heads] + x.axes[-2:]
    return Val(src.name, axes, x.dtype) if flat(axes) == src.dims else None


def sdpa(cx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """softmax(q·kᵀ·scale + mask)·v, as matmul, scale, where/add, softmax, matmul — the form tsopt's rules
    turn into streaming attention. GQA: q's heads split into (kv heads, group), k and v broadcast over group —
    also where k and v arrive repeated to q's heads (unrepeated_heads). Computed in the layout [batch, queries,
    heads, keys] (q seen through a permute), so that the result's heads merge and the usual
    transpose(1, 2).reshape after attention are views, not copies."""
    g = cx.g
    if dropout_p:
        raise ExportError("scaled_dot_product_attention with dropout_p=%g" % dropout_p)
    qs, ks = cx.in_shape(0), cx.in_shape(1)
    ku, vu = unrepeated_heads(g, k), unrepeated_heads(g, v)
    if ku is not None and vu is not None and g.size(k.axes[-3][0]) == g.size(v.axes[-3][0]):
        k, v, ks = ku, vu, ks[:-3] + [g.size(ku.axes[-3])] + ks[-2:]
    q, k, v = g.solid(q), g.solid(k), g.solid(v)
    attn_mask = g.solid(attn_mask) if attn_mask is not None else None
    sc = float(scale) if scale is not None else 1.0 / math.sqrt(qs[-1])
    gqa = len(qs) >= 3 and qs[-3] != ks[-3]
    orig_q = q
    if gqa:
        q = g.reshape(q, qs[:-3] + [ks[-3], qs[-3] // ks[-3]] + qs[-2:])
        k = Val(k.name, k.axes[:-2] + [None] + k.axes[-2:], k.dtype)
        v = Val(v.name, v.axes[:-2] + [None] + v.axes[-2:], v.dtype)
    nb = len(q.axes) - 2
    nheads = 2 if gqa else min(1, nb)
    pre = nb - nheads
    perm = list(range(pre)) + [nb] + list(range(pre, nb)) + [nb + 1]  # torch [.., heads, L, x] → layout
    ql = g.permute(q, perm)
    s = contract_layout(cx, ql, k, perm, "_scores")
    s = g.op(cx.hint + "_scaled", "scale", [s], s.axes, s.dtype, by=sc)
    lq, lk = ql.axes[pre], s.axes[-1]
    layout_shape = [g.size(a) if a is not None else 1 for a in s.axes]
    if is_causal:
        iq = g.op(cx.hint + "_qi", "iota", (), [lq], "fp32", axis=lq)
        ik = g.op(cx.hint + "_kj", "iota", (), [lk], "fp32", axis=lk)
        future = g.elementwise(cx.hint + "_future", "less_than", [Val(iq.name, [lq, None], "fp32"), ik],
                               [g.size(lq), g.size(lk)], "fp32")
        future = Val(future.name, [lq] + [None] * nheads + [lk], "fp32")
        s = g.elementwise(cx.hint + "_masked", "where", [future, -math.inf, s], layout_shape, s.dtype)
    if attn_mask is not None:
        full = [None] * (len(s.axes) - len(attn_mask.axes)) + attn_mask.axes
        torch_order = [s.axes[perm.index(i)] for i in range(len(perm))]
        m = g.permute(g.align(Val(attn_mask.name, full, attn_mask.dtype), torch_order), perm)
        if cx.arg_dtype(3) == "bool":
            s = g.elementwise(cx.hint + "_masked", "where", [m, s, -math.inf], layout_shape, s.dtype)
        else:
            s = g.elementwise(cx.hint + "_masked", "add", [s, m], layout_shape, s.dtype)
    p = g.op(cx.hint + "_p", "softmax", [s], s.axes, s.dtype, axis=lk)
    o = contract_layout(cx, p, v, perm, "_attn", transpose=False)
    o = g.permute(o, [perm.index(i) for i in range(len(perm))])  # back to PyTorch's order: a view
    if gqa:
        o = g.rename(g.reshape(o, cx.shape), orig_q.axes[:-1] + [o.axes[-1]])
    return o


def repeat_interleave(cx, x, repeats, dim=None, output_size=None):
    """x with each slice along dim repeated `repeats` times in place (slice j of the result is x's j // repeats):
    a broadcast over a new inner axis, merged with dim as a compound dim — attention reads a GQA's K and V so
    without a copy (unrepeated_heads); any other reader merges it (Graph.solid: a copy)."""
    if not isinstance(repeats, int) or dim is None:
        raise ExportError("repeat_interleave with a tensor of repeats or without a dim; tsopt maps a count of "
                          "repeats along one dim")
    g = cx.g
    d = dim % len(x.axes)
    r = g.axis_for(repeats, static=True)
    y = g.expand_to(Val(x.name, x.axes[:d + 1] + [None] + x.axes[d + 1:], x.dtype),
                    g.distinct(x.axes[:d + 1] + [r] + x.axes[d + 1:]))
    merged = tuple(atoms(y.axes[d]) + atoms(y.axes[d + 1]))
    return Val(y.name, y.axes[:d] + [merged if len(merged) > 1 else merged[0]] + y.axes[d + 2:], y.dtype)


def contract_layout(cx, a, b, perm, suffix, transpose=True):
    """a (layout order [pre, M, heads, K]) times b (PyTorch order [.., heads, N, K] when transpose, else
    [.., heads, K, N]) over K: the result in layout order [pre, M, heads, N]."""
    g = cx.g
    nb = len(perm) - 2
    k_axis = a.axes[-1]
    torch_batch = [a.axes[perm.index(i)] for i in range(nb)]  # a's batch names in PyTorch order
    bn = b.axes[-2] if transpose else b.axes[-1]
    taken = set(a.axes)
    if bn is not None and bn in taken:
        bn = g.alt(bn, taken | set(b.axes))
    names = right_aligned(b.axes[:-2], torch_batch) + ([bn, k_axis] if transpose else [k_axis, bn])
    b2 = g.rename(b, names)
    out = a.axes[:-1] + [bn]
    tsopt_dims = [x for x in a.dims if x != k_axis] + [x for x in b2.dims if x not in a.dims]
    y = g.op(cx.hint + suffix, "matmul", [a, b2], out, a.dtype, over=k_axis)
    return g.in_order(y, tsopt_dims)


# ---- sources --------------------------------------------------------------------------------------------


def arange(cx, *args, **kw):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    n = cx.shape[0]
    a = cx.g.axis_for(n)
    y = cx.g.op(cx.hint, "iota", (), [a], cx.dtype, axis=a, dtype=cx.dtype)
    if step != 1:
        y = scaled(cx, y, step)
    return ew(cx, "add", y, float(start)) if start else y


def full(cx, size, value, **kw):
    g = cx.g
    c = g.op(cx.hint, "constant", (), [], cx.dtype, value=float(value), dtype=cx.dtype)
    axes = g.distinct([None if s == 1 else g.axis_for(s) for s in cx.shape])
    return g.expand_to(Val(c.name, [None] * len(axes), cx.dtype), axes)


def full_like(value):
    """zeros_like / ones_like / full_like: the constant at x's shape (cx.shape is the result's, x's own)."""
    def handler(cx, x, *args, **kw):
        return full(cx, None, args[0] if value is None else value)
    return handler


def ones(cx, size, **kw):
    return full(cx, size, 1.0)


def zeros(cx, size, **kw):
    return full(cx, size, 0.0)


def triangle(upper):
    def handler(cx, x, diagonal=0):
        """tril keeps j ≤ i + k: zero where i + k < j; triu keeps j ≥ i + k: zero where j < i + k."""
        g = cx.g
        ai, aj = x.axes[-2], x.axes[-1]
        if ai is None or aj is None:
            raise ExportError("tril/triu of a dim of size 1")
        ii = g.op(cx.hint + "_i", "iota", (), [ai], "fp32", axis=ai)
        jj = g.op(cx.hint + "_j", "iota", (), [aj], "fp32", axis=aj)
        if diagonal:
            ii = g.op(cx.hint + "_i", "add", [ii, float(diagonal)], [ai], "fp32")
        sq = cx.shape[-2:]
        ii2 = Val(ii.name, [ai, None], "fp32")
        cut = g.elementwise(cx.hint + "_cut", "less_than", [jj, ii2] if upper else [ii2, jj], sq, "fp32")
        return g.elementwise(cx.hint, "where", [cut, 0.0, x], cx.shape, x.dtype)

    return handler


def diag(cx, x, diagonal=0):
    """torch.diag of a vector: the square matrix with it on the diagonal, where(i == j, x_i, 0) (written out;
    a product with it is a scale, contract); of a matrix, or off the main diagonal: refused."""
    g = cx.g
    if len(x.axes) != 1 or diagonal != 0:
        raise ExportError("diag of a %d-dim tensor or off the main diagonal; tsopt maps diag(vector)" % len(x.axes))
    if x.axes[0] is None:
        return Val(x.name, [None, None], x.dtype)
    i = x.axes[0]
    j = g.alt(i, {i})
    ii = g.op(cx.hint + "_i", "iota", (), [i], "fp32", axis=i)
    jj = g.op(cx.hint + "_j", "iota", (), [j], "fp32", axis=j)
    off = g.elementwise(cx.hint + "_off", "sub", [1.0, g.elementwise(cx.hint + "_ne", "add", [
        less(cx, Val(ii.name, [i, None], "fp32"), jj), less(cx, jj, Val(ii.name, [i, None], "fp32"))],
        cx.shape, "fp32")], cx.shape, "fp32")
    d = g.elementwise(cx.hint, "where", [off, Val(x.name, [i, None], x.dtype), 0.0], cx.shape, x.dtype)
    g.diag_of[d.name] = x
    return d


# ---- the table ------------------------------------------------------------------------------------------

HANDLERS = {
    "add": add, "sub": sub, "rsub": rsub, "mul": lambda cx, a, b: ew(cx, "mul", a, b), "div": div,
    "maximum": lambda cx, a, b: ew(cx, "max", a, b), "minimum": lambda cx, a, b: ew(cx, "min", a, b),
    "lt": less, "gt": lambda cx, a, b: less(cx, b, a), "ge": not_less, "le": lambda cx, a, b: not_less(cx, b, a),
    "where": where, "masked_fill": masked_fill, "pow": pow_, "eq": equal,
    "ne": lambda cx, a, b: ew(cx, "sub", 1.0, equal(cx, a, b)),
    "logical_not": lambda cx, m: ew(cx, "sub", 1.0, m), "bitwise_not": lambda cx, m: ew(cx, "sub", 1.0, m),
    **{k: boolean(k, lambda cx, a, b: ew(cx, "mul", a, b)) for k in ("logical_and", "bitwise_and", "__and__")},
    **{k: boolean(k, lambda cx, a, b: ew(cx, "max", a, b)) for k in ("logical_or", "bitwise_or", "__or__")},
    **{k: boolean(k, lambda cx, a, b: ew(cx, "abs", ew(cx, "sub", a, b))) for k in ("logical_xor", "bitwise_xor", "__xor__")},
    "neg": unary("neg"), "reciprocal": unary("recip"), "sqrt": unary("sqrt"), "rsqrt": unary("rsqrt"),
    "exp": unary("exp"), "exp2": unary("exp2"), "log": unary("log"), "log2": unary("log2"), "sin": unary("sin"),
    "cos": cos, "tanh": unary("tanh"), "sigmoid": unary("sigmoid"), "silu": unary("silu"), "relu": unary("relu"),
    "erf": unary("erf"), "abs": unary("abs"), "gelu": gelu, "leaky_relu": leaky_relu, "softplus": softplus,
    "square": lambda cx, x: pow_(cx, x, 2), "clamp": clamp, "clip": clamp,
    "clamp_min": lambda cx, x, lo: clamp(cx, x, lo, None), "clamp_max": lambda cx, x, hi: clamp(cx, x, None, hi),
    "hardtanh": lambda cx, x, lo=-1.0, hi=1.0: clamp(cx, x, lo, hi), "relu6": lambda cx, x: clamp(cx, x, 0, 6),
    "elu": elu, "selu": selu, "celu": celu, "hardsigmoid": hardsigmoid, "hardswish": hardswish, "mish": mish,
    "log_sigmoid": log_sigmoid, "amin": min_reduce, "threshold": threshold, "hardshrink": hardshrink,
    "softshrink": softshrink,
    "avg_pool1d": pool("mean", 1), "avg_pool2d": pool("mean", 2), "max_pool1d": pool("reduce_max", 1),
    "max_pool2d": pool("reduce_max", 2),
    "min": max_min(min_reduce, "min"), "max": max_min(reduce("reduce_max"), "max"),
    "_to_copy": cast, "to": cast, "type_as": cast, "clone": identity, "contiguous": identity, "alias": identity,
    "detach": identity, "detach_": identity, "lift_fresh_copy": identity, "dropout": dropout,
    "_assert_tensor_metadata": lambda cx, *a, **kw: None, "_assert_scalar": lambda cx, *a, **kw: None,
    "view": reshape, "reshape": reshape, "_unsafe_view": reshape, "flatten": reshape, "unflatten": reshape,
    "view_as": reshape, "reshape_as": reshape, "squeeze": reshape, "unsqueeze": reshape,
    "permute": permute, "transpose": transpose, "t": t, "numpy_T": t, "expand": expand, "expand_as": expand,
    "slice": slice_, "select": select, "split": split, "flip": flip, "split_with_sizes": split_sizes, "chunk": chunk, "cat": cat, "concat": cat, "stack": stack,
    "sum": reduce("reduce_sum"), "mean": reduce("mean"), "amax": reduce("reduce_max"), "var": var, "std": std,
    "linalg_vector_norm": vector_norm, "norm": lambda cx, x, p=2, dim=None, keepdim=False, **kw: vector_norm(
        cx, x, p, dim, keepdim), "glu": glu,
    "var_mean": var_mean, "sign": sign, "addcmul": addcmul, "expm1": expm1, "log1p": log1p,
    "logsumexp": logsumexp, "softmax": softmax, "_softmax": softmax, "log_softmax": log_softmax,
    "_log_softmax": log_softmax,
    "linear": linear, "mm": matmul, "bmm": matmul, "matmul": matmul, "addmm": addmm, "einsum": einsum,
    "layer_norm": layer_norm, "native_layer_norm": native_layer_norm, "rms_norm": rms_norm,
    "group_norm": group_norm, "native_group_norm": native_group_norm, "batch_norm": batch_norm,
    "instance_norm": instance_norm,
    "scaled_dot_product_attention": sdpa, "repeat_interleave": repeat_interleave,
    "diag": diag, "arange": arange, "full": full, "broadcast_tensors": broadcast_tensors,
    "cosine_similarity": cosine_similarity, "mse_loss": pointwise_loss(mse), "smooth_l1_loss": pointwise_loss(smooth_l1),
    "huber_loss": pointwise_loss(huber), "kl_div": kl_div,
    "conv1d": conv_pointwise(False), "conv2d": conv_pointwise(False), "conv3d": conv_pointwise(False),
    "conv_transpose1d": conv_pointwise(True), "conv_transpose2d": conv_pointwise(True),
    "conv_transpose3d": conv_pointwise(True), "convolution": convolution,
    "pairwise_distance": pairwise_distance,
    "mv": lambda cx, a, x: einsum(cx, "ij,j->i", [a, x]), "dot": lambda cx, a, b: einsum(cx, "i,i->", [a, b]),
    "addmv": lambda cx, c, a, x, beta=1, alpha=1: add_scaled(cx, c, einsum(cx, "ij,j->i", [a, x]), beta, alpha),
    "std_mean": std_mean, "linalg_norm": lambda cx, x, ord=None, dim=None, keepdim=False, **kw: vector_norm(
        cx, x, 2 if ord is None else ord, dim, keepdim),
    "linalg_matrix_norm": matrix_norm, "outer": outer, "ger": outer, "baddbmm": addmm, "addbmm": addbmm,
    "prelu": prelu, "_prelu_kernel": prelu, "rrelu": rrelu, "logit": logit, "log10": log10, "sinh": hyperbolic(-1.0),
    "cosh": hyperbolic(1.0), "tan": tan, "hypot": hypot, "lerp": lerp, "addcdiv": addcdiv,
    "special_erfc": lambda cx, x: ew(cx, "sub", 1.0, unary("erf")(cx, x)),
    "erfc": lambda cx, x: ew(cx, "sub", 1.0, unary("erf")(cx, x)), "special_expit": unary("sigmoid"),
    "binary_cross_entropy": binary_cross_entropy,
    "binary_cross_entropy_with_logits": binary_cross_entropy_with_logits, "soft_margin_loss": soft_margin_loss,
    "margin_ranking_loss": margin_ranking_loss, "triplet_margin_loss": triplet_margin_loss, "prod": prod, "ones": ones, "zeros": zeros,
    "zeros_like": full_like(0.0), "ones_like": full_like(1.0), "full_like": full_like(None), "tril": triangle(False), "triu": triangle(True),
}
