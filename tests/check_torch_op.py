"""check_torch_op.py — what of python/tsopt_torch.py can be checked without a GPU: the banner parser on
every generated header (buffers in the YAML's order, sizes, dims[]), the generated C++ operator's checks,
the error for a file that is not a header, and — where torch is installed — the fake implementation's
output shapes under torch's meta device, dynamic sizes included. Run by `make test` (TSOPT names the
binary); bench/torch_op.py is the GPU half.
"""

import glob
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
# Python puts this script's folder first on the path, and tests/torch/ (the torch install script) would then
# be imported as a namespace package named torch where torch is not installed.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.join(ROOT, "python"))
import tsopt_torch  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def headers_match_their_graphs():
    n = 0
    for h in sorted(glob.glob(os.path.join(ROOT, "generated", "*.cuh"))):
        sig = tsopt_torch.parse_header(h)
        spec = yaml.safe_load(open(os.path.join(ROOT, "bench", "graphs", sig.name + ".yaml")))
        check([b.name for b in sig.inputs] == list(spec["inputs"]), "%s: inputs %s" % (h, [b.name for b in sig.inputs]))
        check([b.name for b in sig.outputs] == list(spec["outputs"]), "%s: outputs" % h)
        for b in sig.inputs:
            check(b.axes == list(spec["inputs"][b.name]["shape"]), "%s: %s axes %s" % (h, b.name, b.axes))
        src = tsopt_torch.binding_source(sig, h)
        check('m.def("%s");' % tsopt_torch.op_schema(sig) in src, "%s: schema" % h)
        check("is_contiguous()" in src and "getCurrentCUDAStream" in src, h)
        # the workspace: the stream's kept buffer (a fresh one under capture), never one allocation per call
        check("stream_workspace(%s_workspace(dims), " % sig.name in src and "currentStreamCaptureStatusMayInitCtx" in src
              and '"%s_release_workspaces() -> ()", &release_workspaces' % sig.name in src
              and "at::kByte" not in src.split("_impl(", 1)[1].split("\n}\n", 1)[0], "%s: workspace" % h)
        n += 1
    check(n >= 8, "every bench graph has a header in generated/")
    return n


def in_place_headers():
    """The decode and prefill steps: their caches are mutated arguments, the valid length an int argument
    checked against the banner's range, the chunk length read from x."""
    sig = tsopt_torch.parse_header(os.path.join(ROOT, "generated", "decoder_decode.cuh"))
    check([b.name for b in sig.inputs if b.direction == "inout"] == ["K_cache", "V_cache"], "the caches are inout")
    check(sig.size_args == ["s"] and sig.bounds == [("1", "s", "s_max")], "s: %s %s" % (sig.size_args, sig.bounds))
    schema = tsopt_torch.op_schema(sig)
    check("Tensor(a!) K_cache, Tensor(b!) V_cache, int s) -> Tensor" in schema, schema)
    src = tsopt_torch.binding_source(sig, "decoder_decode.cuh")
    check("const int64_t dims[] = {x.size(0), s};" in src, "dims from x and the int argument")
    check(src.count("must lie in [1, s_max]") == 1, "the position's range checked once")
    check("typed<at::Tensor(%s)>" % ", ".join(["const at::Tensor &"] * 12 + ["int64_t"]) in src, "the typed lookup")
    pre = tsopt_torch.parse_header(os.path.join(ROOT, "generated", "decoder_prefill.cuh"))
    check(pre.size_args == ["s"] and pre.bounds == [("n", "s", "s_max")], "prefill: %s" % pre.bounds)
    src = tsopt_torch.binding_source(pre, "decoder_prefill.cuh")
    check("TSOPT_CHECK(x.size(1) <= s && s <= (int64_t)4096" in src, "n <= s <= s_max with n read from x")
    return sig


def fake_in_place(sig):
    """The fake implementation of the decode step: the output's shape from x, the caches untouched."""
    try:
        import torch
    except ImportError:
        return "skipped (no torch)"
    qual = "tsopt::check_" + sig.name
    torch.library.define(qual, tsopt_torch.op_schema(sig, ""))
    tsopt_torch.register_fake(sig, qual)
    op = getattr(torch.ops.tsopt, "check_" + sig.name)
    m = lambda *shape: torch.empty(*shape, dtype=torch.float16, device="meta")  # noqa: E731
    args = [m(3, 4096), m(4096), m(4096, 6144), m(4096, 4096), m(4096), m(4096, 14336), m(4096, 14336),
            m(14336, 4096), m(64), m(64), m(3, 8, 4096, 128), m(3, 8, 4096, 128)]
    y = op(*args, 77)
    check(tuple(y.shape) == (3, 4096), "fake decode output %s" % (tuple(y.shape),))
    return "ok"


def dynamic_header(tmp):
    """A header with a dynamic axis and a reserved name, written by tsopt compile."""
    g = os.path.join(tmp, "dyn.yaml")
    with open(g, "w") as f:
        f.write("graph: dyn\naxes:\n  t: {dynamic: true, typical: 64}\n  d: 32\ninputs:\n  X: {dtype: fp16, shape: [t, d]}\n"
                "  class: {dtype: fp16, shape: [d]}\nops:\n  - {name: Y, op: mul, args: [X, class]}\n"
                "  - {name: S, op: reduce_sum, args: [Y], axis: d}\noutputs: [Y, S]\n")
    tsopt = os.environ.get("TSOPT", os.path.join(ROOT, "build", "tsopt"))
    subprocess.run([tsopt, "compile", "-o", tmp, g], check=True, capture_output=True)
    return os.path.join(tmp, "dyn.cuh")


def dynamic_sizes_and_checks(tmp):
    h = dynamic_header(tmp)
    sig = tsopt_torch.parse_header(h)
    check(sig.dims == ["t"] and sig.sizes == {"t": "dynamic", "d": 32}, "dims and sizes: %s %s" % (sig.dims, sig.sizes))
    check([b.name for b in sig.inputs] == ["X", "class_"], "the C name of input class")
    src = tsopt_torch.binding_source(sig, h)
    want = ('TSOPT_CHECK(class_.size(0) == 32, OP ": class_ dim 0 (axis d) must be 32, the size the header was compiled '
            'for (tsopt compile --dims, or a dynamic axis), got %lld", (long long)class_.size(0));')
    check(want in src, "the static size check")
    # messages are formatted with snprintf: the one TORCH_CHECK raises a single preformatted string
    check(src.count("TORCH_CHECK(") == 1 and "TORCH_CHECK(false, static_cast<const char *>(msg));" in src,
          "errors raised as one preformatted string, no iostream formatting")
    check("const int64_t dims[] = {X.size(0)};" in src, "t read from X")
    check("std::tuple<at::Tensor, at::Tensor>" in src, "two outputs")
    return sig


def not_a_header(tmp):
    p = os.path.join(tmp, "plain.cuh")
    with open(p, "w") as f:
        f.write("// a plain file\nint x;\n")
    try:
        tsopt_torch.parse_header(p)
    except tsopt_torch.HeaderError as e:
        check(str(e) == "%s: not a header written by tsopt compile (no banner with its name, buffers and sizes)" % p, str(e))
        return
    raise AssertionError("parse_header accepted a plain file")


def fake_shapes(sig):
    """The fake implementation under the meta device (only where torch is installed)."""
    try:
        import torch
    except ImportError:
        return "skipped (no torch)"
    qual = "tsopt::check_" + sig.name
    torch.library.define(qual, tsopt_torch.op_schema(sig, ""))
    tsopt_torch.register_fake(sig, qual)
    op = getattr(torch.ops.tsopt, "check_" + sig.name)
    y, s = op(torch.empty(77, 32, dtype=torch.float16, device="meta"), torch.empty(32, dtype=torch.float16, device="meta"))
    check(tuple(y.shape) == (77, 32) and tuple(s.shape) == (77,) and y.dtype == torch.float16, "fake shapes")
    return "ok"


def cublaslt_headers_link_it(tmp):
    """A header compiled with --allow-cublas whose GEMM runs by cuBLASLt says so in its banner, and the operator
    links -lcublasLt; the generated headers (no flag) link the runtime alone."""
    tsopt = os.environ.get("TSOPT", os.path.join(ROOT, "build", "tsopt"))
    g = os.path.join(ROOT, "bench", "graphs", "gemm_gelu.yaml")
    subprocess.run([tsopt, "compile", "--allow-cublas", "-o", tmp, g], check=True, capture_output=True)
    sig = tsopt_torch.parse_header(os.path.join(tmp, "gemm_gelu.cuh"))
    check(sig.needs_cublaslt and tsopt_torch.link_libraries(sig) == ["-lcudart", "-lcublasLt"], "cuBLASLt header")
    plain = tsopt_torch.parse_header(os.path.join(ROOT, "generated", "gemm_gelu.cuh"))
    check(not plain.needs_cublaslt and tsopt_torch.link_libraries(plain) == ["-lcudart"], "plain header")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        n = headers_match_their_graphs()
        cublaslt_headers_link_it(tmp)
        sig = dynamic_sizes_and_checks(tmp)
        decode = in_place_headers()
        not_a_header(tmp)
        fake = fake_shapes(sig)
        fake_decode = fake_in_place(decode)
    print("tsopt_torch: %d generated headers parsed (in-place caches included); a cuBLASLt header links it; "
          "dynamic sizes, checks and errors ok; "
          "fake implementation %s, of the decode step %s" % (n, fake, fake_decode))


if __name__ == "__main__":
    main()
