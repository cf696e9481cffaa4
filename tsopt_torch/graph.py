"""graph.py — the tsopt graph under construction: named axes, tensors tracked in PyTorch's dim order, YAML.

Not torch-specific (no torch import): aten.py maps ATen ops onto the emit helpers here, export.py drives it.

The invariant every helper keeps: a `Val` lists one entry per PyTorch dim, the axis name of that dim or None
for a size-1 dim, and the tsopt tensor it names has exactly the non-None axes in that order. Size-1 dims are
never tsopt axes (broadcasting is by name there, by position here), so a contiguous PyTorch tensor and its
tsopt buffer have the same layout. Ops whose tsopt result would come out in another order get a permute.

A PyTorch dim that merges several (`q.view(t, b * h, e)` in nn.MultiheadAttention) is a compound entry: the
tuple of the axes it merges, outer first, which the tsopt tensor keeps as separate axes (`Val.dims` lists them
flat). Nothing is emitted for the merge, so a later view that splits the dim back (`.view(b, h, t, e)`), a
permute or a matmul whose rows it is needs no copy, where a merged tsopt axis over a permuted tensor would.
Handlers that need one axis per dim see the Val made `solid` first (export.py): the merge emitted then.
"""

import math
import re


class ExportError(Exception):
    """A module the importer cannot express; the message names the ATen op and the source line."""


def atoms(entry):
    """The tsopt axes of one Val entry: none for a size-1 dim, the tuple's for a compound dim."""
    return [] if entry is None else list(entry) if isinstance(entry, tuple) else [entry]


def flat(entries):
    """The tsopt axes of a list of Val entries, in order."""
    return [a for e in entries for a in atoms(e)]


class Val:
    """A tensor in the graph: YAML name, axis per PyTorch dim (None: size 1; a tuple: a compound dim),
    dtype (fp32, fp16, bf16)."""

    def __init__(self, name, axes, dtype):
        self.name, self.axes, self.dtype = name, list(axes), dtype

    @property
    def dims(self):
        return flat(self.axes)

    @property
    def compound(self):
        return any(isinstance(e, tuple) for e in self.axes)


def fmt(x):
    """A number as tsopt reads it."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(float(x))


class Graph:
    """Axes, inputs and ops of one YAML graph, with the view and alignment helpers the ATen table uses."""

    def __init__(self, axis_names=None, dynamic=None):
        self.axis_names = dict(axis_names or {})  # size → name the user gave
        self.dynamic = dict(dynamic or {})        # name → typical size
        self.axes = {}                            # name → size or ("like", base)
        self.inputs, self.ops, self.outputs = [], [], []
        self.producer = {}                        # op name → (op, argument names, attributes)
        self.dtypes = {}                          # input or op name → dtype
        self.vals = {}                            # input or op name → its Val as made
        self.diag_of = {}                         # a diag(v) matrix's name → v (aten.py: products scale)
        self.used = set()

    # ---- names --------------------------------------------------------------------------------------
    def fresh(self, base):
        base = re.sub(r"\W", "_", base) or "t"
        if base[0].isdigit():
            base = "t" + base
        name, i = base, 1
        while name in self.used:
            i += 1
            name = "%s_%d" % (base, i)
        self.used.add(name)
        return name

    def axis_for(self, size, static=False):
        """The axis of this size as the user named it (a dynamic one unless static), else n<size>."""
        name = self.axis_names.get(size)
        if name is None or (static and name in self.dynamic):
            name = "n%d" % size
        self._declare(name, size)
        return name

    def _declare(self, name, size):
        if name not in self.axes:
            self.axes[name] = size

    def size(self, name):
        if isinstance(name, tuple):  # a compound dim
            return math.prod(self.size(a) for a in name)
        s = self.axes[name]
        return self.size(s[1]) if isinstance(s, tuple) else s

    def root(self, name):
        s = self.axes[name]
        return self.root(s[1]) if isinstance(s, tuple) else name

    def alt(self, name, avoid):
        """Another axis of the same size as `name`, tied to it ({like: name}), not in `avoid`."""
        i = 2
        while True:
            cand = "%s_%d" % (name, i)
            if cand not in avoid:
                if cand not in self.axes:
                    self.axes[cand] = ("like", name)
                return cand
            i += 1

    def distinct(self, names):
        """names with repeats replaced by tied alternatives (a tensor's axes must be distinct)."""
        out = []
        for a in names:
            if a is not None and a in out:
                a = self.alt(a, set(out) | set(names))
            out.append(a)
        return out

    def is_dynamic(self, name):
        return self.root(name) in self.dynamic

    # ---- emission -----------------------------------------------------------------------------------
    def add_input(self, hint, axes, dtype):
        name = self.fresh(hint)
        self.inputs.append((name, dtype, [a for a in axes if a is not None]))
        self.dtypes[name] = dtype
        self.vals[name] = Val(name, axes, dtype)
        return Val(name, axes, dtype)

    def op(self, hint, op, args=(), axes=(), vtype="fp32", **attrs):
        """Appends {name, op, args, attrs}; returns the Val with `axes` (PyTorch order, None for size 1) and
        dtype vtype."""
        name = self.fresh(hint)
        self.ops.append((name, op, [a.name if isinstance(a, Val) else fmt(a) for a in args], attrs))
        self.producer[name] = (op, self.ops[-1][2], attrs)
        self.dtypes[name] = vtype
        self.vals[name] = Val(name, axes, vtype)
        return Val(name, axes, vtype)

    def readers(self, name):
        """How many ops emitted so far read the tensor `name`."""
        return sum(args.count(name) for _, _, args, _ in self.ops)

    def dtype_of(self, name):
        """The dtype of a named tensor (an input or an op's result), or None."""
        return self.dtypes.get(name)

    def to_yaml(self, graph_name, header=""):
        lines = [header] if header else []
        lines.append("graph: %s" % graph_name)
        lines.append("axes:")
        for name, s in self.axes.items():
            if isinstance(s, tuple):
                lines.append("  %s: {like: %s}" % (name, s[1]))
            elif name in self.dynamic:
                lines.append("  %s: {dynamic: true, typical: %d}" % (name, self.dynamic[name]))
            else:
                lines.append("  %s: %d" % (name, s))
        lines.append("inputs:")
        for name, dtype, axes in self.inputs:
            lines.append("  %s: {dtype: %s, shape: [%s]}" % (name, dtype, ", ".join(axes)))
        lines.append("ops:")
        live = set(self.outputs)  # ops no output needs (one a rewrite replaced) are left out
        for name, _, args, _ in reversed(self.ops):
            if name in live:
                live.update(args)
        for name, op, args, attrs in self.ops:
            if name not in live:
                continue
            parts = ["name: %s" % name, "op: %s" % op]
            if args:
                parts.append("args: [%s]" % ", ".join(args))
            for k, v in attrs.items():
                if isinstance(v, (list, tuple)):
                    v = "[%s]" % ", ".join(v)
                elif isinstance(v, float):
                    v = fmt(v)
                parts.append("%s: %s" % (k, v))
            lines.append("  - {%s}" % ", ".join(parts))
        lines.append("outputs: [%s]" % ", ".join(self.outputs))
        return "\n".join(lines) + "\n"

    # ---- views --------------------------------------------------------------------------------------
    def rename(self, x, axes):
        """x seen with other axis names (same sizes, positions): a reshape, or x itself."""
        axes = list(axes)
        if flat(axes) == x.dims:
            return Val(x.name, axes, x.dtype)
        for a, b in zip(x.dims, flat(axes)):
            if a != b and (self.is_dynamic(a) or self.is_dynamic(b)) and self.root(a) != self.root(b):
                raise ExportError("axis '%s' is dynamic and would be renamed to '%s'" % (a, b))
        return self.op(x.name + "_as", "reshape", [x], axes, x.dtype, shape=flat(axes))

    def solid(self, x, keep=None):
        """x with each compound dim but the one at position `keep` merged into one tsopt axis (a reshape: a copy
        where the merged axes do not nest in memory), or x itself when there is none."""
        if not isinstance(x, Val) or not any(isinstance(e, tuple) for i, e in enumerate(x.axes) if i != keep):
            return x
        axes = [self.axis_for(self.size(e), static=True) if isinstance(e, tuple) and i != keep else e
                for i, e in enumerate(x.axes)]
        it, rebuilt = iter(self.distinct(flat(axes))), []
        for e in axes:
            got = [next(it) for _ in atoms(e)]
            rebuilt.append(None if e is None else tuple(got) if isinstance(e, tuple) else got[0])
        return self.op(x.name + "_r", "reshape", [x], rebuilt, x.dtype, shape=flat(rebuilt))

    def permute(self, x, order):
        """x with its PyTorch dims permuted (order: the new dim i is old dim order[i])."""
        axes = [x.axes[i] for i in order]
        y = Val(x.name, axes, x.dtype)
        if y.dims == x.dims:
            return y
        return self.op(x.name + "_t", "permute", [x], axes, x.dtype, order=y.dims)

    def in_order(self, x, tsopt_dims):
        """x's tsopt tensor came out with dims tsopt_dims; permute it into PyTorch order when they differ."""
        if list(tsopt_dims) == x.dims:
            return x
        return self.op(x.name + "_t", "permute", [Val(x.name, tsopt_dims, x.dtype)], x.axes, x.dtype,
                       order=x.dims)

    def expand_to(self, x, axes):
        """x broadcast to `axes` (a superset of its dims, PyTorch order)."""
        y = Val(x.name, axes, x.dtype)
        if y.dims == x.dims:
            return y
        return self.op(x.name + "_b", "expand", [x], axes, x.dtype, shape=y.dims)

    def refine(self, x, tgt):
        """The pieces x's axes would be cut into for target sizes tgt (size-1 dims left out): from the inner end,
        every boundary of either list, as (piece sizes outer first, per axis of x its piece count). None when
        the boundaries do not nest (a size of one list neither divides nor is divided by the other's), or a
        dynamic axis would be cut or joined."""
        dims = x.dims
        sizes = [self.size(a) for a in dims]
        if math.prod(sizes) != math.prod(tgt):
            return None
        dyn = [self.is_dynamic(a) for a in dims]
        bounds = set()
        for seq in (sizes, tgt):
            acc = 1
            for v in reversed(seq):
                acc *= v
                bounds.add(acc)
        cuts = sorted(bounds)
        for lo, hi in zip(cuts, cuts[1:]):
            if hi % lo:
                return None
        pieces = [cuts[0]] + [hi // lo for lo, hi in zip(cuts, cuts[1:])]  # inner first
        pieces.reverse()
        counts, i = [], 0
        for a, v in zip(dims, sizes):
            n, have = 0, 1
            while have < v:
                have, i, n = have * pieces[i], i + 1, n + 1
            counts.append(n)
        i = 0  # a dynamic axis must be a target dim of its own, neither cut nor joined
        for v in tgt:
            first, have = i, 1
            while have < v:
                have, i = have * pieces[i], i + 1
            run = [j for j, c in enumerate(counts) if first <= sum(counts[:j]) < i]
            if any(dyn[j] for j in run) and (i - first != 1 or any(counts[j] != 1 for j in run)):
                return None
        return pieces, counts

    def reshape(self, x, shape, compound=False):
        """x.reshape(shape). With compound (the view ops themselves), where the sizes nest (each target dim a
        run of x's axes or of pieces of one) no merge is emitted: a target dim of several axes is a compound
        dim; an axis cut into pieces is split by a reshape (a view). Otherwise (and for the handlers that
        reshape on their own and then name axes) x's dims are merged and split by one reshape, dims kept where
        a group of one source and one target dim keeps its size."""
        tgt = [s for s in shape if s != 1]
        ref = self.refine(x, tgt) if compound else None
        if ref is None:
            return self.reshape_emitted(self.solid(x), shape)
        pieces, counts = ref
        names, i = [], 0
        for a, n in zip(x.dims, counts):
            names += [a] if n == 1 else [self.axis_for(v, static=True) for v in pieces[i:i + n]]
            i += n
        if names != x.dims:  # an axis split: the pieces as axes of their own
            names = self.distinct(names)
            x = self.op(x.name + "_r", "reshape", [x], names, x.dtype, shape=names)
        entries, i = [], 0
        for v in tgt:
            run, have = [], 1
            while have < v:
                run.append(names[i])
                have, i = have * pieces[i], i + 1
            entries.append(run[0] if len(run) == 1 else tuple(run))
        it = iter(entries)
        return Val(x.name, [None if s == 1 else next(it) for s in shape], x.dtype)

    def reshape_emitted(self, x, shape):
        """x (no compound dims) reshaped by one emitted reshape: dims kept where a group of one source and one
        target dim keeps its size, new axes for the others."""
        src = [(a, self.size(a)) for a in x.dims]
        tgt = [s for s in shape if s != 1]
        names, si, ti = [], 0, 0
        while si < len(src) or ti < len(tgt):
            s0, t0 = si, ti
            sp = src[si][1] if si < len(src) else 1
            tp = tgt[ti] if ti < len(tgt) else 1
            si, ti = si + 1, ti + 1
            while sp != tp:
                if sp < tp and si < len(src):
                    sp, si = sp * src[si][1], si + 1
                elif ti < len(tgt):
                    tp, ti = tp * tgt[ti], ti + 1
                else:
                    raise ExportError("cannot reshape %s to %s" % ([s for _, s in src], list(shape)))
            if si - s0 == 1 and ti - t0 == 1:
                names.append(src[s0][0])
                continue
            for a, _ in src[s0:si]:
                if self.is_dynamic(a):
                    raise ExportError("cannot split or merge dynamic axis '%s'" % a)
            names += [self.axis_for(s, static=True) for s in tgt[t0:ti]]
        names = self.distinct(names)
        it = iter(names)
        axes = [None if s == 1 else next(it) for s in shape]
        if names == x.dims:
            return Val(x.name, axes, x.dtype)
        return self.op(x.name + "_r", "reshape", [x], axes, x.dtype, shape=names)

    def slice(self, x, dim, start, stop, step):
        """x[..., start:stop:step, ...] along PyTorch dim `dim` (start, stop already clipped, step > 0)."""
        n = len(range(start, stop, step))
        a = x.axes[dim]
        if a is None or (start == 0 and n == self.size(a)):
            return x
        if self.is_dynamic(a):
            raise ExportError("cannot slice dynamic axis '%s'" % a)
        if n == 1:
            new = self.fresh_axis(1)
        else:
            new = self.axis_for(n, static=True)
            if new in x.dims:
                new = self.alt(new, set(x.dims))
        axes = list(x.axes)
        axes[dim] = new
        y = self.op(x.name + "_s", "slice", [x], axes, x.dtype, axis=a, start=start, step=step, **{"as": new})
        if n == 1:  # a size-1 dim is not a tsopt axis: drop it
            axes[dim] = None
            y = self.op(x.name + "_s", "reshape", [y], axes, x.dtype, shape=[b for b in axes if b is not None])
        return y

    def window(self, x, dim, windows, taps, step, dilation):
        """PyTorch dim `dim` of x seen as `windows` sliding windows of `taps` elements (x.unfold with a dilation):
        two dims in its place, window i starting at element i·step, tap j dilation·j further on — a view (tsopt's
        `window`), the windows overlapping where step < taps·dilation. A dim of size 1 is left out (None)."""
        a = x.axes[dim]
        if taps == 1:  # one tap: the windows' first elements
            y = self.slice(x, dim, 0, (windows - 1) * step + 1, step)
            return Val(y.name, y.axes[:dim + 1] + [None] + y.axes[dim + 1:], y.dtype)
        if self.is_dynamic(a):
            raise ExportError("cannot take windows of dynamic axis '%s'" % a)
        out, tap = self.fresh_axis(windows), self.fresh_axis(taps)
        axes = x.axes[:dim] + [out, tap] + x.axes[dim + 1:]
        y = self.op(x.name + "_w", "window", [x], axes, x.dtype, axis=a, step=step, dilation=dilation,
                    **{"as": [out, tap]})
        if windows == 1:  # one window: its taps alone
            axes[dim] = None
            y = self.op(x.name + "_w", "reshape", [y], axes, x.dtype, shape=[b for b in axes if b is not None])
        return y

    def fresh_axis(self, size):
        """A new axis of this size, named apart from every axis and tensor."""
        name = self.fresh("one" if size == 1 else "n%d" % size)
        while name in self.axes:
            name = self.fresh(name)
        self.axes[name] = size
        return name

    # ---- alignment ----------------------------------------------------------------------------------
    def broadcast_axes(self, vals, shape):
        """The axes of an elementwise result of PyTorch shape `shape`: per dim, the first operand's name
        where an operand is not size 1 there (right-aligned), made distinct."""
        r = len(shape)
        out = [None] * r
        for p in range(r):
            if shape[p] == 1:
                continue
            for v in vals:
                q = p - (r - len(v.axes))
                if q >= 0 and v.axes[q] is not None:
                    out[p] = v.axes[q]
                    break
            if out[p] is None:
                out[p] = self.axis_for(shape[p])
        return self.distinct(out)

    def align(self, v, out_axes):
        """v renamed so that each of its dims has the result's name at its (right-aligned) position."""
        r = len(out_axes)
        want = [None if a is None else out_axes[i + r - len(v.axes)] for i, a in enumerate(v.axes)]
        return self.rename(v, want)

    def elementwise(self, hint, op, args, shape, dtype, **attrs):
        """An elementwise op over Vals and numbers, with PyTorch broadcasting: operands renamed to the
        result's axes, the first tensor operand broadcast to the full result (so tsopt's result order is
        PyTorch's)."""
        vals = [a for a in args if isinstance(a, Val)]
        out = self.broadcast_axes(vals, shape)
        full = flat(out)
        aligned, first = [], True
        for a in args:
            if isinstance(a, Val):
                a = self.align(a, out)
                if first and len(vals) > 1 and a.dims != full:
                    have = set(a.dims)
                    a = self.expand_to(Val(a.name, [x if set(atoms(x)) <= have else None for x in out], a.dtype), out)
                first = False
            aligned.append(a)
        return self.op(hint, op, aligned, out, dtype, **attrs)
