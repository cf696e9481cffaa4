"""tsopt_torch — a header written by `tsopt compile` as a PyTorch custom operator.

    import tsopt_torch
    swiglu = tsopt_torch.load("swiglu.cuh")       # builds once (cached), registers torch.ops.tsopt.swiglu
    y = swiglu(x, w_up, w_gate)                    # CUDA tensors in, new output tensors out

The operator is defined in C++ (TORCH_LIBRARY, so a call costs one dispatcher hop, no Python in between)
and calls the header's C ABI `<name>_run`: it checks every tensor's device, dtype, rank, contiguity and
sizes (static axes must equal the compiled size; dynamic ones are read from the tensors and must agree),
allocates the outputs (PyTorch's caching allocator) and runs on PyTorch's current stream. A graph's workspace
(its intermediates) is kept per device and stream between calls, as PyTorch keeps cuBLAS's, and allocated
afresh for each call while the stream is captured into a CUDA graph; `Op.release_workspaces()` (or
torch.ops.tsopt.<name>_release_workspaces()) gives the kept ones back to the allocator. A fake (meta) implementation registered here gives torch.compile the output shapes, so the op
works inside `torch.compile(fullgraph=True)`. An inout buffer is a mutated argument of the schema
(`Tensor(a!) K_cache`: written in place, not returned); a dynamic size no tensor has — a cache's valid length
`s` — is an int argument after the tensors (`int s`), checked against the range the banner states.

What it reads from the header is its banner (the lines `tsopt compile` writes for this purpose):
  //   in  X          fp16 [m, d]            a buffer, in C ABI order (inputs, then outputs)
  //   inout K_cache  fp16 [b, s_max, d]     an input the graph updates in place (an append: a KV cache)
  //   (K_cache is written in place: ... needs 1 <= s <= s_max)   the range its position axis must lie in
  // Sizes: m=1024 d=2048 t=dynamic u=t     axis sizes; `u=t`: u is always t's size
  // dims[] (...): t                          the dynamic sizes in the order of run's dims[]
The build: nvcc compiles the header's kernels (the one translation unit defining
TSOPT_<NAME>_IMPLEMENTATION, -gencode compute_90a/sm_90a, no -rdc) into an object that g++ links with
the generated binding, against torch's libraries and the toolkit's shared libcudart, into one library per
header (with torch built for the same CUDA major version, the process holds one CUDA runtime).
Needs torch (with its C++ headers) and nvcc; nothing here runs without a CUDA build of torch except
parse_header and the fake implementation.
"""

import hashlib
import keyword
import os
import re
import subprocess

DTYPES = {"fp16": ("float16", "at::kHalf"), "bf16": ("bfloat16", "at::kBFloat16"), "fp32": ("float32", "at::kFloat")}
DEFAULT_ARCH = "-gencode=arch=compute_90a,code=sm_90a"


class HeaderError(ValueError):
    """The file is not a header written by tsopt compile, or one this module cannot wrap."""


class Buffer:
    def __init__(self, direction, name, dtype, axes):
        self.direction, self.name, self.dtype, self.axes = direction, name, dtype, axes

    @property
    def arg(self):
        """The schema's argument name: the C name, with a `_` added where Python reserves it."""
        return self.name + "_" if keyword.iskeyword(self.name) else self.name


class Signature:
    """What a header's banner says about its C ABI: name, buffers, sizes and the order of dims[]."""

    def __init__(self, name, buffers, sizes, dims):
        self.name, self.buffers, self.sizes, self.dims = name, buffers, sizes, dims
        self.inputs = [b for b in buffers if b.direction in ("in", "inout")]  # C ABI order
        self.outputs = [b for b in buffers if b.direction == "out"]
        self.bounds = []  # (low, axis, high): an append's position range, from the banner
        self.needs_cublaslt = False  # compiled with --allow-cublas and a GEMM runs by cuBLASLt: link -lcublasLt
        # dynamic sizes no tensor has (a cache's valid length): int arguments after the tensors
        self.size_args = [a for a in dims if self.first_input_dim(a) is None]

    def root(self, axis):
        """The axis whose size `axis` has (itself unless declared `like` another)."""
        v = self.sizes[axis]
        return self.root(v) if isinstance(v, str) and v != "dynamic" else axis

    def first_input_dim(self, axis):
        """(input index, dim) where axis's root size is first found among the inputs, or None."""
        root = self.root(axis)
        for i, b in enumerate(self.inputs):
            for d, a in enumerate(b.axes):
                if self.root(a) == root:
                    return i, d
        return None

    def cpp_params(self):
        """The C++ parameters of the op and its helpers: the tensors, then the size arguments."""
        return ", ".join(["const at::Tensor &%s" % b.arg for b in self.inputs] + ["int64_t %s" % a for a in self.size_args])

    def cpp_args(self):
        return ", ".join([b.arg for b in self.inputs] + self.size_args)

    def cpp_types(self):
        return ", ".join(["const at::Tensor &"] * len(self.inputs) + ["int64_t"] * len(self.size_args))

    def schema_params(self):
        """`Tensor X, Tensor(a!) K_cache, ..., int s`: an inout buffer is a mutated argument of its own alias."""
        params, alias = [], 0
        for b in self.inputs:
            if b.direction == "inout":
                params.append("Tensor(%s!) %s" % (chr(ord("a") + alias), b.arg))
                alias += 1
            else:
                params.append("Tensor %s" % b.arg)
        return ", ".join(params + ["int %s" % a for a in self.size_args])


def parse_header(path):
    """The Signature of the header at path; HeaderError names the path and what is missing."""
    name, buffers, sizes, dims, bounds, cublaslt = None, [], None, [], [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("//"):
                break
            m = re.match(r"// (\w+)\.cuh — generated by tsopt", line)
            if m:
                name = m.group(1)
            m = re.match(r"//   (inout|in|out) +(\w+) +(fp16|bf16|fp32) \[([\w, ]*)\]", line)
            if m:
                axes = [a.strip() for a in m.group(4).split(",") if a.strip()]
                buffers.append(Buffer(m.group(1), m.group(2), m.group(3), axes))
            if line.startswith("// Sizes:"):
                sizes = {}
                for item in line[len("// Sizes:"):].split():
                    k, v = item.split("=")
                    sizes[k] = int(v) if v.isdigit() else v
            if line.startswith("// Depends on the CUDA toolkit's headers and cuBLASLt"):
                cublaslt = True
            if line.startswith("// dims[]"):
                dims = line.split(":", 1)[1].split()
            m = re.match(r"//   \(\w+ is written in place: .*; needs (\w+) <= (\w+) <= (\w+)\)", line)
            if m and m.groups() not in bounds:  # (both caches of a step state the same range: checked once)
                bounds.append(m.groups())
    if name is None or sizes is None or not buffers:
        raise HeaderError("%s: not a header written by tsopt compile (no banner with its name, buffers and sizes)" % path)
    sig = Signature(name, buffers, sizes, dims)
    sig.bounds = bounds
    sig.needs_cublaslt = cublaslt
    for b in sig.buffers:
        for a in b.axes:
            if a not in sizes:
                raise HeaderError("%s: buffer %s has axis %s, which the Sizes line lacks" % (path, b.name, a))
            if sizes[a] != "dynamic" and not isinstance(sizes[a], int) and sig.first_input_dim(a) is None:
                raise HeaderError("%s: axis %s of %s is not an input's: its size cannot be known" % (path, a, b.name))
    for a in sig.size_args:
        if not any(a == at for _, at, _ in bounds):
            raise HeaderError("%s: dynamic axis %s is no input's: the op cannot read its size" % (path, a))
    return sig


# ---- the C++ binding --------------------------------------------------------------------------------

def _size_checks(sig, b, var):
    """C++ lines checking tensor `var` (buffer b) against the compiled sizes and earlier tensors."""
    lines = []
    for d, a in enumerate(b.axes):
        size = sig.sizes[sig.root(a)]
        if isinstance(size, int):
            lines.append('    TSOPT_CHECK(%s.size(%d) == %d, OP ": %s dim %d (axis %s) must be %d, the size the header was '
                         'compiled for (tsopt compile --dims, or a dynamic axis), got %%lld", (long long)%s.size(%d));'
                         % (var, d, size, b.name, d, a, size, var, d))
        else:
            i, d0 = sig.first_input_dim(a)
            first = sig.inputs[i]
            if first is not b or d0 != d:
                lines.append('    TSOPT_CHECK(%s.size(%d) == %s.size(%d), OP ": %s dim %d (axis %s) must equal %s dim %d, got %%lld '
                             'and %%lld", (long long)%s.size(%d), (long long)%s.size(%d));'
                             % (var, d, first.arg, d0, b.name, d, a, first.name, d0, var, d, first.arg, d0))
    return lines


def _input_checks(sig, i, b):
    ndim, torch_dtype = len(b.axes), DTYPES[b.dtype][0]
    lines = [
        '    TSOPT_CHECK(%s.is_cuda(), OP ": %s must be a CUDA tensor, got one on %%s", %s.device().str().c_str());'
        % (b.arg, b.name, b.arg),
        '    TSOPT_CHECK(%s.scalar_type() == %s, OP ": %s must be %s, got %%s", c10::toString(%s.scalar_type()));'
        % (b.arg, DTYPES[b.dtype][1], b.name, torch_dtype, b.arg),
        '    TSOPT_CHECK(%s.dim() == %d, OP ": %s must have %d dim%s [%s], got sizes %%s", Shape(%s).text);'
        % (b.arg, ndim, b.name, ndim, "" if ndim == 1 else "s", ", ".join(b.axes), b.arg),
        '    TSOPT_CHECK(%s.is_contiguous(), OP ": %s must be contiguous (row-major): call .contiguous()");' % (b.arg, b.name),
    ]
    if i > 0:
        first = sig.inputs[0]
        lines.append('    TSOPT_CHECK(%s.device() == %s.device(), OP ": %s is on %%s but %s on %%s", %s.device().str().c_str(), '
                     '%s.device().str().c_str());' % (b.arg, first.arg, b.name, first.name, b.arg, first.arg))
    return lines + _size_checks(sig, b, b.arg)


def _size_expr(sig, a):
    size = sig.sizes[sig.root(a)]
    if isinstance(size, int):
        return "(int64_t)%d" % size
    if sig.root(a) in sig.size_args:
        return sig.root(a)
    i, d = sig.first_input_dim(a)
    return "%s.size(%d)" % (sig.inputs[i].arg, d)


def _bound_checks(sig):
    """C++ lines checking an append's position against the range the banner states (low <= s <= high)."""
    lines = []
    for low, at, high in sig.bounds:
        lo, v, hi = "(int64_t)1" if low == "1" else _size_expr(sig, low), _size_expr(sig, at), _size_expr(sig, high)
        lines.append('    TSOPT_CHECK(%s <= %s && %s <= %s, OP ": %s must lie in [%s, %s] (the cache\'s valid length after '
                     'the append), got %%lld of [%%lld, %%lld]", (long long)%s, (long long)%s, (long long)%s);'
                     % (lo, v, v, hi, at, low, high, v, lo, hi))
    return lines


def op_schema(sig, name=None):
    """The operator's schema, e.g. `swiglu(Tensor X, Tensor W_up, Tensor W_gate) -> Tensor` (name "": none)."""
    outs = "Tensor" if len(sig.outputs) == 1 else "(%s)" % ", ".join(["Tensor"] * len(sig.outputs))
    return "%s(%s) -> %s" % (sig.name if name is None else name, sig.schema_params(), outs)


# The operator's workspace (generated into every binding): one buffer per device and stream, kept between
# calls (as PyTorch keeps cuBLAS's workspace per handle and stream), so that a call costs no allocation and no
# free for it. Calls on one stream run in order, so they may share it; the buffer is allocated on that stream,
# so the caching allocator gives its memory to nothing else while a call may still read it. While the stream
# is captured into a CUDA graph the call gets a buffer of its own from the allocator (the graph's private
# pool): a graph replays later, beside eager calls, and must not share one with them.
_WORKSPACE_CACHE = [
    "// One kept workspace: the device and stream it serves, and its buffer.",
    "struct KeptWorkspace {", "    c10::DeviceIndex device;", "    cudaStream_t stream;", "    at::Tensor buffer;", "};",
    "static std::mutex workspaces_mutex;",
    "// Never destroyed: at the process's exit the caching allocator may be gone before this library's statics.",
    "static std::vector<KeptWorkspace> &kept_workspaces() {",
    "    static auto *kept = new std::vector<KeptWorkspace>;", "    return *kept;", "}",
    "// A workspace of `bytes` for a call on `stream` (nullptr when bytes is 0): the stream's kept buffer, grown",
    "// when too small; while the stream is captured, a fresh one held by `captured` until the call returns.",
    "static void *stream_workspace(size_t bytes, const at::Device &device, cudaStream_t stream, at::Tensor &captured) {",
    "    if (!bytes) return nullptr;",
    "    auto make = [&] { return at::detail::empty_cuda({(int64_t)bytes}, at::kByte, device, std::nullopt); };",
    "    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {",
    "        captured = make();", "        return captured.data_ptr();", "    }",
    "    std::lock_guard<std::mutex> lock(workspaces_mutex);",
    "    for (KeptWorkspace &w : kept_workspaces())",
    "        if (w.device == device.index() && w.stream == stream) {",
    "            if ((size_t)w.buffer.numel() < bytes) {",
    "                w.buffer = at::Tensor();  // the smaller one back to the allocator first (same stream: in order)",
    "                w.buffer = make();", "            }",
    "            return w.buffer.data_ptr();", "        }",
    "    kept_workspaces().push_back({device.index(), stream, make()});",
    "    return kept_workspaces().back().buffer.data_ptr();", "}",
    "// torch.ops.tsopt.<name>_release_workspaces(): the kept workspaces back to PyTorch's caching allocator.",
    "static void release_workspaces() {",
    "    std::lock_guard<std::mutex> lock(workspaces_mutex);", "    kept_workspaces().clear();", "}", ""]


def binding_source(sig, header_path):
    """The C++ source of the operator `tsopt::<name>` (CUDA implementation) for Signature sig."""
    n, outs = sig.name, sig.outputs
    params, args = sig.cpp_params(), sig.cpp_args()
    ret_type = "at::Tensor" if len(outs) == 1 else "std::tuple<%s>" % ", ".join(["at::Tensor"] * len(outs))
    # the operator's body, with the launch optional: prep_us times the rest (checks, guard, allocations)
    # marks (timing only): the times after the allocations and after the launch
    body = ['#define OP "tsopt::%s"' % n,
            "static %s %s_impl(%s, bool launch, Clock::time_point *marks = nullptr) {" % (ret_type, n, params)]
    for i, b in enumerate(sig.inputs):
        body += _input_checks(sig, i, b)
    body += _bound_checks(sig)
    first = sig.inputs[0].arg
    # what the timing functions share: the raw C ABI's arguments (outputs given, a workspace of its own) and
    # the operator's handle in the dispatcher
    raw_setup = ["    const int64_t dims[] = {%s};" % ", ".join([_size_expr(sig, a) for a in sig.dims] or ["0"]),
                 "    const size_t ws_bytes = %s_workspace(dims);" % n,
                 "    at::Tensor ws = at::detail::empty_cuda({(int64_t)ws_bytes + 1}, at::kByte, %s.device(), std::nullopt);"
                 % first,
                 "    void *buffers[] = {%s};" % ", ".join(["(void *)%s.data_ptr()" % b.arg for b in sig.inputs] +
                                                       ["outs[%d].data_ptr()" % j for j in range(len(outs))]),
                 "    cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();"]
    op_lookup = ["    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(\"tsopt::%s\", \"\")" % n,
                 "        .typed<%s(%s)>();" % (ret_type, sig.cpp_types())]
    # the paired timings' two calls: raw (the C ABI on raw_setup's arguments) and call (the op, dispatched)
    raw_and_op = op_lookup + raw_setup + [
        "    auto raw = [&] {",
        '        TSOPT_CHECK(%s_run(buffers, dims, ws_bytes ? ws.data_ptr() : nullptr, stream) == 0, OP ": %s_run failed");'
        % (n, n),
        "    };",
        "    auto call = [&] { (void)op.call(%s); };" % args]
    body += ["    const c10::cuda::CUDAGuard guard(%s.device());" % first,
             "    const int64_t dims[] = {%s};" % ", ".join([_size_expr(sig, a) for a in sig.dims] or ["0"])]
    # outputs and workspace straight from the CUDA caching allocator (at::detail::empty_cuda): at::empty would
    # go through the dispatcher once more per tensor
    for j, b in enumerate(outs):
        body.append("    at::Tensor out%d = at::detail::empty_cuda({%s}, %s, %s.device(), std::nullopt);"
                    % (j, ", ".join(_size_expr(sig, a) for a in b.axes), DTYPES[b.dtype][1], first))
    results = ", ".join("out%d" % j for j in range(len(outs)))
    ret = results if len(outs) == 1 else "std::make_tuple(%s)" % results
    if sig.dims:
        body += ["    for (int64_t v : dims)",
                 "        if (v == 0) return %s; /* an empty size: nothing to compute */" % ret]
    body += ["    const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();",
             "    at::Tensor captured_ws;  // the workspace while the stream is captured (see stream_workspace)",
             "    void *ws = stream_workspace(%s_workspace(dims), %s.device(), stream, captured_ws);" % (n, first),
             "    void *buffers[] = {%s};" % ", ".join(["(void *)%s.data_ptr()" % b.arg for b in sig.inputs] +
                                                   ["out%d.data_ptr()" % j for j in range(len(outs))]),
             "    if (marks) marks[0] = Clock::now();",
             "    if (launch) {",
             "        const int rc = %s_run(buffers, dims, ws, stream);" % n,
             '        TSOPT_CHECK(rc == 0, OP ": %s_run failed: %%s", cudaGetErrorString((cudaError_t)rc));' % n,
             "    }",
             "    if (marks) marks[1] = Clock::now();",
             "    return %s;" % ret, "}", "",
             "static %s %s_cuda(%s) { return %s_impl(%s, true); }" % (ret_type, n, params, n, args), "",
             "// The median of v (reorders v).",
             "static double median(std::vector<double> &v) {",
             "    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());",
             "    return v.empty() ? 0.0 : v[v.size() / 2];",
             "}",
             "static double us_between(Clock::time_point a, Clock::time_point b) {",
             "    return std::chrono::duration<double, std::micro>(b - a).count();",
             "}",
             "// Waits until the stream is idle: cudaStreamSynchronize, or (poll) cudaStreamQuery in a loop, so that the",
             "// thread never sleeps while the GPU runs (a sleeping core wakes with cold caches).",
             "static void wait_idle(cudaStream_t stream, bool poll = false) {",
             "    cudaError_t e;",
             "    if (poll)",
             "        while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {}",
             "    else",
             "        e = cudaStreamSynchronize(stream);",
             "    TSOPT_CHECK(e == cudaSuccess, OP \": waiting for the stream failed: %s\", cudaGetErrorString(e));",
             "}",
             "// Host time of one call, in microseconds.",
             "template <class F> static double time_us(F &&call) {",
             "    const auto t0 = Clock::now();",
             "    call();",
             "    return us_between(t0, Clock::now());",
             "}",
             "// Host time of one call with the stream idle (waited for before, untimed): the call's own cost, never",
             "// the wait for a full launch queue; host_us: the median over iters calls, in microseconds.",
             "template <class F> static double once_us(cudaStream_t stream, F &&call, bool poll = false) {",
             "    wait_idle(stream, poll);",
             "    return time_us(call);",
             "}",
             "template <class F> static double host_us(int64_t iters, cudaStream_t stream, F &&call) {",
             "    std::vector<double> us;",
             "    for (int64_t i = 0; i < iters; i++) us.push_back(once_us(stream, call));",
             "    TSOPT_CHECK(cudaStreamSynchronize(stream) == cudaSuccess, OP \": cudaStreamSynchronize failed\");",
             "    return median(us);",
             "}", "",
             "// The raw C ABI (what the op's overhead is measured against): microseconds per call.",
             "static double %s_raw_us(%s, at::TensorList outs, int64_t iters) {" % (n, params),
             ] + raw_setup + [
             "    return host_us(iters, stream, [&] {",
             '        TSOPT_CHECK(%s_run(buffers, dims, ws_bytes ? ws.data_ptr() : nullptr, stream) == 0, OP ": %s_run failed");'
             % (n, n),
             "    });", "}", "",
             "// The operator itself called through the dispatcher from C++ (its checks, allocations and dispatch, no",
             "// Python): microseconds per call.",
             "static double %s_op_us(%s, int64_t iters) {" % (n, params),
             ] + op_lookup + [
             "    return host_us(iters, at::cuda::getCurrentCUDAStream().stream(), [&] { (void)op.call(%s); });"
             % args, "}", "",
             "// The op's cost over the raw C ABI, paired, and where it goes. Each iteration calls, in an order that",
             "// rotates, the raw C ABI and the op through the dispatcher with the stream synchronised before each; the op's",
             "// body directly with its phases marked; and raw and op once more with the stream polled idle instead. Returns",
             "// the medians of: [0] op - raw (synchronised), [1] the op's checks and allocations before its launch,",
             "// [2] the op's launch - raw's, [3] the rest of the op after its launch (returning, freeing its outputs),",
             "// [4] op - raw (polled). Two loops timed apart moved by 2x between runs (host clock and cache state",
             "// drift), more than the overhead itself.",
             "static std::vector<double> %s_overhead_us(%s, at::TensorList outs, int64_t iters) {" % (n, params),
             ] + raw_and_op + [
             "    std::vector<double> d[5];",
             "    for (int64_t i = 0; i < iters; i++) {",
             "        double raw_sync = 0, op_sync = 0, raw_poll = 0, op_poll = 0;",
             "        for (int k = 0; k < 5; k++)",
             "            switch ((i + k) % 5) {",
             "            case 0: raw_sync = once_us(stream, raw); break;",
             "            case 1: op_sync = once_us(stream, call); break;",
             "            case 2: raw_poll = once_us(stream, raw, true); break;",
             "            case 3: op_poll = once_us(stream, call, true); break;",
             "            default: {",
             "                Clock::time_point marks[2];",
             "                wait_idle(stream);",
             "                const auto t0 = Clock::now();",
             "                marks[0] = marks[1] = t0;  // an empty size returns before either mark",
             "                (void)%s_impl(%s, true, marks);" % (n, args),
             "                const auto t1 = Clock::now();",
             "                d[1].push_back(us_between(t0, marks[0]));",
             "                d[2].push_back(us_between(marks[0], marks[1]));",
             "                d[3].push_back(us_between(marks[1], t1));",
             "            }",
             "            }",
             "        d[0].push_back(op_sync - raw_sync);",
             "        d[4].push_back(op_poll - raw_poll);",
             "        d[2].back() -= raw_sync;",
             "    }",
             "    wait_idle(stream);",
             "    std::vector<double> m;",
             "    for (auto &v : d) m.push_back(median(v));",
             "    return m;",
             "}", "",
             "// The op's cost over the raw C ABI with the host ahead of the GPU, as in a model's forward pass: the stream",
             "// is held by a host function (launches queue behind it; nothing runs) while raw and op are called",
             "// alternately, each call timed; then released and drained. Batches of 8 pairs keep the queue short.",
             "// Returns the median of op - raw over iters pairs (the first pair of each batch, cold, not counted).",
             "static void CUDART_CB hold_stream(void *flag) {",
             "    while (!static_cast<std::atomic<bool> *>(flag)->load(std::memory_order_acquire)) {}",
             "}",
             "static double %s_queued_us(%s, at::TensorList outs, int64_t iters) {" % (n, params),
             ] + raw_and_op + [
             "    std::vector<double> d;",
             "    constexpr int kBatch = 8;",
             "    for (int64_t i = 0; i < iters; i += kBatch - 1) {",
             "        static std::atomic<bool> release;  // static: the held stream may read it after an error unwinds this frame",
             "        struct Release {  // the stream is released however the batch ends",
             "            ~Release() { release.store(true, std::memory_order_release); }",
             "        } releases;",
             "        wait_idle(stream);",
             "        release.store(false);",
             "        TSOPT_CHECK(cudaLaunchHostFunc(stream, hold_stream, &release) == cudaSuccess, OP \": cudaLaunchHostFunc failed\");",
             "        for (int k = 0; k < kBatch; k++) {",
             "            double r, o;",
             "            if ((i + k) % 2 == 0) r = time_us(raw), o = time_us(call);",
             "            else o = time_us(call), r = time_us(raw);",
             "            if (k > 0) d.push_back(o - r);",
             "        }",
             "    }",
             "    wait_idle(stream);",
             "    return median(d);",
             "}", "",
             "// The operator's own work without the dispatcher and without the launch (its checks, device guard,",
             "// output and workspace allocations and their frees): microseconds per call.",
             "static double %s_prep_us(%s, int64_t iters) {" % (n, params),
             "    return host_us(iters, at::cuda::getCurrentCUDAStream().stream(), [&] { (void)%s_impl(%s, false); });"
             % (n, args), "}", "",
             "// The dispatcher's own cost for these arguments: an operator that does nothing, called as the op is.",
             "static void %s_noop(%s) {}" % (n, params),
             "static double %s_noop_us(%s, int64_t iters) {" % (n, params),
             "    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(\"tsopt::%s_noop\", \"\")" % n,
             "        .typed<void(%s)>();" % sig.cpp_types(),
             "    return host_us(iters, at::cuda::getCurrentCUDAStream().stream(), [&] { op.call(%s); });"
             % args, "}", ""]
    schema = op_schema(sig)
    errors = ["// Errors: the message is formatted here with snprintf and raised as one string (TORCH_CHECK with a",
              "// single const char *), so no iostream code runs in this library: the operator built on the H200",
              "// machine crashed formatting a number into a TORCH_CHECK message (std::ostream::_M_insert<long>).",
              "[[noreturn]] __attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {",
              "    char msg[1024];", "    va_list ap;", "    va_start(ap, fmt);", "    vsnprintf(msg, sizeof msg, fmt, ap);",
              "    va_end(ap);", "    TORCH_CHECK(false, static_cast<const char *>(msg));", "}",
              "#define TSOPT_CHECK(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)",
              "using Clock = std::chrono::steady_clock;",
              "// A tensor's sizes as text, e.g. [1024, 4096].",
              "struct Shape {", "    char text[256];",
              "    explicit Shape(const at::Tensor &t) {", "        int n = snprintf(text, sizeof text, \"[\");",
              "        for (int64_t d = 0; d < t.dim() && n < (int)sizeof text; d++)",
              "            n += snprintf(text + n, sizeof text - n, \"%s%lld\", d ? \", \" : \"\", (long long)t.size(d));",
              "        if (n < (int)sizeof text) snprintf(text + n, sizeof text - n, \"]\");", "    }", "};", ""] + _WORKSPACE_CACHE
    tensors = sig.schema_params()
    raw_schema = "%s_raw_us(%s, Tensor[] outs, int iters) -> float" % (n, tensors)
    op_us_schema = "%s_op_us(%s, int iters) -> float" % (n, tensors)
    prep_us_schema = "%s_prep_us(%s, int iters) -> float" % (n, tensors)
    noop_schema = "%s_noop(%s) -> ()" % (n, tensors)
    noop_us_schema = "%s_noop_us(%s, int iters) -> float" % (n, tensors)
    overhead_schema = "%s_overhead_us(%s, Tensor[] outs, int iters) -> float[]" % (n, tensors)
    queued_schema = "%s_queued_us(%s, Tensor[] outs, int iters) -> float" % (n, tensors)
    head = ["// Generated by tsopt_torch.py from %s — the PyTorch operator tsopt::%s." % (os.path.basename(header_path), n),
            "#include <algorithm>", "#include <atomic>", "#include <chrono>", "#include <mutex>", "#include <tuple>", "#include <vector>",
            "#include <ATen/ATen.h>", "#include <ATen/core/dispatch/Dispatcher.h>", "#include <ATen/cuda/CUDAContext.h>",
            "#include <ATen/cuda/EmptyTensor.h>", "#include <c10/cuda/CUDAGraphsC10Utils.h>", "#include <c10/cuda/CUDAGuard.h>",
            "#include <cstdarg>", "#include <cstdio>", "#include <cuda_runtime_api.h>", "#include <torch/library.h>", "",
            '#include "%s"  // declarations only: the kernels are in the nvcc-compiled object' % os.path.abspath(header_path), ""]
    tail = ["TORCH_LIBRARY_FRAGMENT(tsopt, m) {", '    m.def("%s");' % schema, '    m.def("%s");' % raw_schema,
            '    m.def("%s");' % op_us_schema, '    m.def("%s");' % prep_us_schema, '    m.def("%s");' % noop_schema,
            '    m.def("%s");' % noop_us_schema, '    m.def("%s");' % overhead_schema, '    m.def("%s");' % queued_schema,
            '    m.def("%s_release_workspaces() -> ()", &release_workspaces);' % n, "}",
            "TORCH_LIBRARY_IMPL(tsopt, CUDA, m) {", '    m.impl("%s", &%s_cuda);' % (n, n),
            '    m.impl("%s_raw_us", &%s_raw_us);' % (n, n), '    m.impl("%s_op_us", &%s_op_us);' % (n, n),
            '    m.impl("%s_prep_us", &%s_prep_us);' % (n, n), '    m.impl("%s_noop", &%s_noop);' % (n, n),
            '    m.impl("%s_noop_us", &%s_noop_us);' % (n, n), '    m.impl("%s_overhead_us", &%s_overhead_us);' % (n, n),
            '    m.impl("%s_queued_us", &%s_queued_us);' % (n, n),
            "}", ""]
    return "\n".join(head + errors + body + tail)


# ---- building and registering -----------------------------------------------------------------------

def _cache_root():
    return os.environ.get("TSOPT_TORCH_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "tsopt", "torch"))


def _build_dir(header_path, arch):
    """The operator's folder: keyed by the header's bytes, arch and this file (the binding it generates)."""
    text = open(header_path, "rb").read()
    key = hashlib.sha256(text + arch.encode() + open(__file__, "rb").read()).hexdigest()[:16]
    return os.path.join(_cache_root(), key)


def _kernels_dir(header_path, arch):
    """The kernels object's folder: keyed by the header's bytes and arch only, so that a change to the binding
    does not recompile the kernels (minutes of nvcc per header)."""
    key = hashlib.sha256(open(header_path, "rb").read() + arch.encode()).hexdigest()[:16]
    return os.path.join(_cache_root(), "kernels", key)


def _run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s\n%s" % (what, " ".join(cmd), (r.stderr or r.stdout)[:4000]))


def kernels_object(header_path, arch=DEFAULT_ARCH):
    """Where build() leaves the header's kernels compiled by nvcc (position independent)."""
    return os.path.join(_kernels_dir(header_path, arch), parse_header(header_path).name + "_kernels.o")


def build_kernels(header_path, arch=DEFAULT_ARCH, nvcc=None):
    """Only the nvcc half of build(): the header's kernels object, where build() will find it. Needs no GPU
    and no torch, so a development machine can prepare the cache a GPU machine then links against."""
    out = _kernels_dir(header_path, arch)
    os.makedirs(out, exist_ok=True)
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    nvcc = nvcc or os.environ.get("TSOPT_NVCC") or os.path.join(cuda, "bin", "nvcc")
    return _compile_kernels(parse_header(header_path), header_path, out, arch, nvcc)


def _compile_kernels(sig, header_path, build, arch, nvcc):
    """The header's implementation TU compiled by nvcc into build/<name>_kernels.o (position independent)."""
    obj = os.path.join(build, sig.name + "_kernels.o")
    if os.path.exists(obj):
        return obj
    src = os.path.join(build, sig.name + "_kernels.cu")
    with open(src, "w") as f:
        f.write('#define TSOPT_%s_IMPLEMENTATION\n#include "%s"\n' % (sig.name.upper(), os.path.abspath(header_path)))
    _run([nvcc, "-O3", "-std=c++17", arch, "-Xcompiler", "-fPIC", "-c", src, "-o", obj + ".tmp"], "nvcc on " + header_path)
    os.replace(obj + ".tmp", obj)
    return obj


def _torch_paths():
    """(include folders, library folders) of the installed torch, CUDA's included."""
    import torch.utils.cpp_extension as ext
    try:
        inc, lib = ext.include_paths(device_type="cuda"), ext.library_paths(device_type="cuda")
    except TypeError:  # torch before 2.6: a cuda flag
        inc, lib = ext.include_paths(cuda=True), ext.library_paths(cuda=True)
    return inc, lib


def link_libraries(sig):
    """The CUDA libraries the operator links: the runtime, and cuBLASLt for a header compiled with --allow-cublas
    whose banner says it runs a GEMM by cuBLASLt."""
    return ["-lcudart"] + (["-lcublasLt"] if sig.needs_cublaslt else [])


def build(header_path, arch=DEFAULT_ARCH, nvcc=None, cxx=None):
    """Builds the operator library of the header at header_path (cached by the header's bytes, arch and this
    file, in $TSOPT_TORCH_CACHE or ~/.cache/tsopt/torch) and returns its path. Only subprocesses: safe to
    run for several headers at once."""
    import torch
    sig = parse_header(header_path)
    out = _build_dir(header_path, arch)
    so = os.path.join(out, "tsopt_%s_op.so" % sig.name)
    if os.path.exists(so):
        return so
    os.makedirs(out, exist_ok=True)
    obj = build_kernels(header_path, arch, nvcc)
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    cpp = os.path.join(out, sig.name + "_op.cpp")
    with open(cpp, "w") as f:
        f.write(binding_source(sig, header_path))
    inc, lib = _torch_paths()
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", 1))
    cmd = [cxx or os.environ.get("CXX", "g++"), "-O2", "-std=" + os.environ.get("TSOPT_TORCH_CXX_STD", "c++20"), "-fPIC", "-shared", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi]
    cmd += ["-I" + d for d in inc] + ["-I" + os.path.join(cuda, "include"), cpp, obj]
    cmd += ["-L" + d for d in lib] + ["-Wl,-rpath," + d for d in lib]
    cmd += ["-lc10", "-lc10_cuda", "-ltorch", "-ltorch_cpu", "-ltorch_cuda", "-L" + os.path.join(cuda, "lib64")]
    cmd += link_libraries(sig) + ["-o", so + ".tmp"]
    _run(cmd, "the operator's C++ build")
    os.replace(so + ".tmp", so)
    return so


class Op:
    """torch.ops.tsopt.<name> with its signature; call it like a function (its tensors, then the sizes no tensor
    has, e.g. a cache's valid length: sig.size_args). Below, `tensors...` stands for those arguments.
    raw(tensors..., outs, iters) and
    op_us(tensors..., iters): microseconds per call of the bare C ABI and of the operator, each in a C++ loop;
    prep_us(tensors..., iters): of the operator's checks and allocations alone (no dispatcher, no launch);
    noop_us(tensors..., iters): of the dispatcher alone (an operator of the same arguments that does nothing);
    overhead_us(tensors..., outs, iters): the op's cost over the raw C ABI, timed in pairs (the median of
    op − raw over iterations that call each once), and where it goes: a list [op − raw, the op's checks and
    allocations, its launch − raw's, the rest after its launch, op − raw with the stream polled idle];
    queued_us(tensors..., outs, iters): op − raw with the host ahead of the GPU (calls queued behind a held
    stream, each timed; the median over iters pairs)."""

    def __init__(self, sig, packet, raw, op_us, prep_us, noop_us, overhead_us, queued_us):
        self.sig, self.raw, self.op_us, self.prep_us, self.noop_us = sig, raw, op_us, prep_us, noop_us
        self.overhead_us, self.queued_us = overhead_us, queued_us
        self.op = packet.default  # the overload itself: no overload resolution per call
        self.name = sig.name
        self._release = getattr(getattr(__import__("torch").ops, "tsopt"), sig.name + "_release_workspaces")

    def release_workspaces(self):
        """Gives the workspaces the op keeps per device and stream back to PyTorch's caching allocator (the next
        call allocates one again)."""
        self._release()

    def __call__(self, *tensors):
        return self.op(*tensors)


def register_fake(sig, qualname=None):
    """The fake (meta) implementation of tsopt::<name> (or qualname): outputs of the right shape, dtype and
    device, no computation."""
    import torch

    def fake(*args):
        want = len(sig.inputs) + len(sig.size_args)
        if len(args) != want:
            raise TypeError("tsopt::%s takes %d arguments, got %d" % (sig.name, want, len(args)))
        tensors, ints = args[:len(sig.inputs)], dict(zip(sig.size_args, args[len(sig.inputs):]))

        def size(a):
            s = sig.sizes[sig.root(a)]
            if isinstance(s, int):
                return s
            if sig.root(a) in ints:
                return ints[sig.root(a)]
            i, d = sig.first_input_dim(a)
            return tensors[i].shape[d]

        outs = [tensors[0].new_empty([size(a) for a in b.axes], dtype=getattr(torch, DTYPES[b.dtype][0]))
                for b in sig.outputs]  # an inout buffer is mutated in place, not returned
        return outs[0] if len(outs) == 1 else tuple(outs)

    torch.library.register_fake(qualname or "tsopt::" + sig.name)(fake)
    return fake


def load(header_path, arch=DEFAULT_ARCH, nvcc=None):
    """Builds (or takes from the cache) the operator of the header at header_path, registers it and its fake
    implementation as torch.ops.tsopt.<name>, and returns an Op."""
    import torch

    sig = parse_header(header_path)
    if hasattr(torch.ops.tsopt, sig.name):
        raise RuntimeError("tsopt::%s is already registered in this process: give the other header another name "
                           "(tsopt compile --name)" % sig.name)
    torch.ops.load_library(build(header_path, arch, nvcc))
    register_fake(sig)
    ops = torch.ops.tsopt
    return Op(sig, getattr(ops, sig.name), getattr(ops, sig.name + "_raw_us"), getattr(ops, sig.name + "_op_us"),
              getattr(ops, sig.name + "_prep_us"), getattr(ops, sig.name + "_noop_us"),
              getattr(ops, sig.name + "_overhead_us"), getattr(ops, sig.name + "_queued_us"))
