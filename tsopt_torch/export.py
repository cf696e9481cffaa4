"""export.py — an nn.Module and example inputs → torch.export → a tsopt YAML graph (the CLI and the API).

    python3 -m tsopt_torch.export MODULE.py:Class --args x=t:16,d:64 [--args ...] [--init JSON]
        [--axis f=172] [--dynamic t[=1024]] [--train] [--name NAME] [-o graph.yaml]

Each --args is one forward argument in order: its name, then per dim AXIS:SIZE (or just SIZE); a random
tensor of that shape is the example. Axes are named by size: a size the user named (--args, --axis) gets that
name everywhere, other sizes n<size>; give distinct axes distinct example sizes. Weights and buffers become
graph inputs after the forward arguments (named after their attribute path), so the header's C ABI takes
them in that order (--buffers computed: causal masks and RoPE tables, recognised by their values, become ops
instead). --dynamic marks an axis dynamic (typical size: the example size unless given). The forward pass is
exported in eval mode, or with --train in training mode (BatchNorm over the batch; the update of its running
statistics is left out of the graph, and said on stderr). Anything the importer cannot map is refused with
the ATen op and the source line (exit status 1).
"""

import argparse
import importlib.util
import json
import os
import sys

from .graph import ExportError, Graph, Val

try:
    import torch
except ImportError:  # the importer needs torch; the rest of tsopt does not
    torch = None

DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def tsopt_dtype(dt):
    """fp32 for float32 and for what tsopt computes as floats (bool masks, integer positions, float64)."""
    return DTYPES.get(str(dt).replace("torch.", ""), "fp32")


def source_line(node):
    """'file:line: code' of the user's frame that created node, or ''."""
    trace = node.meta.get("stack_trace") or ""
    lines = trace.splitlines()
    torch_dir = os.path.dirname(torch.__file__) if torch else "\0"
    best = ""
    for i, ln in enumerate(lines):
        ln = ln.strip()
        if ln.startswith('File "') and torch_dir not in ln:
            path = ln.split('"')[1]
            lineno = ln.split(", line ")[1].split(",")[0]
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            best = "%s:%s: %s" % (os.path.basename(path), lineno, code)
    return best


class Cx:
    """What a handler sees of the node it converts (aten.py)."""

    def __init__(self, g, node):
        self.g, self.node, self.hint = g, node, node.name
        val = node.meta.get("val")
        self.shape = list(val.shape) if hasattr(val, "shape") else []
        self.dtype = tsopt_dtype(val.dtype) if hasattr(val, "dtype") else "fp32"

    def _meta(self, i):
        a = self.node.args[i] if i < len(self.node.args) else None
        if isinstance(a, (list, tuple)):
            return [x.meta.get("val") for x in a]
        return a.meta.get("val") if hasattr(a, "meta") else None

    def in_shape(self, i):
        m = self._meta(i)
        return [list(x.shape) for x in m] if isinstance(m, list) else list(m.shape)

    def arg_dtype(self, i):
        m = self._meta(i)
        return str(m.dtype).replace("torch.", "") if m is not None else None


# A result a handler does not compute (None in its tuple): torch.export keeps the getitem of max.dim's
# indices even when nothing reads them, so only a use of it is an error.
UNCOMPUTED = object()


def op_key(target):
    packet = getattr(target, "_overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(target, "__name__", str(target))


def solid_args(g, a):
    """Handler arguments with every Val's compound dims merged (Graph.solid)."""
    if isinstance(a, list):
        return [solid_args(g, x) for x in a]
    return g.solid(a)


def convert_node(g, node, env):
    from . import aten

    def conv(a):
        if isinstance(a, torch.fx.Node):
            v = env[a.name]
            if v is UNCOMPUTED:
                raise ExportError("uses a result that tsopt does not compute (the indices of a max or min, the mean "
                                  "or rstd of a norm)")
            return v
        if isinstance(a, (list, tuple)):
            return [conv(x) for x in a]
        if isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            return None
        return a

    args = [conv(a) for a in node.args]
    kwargs = {k: conv(v) for k, v in node.kwargs.items() if k not in ("dtype", "device", "layout", "pin_memory",
                                                                     "memory_format", "non_blocking")}
    if node.target.__module__ == "_operator" and node.target.__name__ == "getitem":
        r = args[0][args[1]]
        return UNCOMPUTED if r is None else r  # an error only where something reads it
    key = op_key(node.target)
    h = aten.HANDLERS.get(key)
    inplace = h is None and key.endswith("_") and not key.startswith("_") and key[:-1] in aten.HANDLERS
    if inplace:  # relu_, mul_, ...: the op; its first operand's node names the result from here on
        h = aten.HANDLERS[key[:-1]]
    if h is None:
        raise ExportError("no tsopt mapping for this op")
    if key not in aten.COMPOUND_SAFE:  # one tsopt axis per dim (graph.py: compound dims)
        args, kwargs = solid_args(g, args), {k: solid_args(g, v) for k, v in kwargs.items()}
    try:
        result = h(Cx(g, node), *args, **kwargs)
        if inplace and node.args and isinstance(node.args[0], torch.fx.Node):
            env[node.args[0].name] = result
        return result
    except TypeError as e:
        raise ExportError("arguments the importer does not understand (%s)" % e)


def placeholder_val(g, name, val, user):
    """A graph input; weights and buffers (not user) never take a dynamic axis."""
    axes = g.distinct([None if s == 1 else g.axis_for(int(s), static=not user) for s in val.shape])
    return g.add_input(name, axes, tsopt_dtype(val.dtype))


def buffer_value(ep, spec):
    if spec.kind.name == "BUFFER":
        return ep.state_dict.get(spec.target, ep.constants.get(spec.target))
    return ep.constants.get(spec.target) if spec.kind.name == "CONSTANT_TENSOR" else None


# Buffer updates a forward pass in training mode makes that are no part of its output: BatchNorm's running
# statistics. export_program leaves them out of the graph (info["dropped"] names them); any other mutation of
# a buffer or an input is refused.
RUNNING_STATS = ("running_mean", "running_var", "num_batches_tracked")


def names_running_stat(target):
    """Whether a buffer's attribute path (bn.running_var) names a running statistic."""
    return (target or "").rsplit(".", 1)[-1] in RUNNING_STATS


def is_running_stat(spec):
    return spec.kind.name == "BUFFER_MUTATION" and names_running_stat(spec.target)


def needed_nodes(ep):
    """The names of the nodes the module's user outputs depend on (a running statistic's update is not)."""
    out_node = [n for n in ep.graph.nodes if n.op == "output"][0]
    todo = [r for r, spec in zip(out_node.args[0], ep.graph_signature.output_specs)
            if isinstance(r, torch.fx.Node) and not is_running_stat(spec)]
    seen = set()
    while todo:
        n = todo.pop()
        if n.name not in seen:
            seen.add(n.name)
            todo.extend(n.all_input_nodes)
    return seen


def drop_unread_running_stats(g, info):
    """Running statistics that no op reads (batch norm in training mode normalises by the batch's) are no
    graph inputs."""
    read = {a for _, _, args, _ in g.ops for a in args}
    unread = {n for n, kind, target, _ in info["inputs"]
              if kind == "BUFFER" and n not in read and names_running_stat(target)}
    g.inputs[:] = [i for i in g.inputs if i[0] not in unread]
    info["inputs"][:] = [i for i in info["inputs"] if i[0] not in unread]


def export_program(ep, axis_names=None, dynamic=None, graph_name="graph", header="", buffers="inputs"):
    """The YAML text of an ExportedProgram, and info: inputs as (yaml name, kind, target, torch shape) in
    YAML order, outputs as (yaml name, torch shape), computed: the buffers emitted as ops, dropped: the
    running statistics a training-mode forward would update (not in the graph; their buffers are inputs only
    where the output reads them). buffers: "inputs" (every buffer a graph input) or "computed" (causal masks
    and RoPE tables recognised by value become ops: buffers.py)."""
    if buffers not in ("inputs", "computed"):
        raise ExportError("buffers must be inputs or computed, not %r" % buffers)
    g = Graph({s: n for n, s in (axis_names or {}).items()}, dynamic)
    sig = ep.graph_signature
    nodes = {n.name: n for n in ep.graph.nodes}
    env, info = {}, {"inputs": [], "outputs": [], "computed": [], "dropped": []}
    needed = needed_nodes(ep)
    specs = sorted(sig.input_specs, key=lambda s: s.kind.name != "USER_INPUT")
    for spec in specs:
        node = nodes[spec.arg.name]
        if spec.kind.name not in ("USER_INPUT", "PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            raise ExportError("input %s of kind %s" % (spec.arg.name, spec.kind.name))
        hint = (spec.target if spec.target else spec.arg.name).replace(".", "_")
        if spec.kind.name == "CONSTANT_TENSOR":  # a number made a tensor in forward (torch.tensor(0.5)): a constant
            c = ep.constants.get(spec.target)
            if c is not None and c.dim() == 0:
                dt = tsopt_dtype(c.dtype)
                env[node.name] = g.op(hint, "constant", (), [], dt, value=float(c), dtype=dt)
                continue
        value = buffer_value(ep, spec) if buffers == "computed" else None
        if value is not None:
            from .buffers import computed

            v = computed(g, hint, value, tsopt_dtype(node.meta["val"].dtype))
            if v is not None:
                env[node.name] = v
                info["computed"].append(spec.target)
                continue
        v = placeholder_val(g, hint, node.meta["val"], spec.kind.name == "USER_INPUT")
        env[node.name] = v
        info["inputs"].append((v.name, spec.kind.name, spec.target or spec.arg.name, list(node.meta["val"].shape)))
    for node in ep.graph.nodes:
        if node.op != "call_function" or node.name not in needed:
            continue
        try:
            env[node.name] = convert_node(g, node, env)
        except ExportError as e:
            where = source_line(node)
            raise ExportError("%s%s: %s" % (where + ": " if where else "", node.target, e)) from None
    drop_unread_running_stats(g, info)
    out_node = [n for n in ep.graph.nodes if n.op == "output"][0]
    results = out_node.args[0]
    input_names = {name for name, _, _ in g.inputs}
    for i, (r, spec) in enumerate(zip(results, sig.output_specs)):
        if is_running_stat(spec):
            info["dropped"].append(spec.target)
            continue
        if spec.kind.name != "USER_OUTPUT":
            raise ExportError("the module mutates a buffer or an input (%s %s)" % (spec.kind.name, spec.target or ""))
        v = env[r.name]
        if v is not UNCOMPUTED:
            v = g.solid(v)
        if v is UNCOMPUTED:
            raise ExportError("output %d is a result that tsopt does not compute (the indices of a max or min, "
                              "the mean or rstd of a norm)" % i)
        shape = list(r.meta["val"].shape)
        if v.name in input_names or v.name in g.outputs:
            v = g.op("out%d" % i, "copy", [v], v.axes, v.dtype)
        g.outputs.append(v.name)
        info["outputs"].append((v.name, shape))
    return g.to_yaml(graph_name, header), info


def export_module(module, args, axis_names=None, dynamic=None, graph_name="graph", buffers="inputs", training=False):
    """module(*args) through torch.export to YAML; see export_program. In eval mode (the default), or with
    training=True in training mode: BatchNorm normalises by the batch's statistics (the update of its running
    statistics is left out: info["dropped"]), and a dropout with p > 0 is refused."""
    if torch is None:
        raise ExportError("the importer needs PyTorch: pip install torch")
    module.train(training)
    with torch.no_grad():
        ep = torch.export.export(module, tuple(args))
    header = "# exported from %s by tsopt_torch.export" % type(module).__name__
    text, info = export_program(ep, axis_names, dynamic, graph_name, header, buffers)
    if training:  # the running statistics a training-mode forward updates in place (not in the graph)
        info["dropped"] += [s.target for s in ep.graph_signature.input_specs if s.kind.name == "BUFFER" and
                            names_running_stat(s.target) and s.target not in info["dropped"]]
    return text, info


# ---- CLI --------------------------------------------------------------------------------------------------


def parse_arg_spec(text):
    """'x=t:16,d:64' → ('x', [16, 64], {'t': 16, 'd': 64})"""
    name, _, dims = text.partition("=")
    if not dims:
        raise ValueError("--args %r: write NAME=AXIS:SIZE,... or NAME=SIZE,..." % text)
    sizes, names = [], {}
    for d in dims.split(","):
        axis, _, size = d.rpartition(":")
        sizes.append(int(size))
        if axis:
            names[axis] = int(size)
    return name, sizes, names


def load_class(spec):
    path, _, cls = spec.rpartition(":")
    if not path or not cls:
        raise ValueError("%r: write MODULE.py:Class" % spec)
    mspec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    mod = importlib.util.module_from_spec(mspec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    mspec.loader.exec_module(mod)
    return getattr(mod, cls)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m tsopt_torch.export", description=__doc__.split("\n")[0])
    ap.add_argument("module", help="MODULE.py:Class")
    ap.add_argument("--args", action="append", default=[], help="a forward argument: NAME=AXIS:SIZE,...")
    ap.add_argument("--init", default="{}", help="constructor keyword arguments as JSON")
    ap.add_argument("--axis", action="append", default=[], help="name a size: NAME=SIZE")
    ap.add_argument("--dynamic", action="append", default=[], help="a dynamic axis: NAME or NAME=TYPICAL")
    ap.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    ap.add_argument("--train", action="store_true",
                    help="export the forward pass in training mode (BatchNorm over the batch; its running "
                         "statistics' update is left out, and said on stderr)")
    ap.add_argument("--buffers", default="inputs", choices=["inputs", "computed"],
                    help="buffers as graph inputs, or causal masks and RoPE tables recognised by value as ops")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", help="graph name (default: the class name, lower case)")
    ap.add_argument("-o", "--output", help="the YAML file (default: stdout)")
    o = ap.parse_args(argv)
    if torch is None:
        print("tsopt_torch.export: error: the importer needs PyTorch (pip install torch)", file=sys.stderr)
        return 1
    try:
        cls = load_class(o.module)
        names, examples = {}, []
        torch.manual_seed(o.seed)
        for a in o.args:
            _, sizes, n = parse_arg_spec(a)
            names.update(n)
            examples.append(torch.randn(*sizes, dtype=getattr(torch, o.dtype)))
        for a in o.axis:
            k, _, v = a.partition("=")
            names[k] = int(v)
        dynamic = {}
        for a in o.dynamic:
            k, _, v = a.partition("=")
            if k not in names:
                raise ValueError("--dynamic %s: no argument names an axis '%s'" % (a, k))
            dynamic[k] = int(v) if v else names[k]
        module = cls(**json.loads(o.init)).to(getattr(torch, o.dtype))
        text, info = export_module(module, examples, names, dynamic, o.name or cls.__name__.lower(), o.buffers,
                                   training=o.train)
        if info["dropped"]:
            print("tsopt_torch.export: note: the graph leaves out the update of %s (training mode)"
                  % ", ".join(info["dropped"]), file=sys.stderr)
    except (ExportError, ValueError) as e:
        print("tsopt_torch.export: error: %s" % e, file=sys.stderr)
        return 1
    if o.output:
        with open(o.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
