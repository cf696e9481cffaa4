/* main.c — the tsopt command line: parses arguments and runs the pipeline stages for each subcommand.
 *
 * Exit codes: 0 success; 1 the input has errors (diagnostics on stderr); 2 usage error (bad command line);
 * 3 a resource limit was reached (interpreter budget, out of memory). Diagnostics go to stderr, results to
 * stdout; no output file is written when the input has errors. */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calibrate.h"
#include "check.h"
#include "compile.h"
#include "costmodel.h"
#include "emit.h"
#include "home.h"
#include "interp.h"
#include "libgemm.h"
#include "partition.h"
#include "plan.h"
#include "saturate.h"
#include "spec.h"
#include "tune.h"
#include "tunefit.h"
#include "util.h"
#include "verify.h"
#include "version.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2, EXIT_LIMIT = 3 };

#define DEFAULT_COST_MODEL "costmodel/h200.yaml" /* in the data folder (home.h) */

/* ---- help -------------------------------------------------------------------------------------- */

static const char usage_main[] =
    "usage: tsopt <command> [options] FILE\n"
    "\n"
    "tsopt is a tensor-program superoptimizer: a tensor graph in YAML in, fused CUDA kernels out.\n"
    "\n"
    "commands:\n"
    "  check FILE              check a graph and print its ops, shapes, FLOPs and minimum bytes\n"
    "  eval FILE               evaluate a graph with the float64 reference interpreter\n"
    "  compile FILE            saturate, extract and rank kernel plans, write the best as a CUDA header\n"
    "  explain FILE            saturate a graph with the rules: statistics, best terms, derivations\n"
    "  verify-rules [PATH...]  check every rule against the float64 interpreter on random instances\n"
    "  calibrate [-o FILE]     fit the cost model's coefficients to microbenchmarks on the GPU\n"
    "  calibrate --from-tune RECORD...\n"
    "                          fit the cost model's template efficiencies to `tsopt tune` records (no GPU)\n"
    "  tune FILE               build, validate and time the best predicted plans on the GPU; emit the fastest\n"
    "\n"
    "options:\n"
    "  -h, --help              this help; 'tsopt <command> --help' for a command's\n"
    "  --version               print the version\n"
    "\n"
    "data: rules/, templates/ and costmodel/ are read from $TSOPT_HOME when set, else from the folder beside\n"
    "the binary (<bin>/../share/tsopt once installed by `make install`, <bin>/.. in the repository); the\n"
    "options --rules, --templates and --cost-model override them one by one.\n"
    "\n"
    "exit codes: 0 ok, 1 the input has errors, 2 usage error, 3 a resource limit was reached\n";

static const char usage_check[] =
    "usage: tsopt check [--dims AXIS=N,...] FILE\n"
    "\n"
    "Parses and checks FILE (shapes, dtypes, named axes, contractions, cycles) and prints a summary: axes,\n"
    "inputs, each op with its result shape and FLOPs, the outputs, total FLOPs (and the part in\n"
    "contractions) and the minimum bytes moved (inputs read once, outputs written once).\n"
    "Errors are printed as file:line:col: error: message, with the offending line and a hint.\n"
    "\n"
    "  --dims AXIS=N,...       check at these axis sizes instead of the file's\n";

static const char usage_eval[] =
    "usage: tsopt eval [--dims AXIS=N,...] [--seed N] [--max-memory GIB] [--print N] [--dump DIR] FILE\n"
    "\n"
    "Evaluates FILE with the float64 reference interpreter on seeded random inputs (uniform in [-1, 1),\n"
    "rounded to each input's dtype) and prints, per output: its shape, sum, L2 norm, max |x|, NaN count\n"
    "and the first values.\n"
    "\n"
    "  --dims AXIS=N,...       evaluate at these axis sizes (e.g. --dims t_q=64,t_kv=64)\n"
    "  --seed N                random seed (default 1)\n"
    "  --max-memory GIB        refuse to evaluate when buffers would exceed this (default 8)\n"
    "  --print N               print the first N values of each output (default 4)\n"
    "  --dump DIR              also write every input and output as raw little-endian float64 (DIR/NAME.f64,\n"
    "                          row-major in its dims' order) and DIR/manifest.txt (in|out NAME DTYPE SIZES)\n";

static const char usage_explain[] =
    "usage: tsopt explain [--rules PATH]... [--term NAME] [--stats] [--dims AXIS=N,...] [--iter-limit N]\n"
    "                     [--node-limit N] [--time-limit S] FILE\n"
    "\n"
    "Partitions FILE at the breaks between repeated blocks, groups structurally identical chunks, and\n"
    "saturates one chunk per group with the rules, phase by phase (algebra, reductions, fusion, lowering).\n"
    "Prints per group and phase the iterations, e-nodes, e-classes, time and why it stopped; the busiest\n"
    "rules; and for each output of the chunk (or the tensor --term names, in a one-chunk graph) the\n"
    "smallest equivalent term and the rewrites that derived it.\n"
    "\n"
    "  --stats                 also print one line: stats: nodes=N chunks=C groups=G seconds=S\n"
    "                          enodes=E eclasses=K (sums over the groups)\n"
    "\n"
    "  --rules PATH            a .rules file or a folder of them (default: rules; repeatable)\n"
    "  --term NAME             explain this tensor instead of the outputs\n"
    "  --iter-limit N          iterations per phase (default 30)\n"
    "  --node-limit N          e-nodes in the e-graph (default 10000)\n"
    "  --time-limit S          seconds per phase (default 5)\n";

static const char usage_verify[] =
    "usage: tsopt verify-rules [--trials N] [--seed N] [PATH...]\n"
    "\n"
    "Evaluates both sides of every rule in PATH (.rules files or folders of them; default: rules) with the\n"
    "float64 interpreter on random shapes and values that satisfy the rule's guards — size-1 axes and\n"
    "sizes that tiles do not divide included — and compares them (relative L2 error at most 1e-9, or eight\n"
    "units of ?t's rounding for a rule guarded by (rounding ?t); NaN only where the other side is NaN).\n"
    "Prints one line per rule, a counterexample for each rule that\n"
    "fails, and 'N passed, N failed'. Exits 1 when any rule fails or cannot be verified.\n"
    "\n"
    "  --trials N              trials per rule whose guards hold (default 40)\n"
    "  --seed N                random seed (default 1)\n";

static const char usage_compile[] =
    "usage: tsopt compile [-o DIR] [--name NAME] [--dims AXIS=N,...] [--cost-model FILE] [--top K]\n"
    "                     [--rules PATH]... [--templates DIR] [--allow-cublas] FILE\n"
    "\n"
    "Checks FILE, saturates it with the rules, extracts candidate kernel plans (the unfused baseline, one\n"
    "kernel per op, always among them), predicts each plan's time with the cost model, prints the ranked\n"
    "table (plan, kernels, predicted time, predicted speedup over the baseline) and writes the best plan\n"
    "as DIR/<name>.cuh. Needs no GPU. Nothing is written when FILE has errors. Tensor and axis names that\n"
    "are C/C++ keywords or the header's own names get a trailing underscore in C (see the README).\n"
    "\n"
    "  -o DIR                  where to write the header (default: the current directory)\n"
    "  --name NAME             the symbols' prefix and file name: NAME_run, NAME_launch, NAME.cuh,\n"
    "                          TSOPT_<NAME>_IMPLEMENTATION (default: the graph's name); two names let one\n"
    "                          program hold two sizes of one graph\n"
    "  --dims AXIS=N,...       compile for these axis sizes instead of the file's\n"
    "  --cost-model FILE       cost-model coefficients (default: costmodel/h200.yaml in the data folder)\n"
    "  --top K                 rows of the ranked table to print (default 5); tune's --top is how many\n"
    "                          plans it builds\n"
    "  --rules PATH            a .rules file or a folder of them (default: rules in the data folder;\n"
    "                          repeatable)\n"
    "  --templates DIR         the CUDA templates (default: templates in the data folder)\n"
    "  --allow-cublas          GEMMs cuBLASLt can run (bias, ReLU or GELU epilogues; see the README) may run\n"
    "                          by it where the cost model predicts it faster; the header then needs\n"
    "                          -lcublasLt (its banner says so). Default: only tsopt's own kernels\n"
    "\n"
    "The data folder: $TSOPT_HOME, else beside the binary (tsopt --help).\n";

static const char usage_calibrate[] =
    "usage: tsopt calibrate [-o FILE] [--base FILE] [--kernels FILE] [--date YYYY-MM-DD] [--events] [--quick]\n"
    "       tsopt calibrate --from-tune RECORD.json... [--evaluate RECORD.json...] [--base FILE] [-o FILE]\n"
    "                       [--date YYYY-MM-DD]\n"
    "\n"
    "Runs microbenchmarks on GPU 0 (DRAM read, write and copy from 1 MiB to 1 GiB with the L2 flushed;\n"
    "back-to-back empty kernels; FMA, exp2 and mma.sync fp16 throughput; a wave/tail sweep of 1 to 4 x SMs\n"
    "blocks), times them with CUPTI activity records (CUDA events when CUPTI is unavailable), fits the cost\n"
    "model's coefficients by least squares (GSL) and writes a cost-model file like costmodel/h200.yaml with\n"
    "'calibrated: true', the GPU, driver and date, and every fit's R-squared, residual spread and samples.\n"
    "The CUDA driver, NVRTC and CUPTI are loaded at run time; where the driver or NVRTC is missing it says\n"
    "which and exits 3. Takes well under a minute of GPU time.\n"
    "\n"
    "  -o FILE                 where to write the cost model (default: standard output)\n"
    "  --base FILE             the cost model whose template efficiencies are kept; microbenchmarks cannot\n"
    "                          measure them (default: costmodel/h200.yaml)\n"
    "  --kernels FILE          the microbenchmark kernels, CUDA C compiled with NVRTC\n"
    "                          (default: calibrate/kernels.cu, then the data folder's, see tsopt --help)\n"
    "  --date YYYY-MM-DD       the date written into the file (default: today, UTC)\n"
    "  --events                time with CUDA events even where CUPTI loads\n"
    "  --quick                 fewer repetitions (a smoke run)\n"
    "\n"
    "With --from-tune (no GPU needed), fits the template efficiencies (gemm, attention, reduce, map, row)\n"
    "to the per-kernel timings in records written by `tsopt tune --record` (docs/tune-records.md): per kind\n"
    "with at least 3 timed kernels of ok candidates, the efficiency in [0.02, 2] minimising the sum of\n"
    "squared log ratios of predicted to measured times, the other coefficients being each record's own.\n"
    "Prints per kind the samples, the value before and after, the residual spread and R-squared, then the\n"
    "cost model's accuracy over the timed candidates with the records' coefficients and with the fitted\n"
    "ones (in-sample): median absolute percentage error, Spearman rank correlation (pooled and per run)\n"
    "and how often the predicted best is within 10% of the measured best. Writes the --base file with the\n"
    "fitted values and their `fit:` entries (its comments kept; -o may name --base itself: it is replaced\n"
    "only once the new file is complete and loads). The report goes to standard error when the model goes\n"
    "to standard output.\n"
    "\n"
    "  --from-tune RECORD...   tune record files (JSON), up to the next option\n"
    "  --evaluate RECORD...    with --from-tune: also report the accuracy on these records, which the fit\n"
    "                          did not see (held out), with the fitted efficiencies\n";

static const char usage_tune[] =
    "usage: tsopt tune [options] FILE\n"
    "\n"
    "Builds the best predicted plans of FILE (the headers `tsopt compile` would write), validates each on the\n"
    "GPU against the float64 reference (sampled rows, fresh random inputs, outputs poisoned), times them\n"
    "(median of CUDA events, L2 flushed) and writes the fastest valid one as DIR/<graph>.cuh with its measured\n"
    "time in the banner. Prints a table: candidate, predicted, measured, error, status.\n"
    "\n"
    "options:\n"
    "  --top K                 candidates: the K best plans by prediction (default 4), leaving out plans\n"
    "                          predicted over 10x the best one's time\n"
    "  --dims AXIS=N,...       sizes to tune at (dynamic axes included: --dims t=1024)\n"
    "  -o DIR                  where to write the tuned header (default: tuned)\n"
    "  --record FILE           write every measurement as JSON (docs/tune-records.md)\n"
    "  --cache DIR             compiled candidates and references (default: $TSOPT_CACHE, else\n"
    "                          $XDG_CACHE_HOME/tsopt, else ~/.cache/tsopt)\n"
    "  --build-only            only build the candidates and the reference into the cache (no GPU needed)\n"
    "  --arch SM               compile target, e.g. 90a or 80 (default: the GPU's; 90a with --build-only)\n"
    "  --nvcc PATH             the CUDA compiler (default: $TSOPT_NVCC, nvcc on the PATH, /usr/local/cuda)\n"
    "  --jobs N                compilers run at once (default: the number of processors)\n"
    "  --reps N, --warmup N    timed runs (default 20) and warm-up runs (default 3)\n"
    "  --watchdog S            each candidate runs in a process of its own, killed (and reported as hung)\n"
    "                          after S seconds (default 120); a fault or crash costs only that candidate\n"
    "  --seed N                random inputs (default 1)\n"
    "  --rules PATH            rule file or folder (repeatable; default: rules in the data folder)\n"
    "  --cost-model FILE       cost-model coefficients (default: costmodel/h200.yaml in the data folder)\n"
    "  --templates DIR         the CUDA templates (default: templates in the data folder)\n"
    "  --allow-cublas          also time the best plan with its GEMMs run by cuBLASLt where it can run them\n"
    "                          (and let the search choose it); a header that keeps it needs -lcublasLt\n"
    "\n"
    "exit codes: 0 ok, 1 bad input or no candidate valid, 2 usage error, 3 no GPU, driver or compiler\n";

/* ---- argument parsing -------------------------------------------------------------------------- */

typedef struct {
    const char *file;
    const char *dims;
    uint64_t seed;
    double max_gib;
    int print;
    const char *rules[16];
    int nrules;
    const char *term;
    double iter_limit, node_limit, time_limit;
    const char *out_dir, *cost_model, *dump;
    const char *name, *templates; /* compile's --name; compile and tune's --templates (NULL: the data folder's) */
    double top;
    bool stats;
    bool allow_cublas; /* compile and tune: --allow-cublas */
} options;

static int usage_error(const char *usage, const char *what, const char *arg) {
    fprintf(stderr, "tsopt: error: %s%s%s%s\n\n%s", what, arg ? " '" : "", arg ? arg : "", arg ? "'" : "", usage);
    return EXIT_USAGE;
}

static int parse_number_arg(const char *s, double *out) {
    char *end;
    *out = strtod(s, &end);
    return end != s && *end == '\0' && isfinite(*out) && *out >= 0 ? 0 : -1;
}

/* Returns -1 to continue, or an exit code (help printed, or a usage error). */
static int parse_options(int argc, char **argv, const char *usage, options *o) {
    *o = (options){.seed = 1, .max_gib = 8, .print = 4, .iter_limit = 30, .node_limit = 10000, .time_limit = 5,
                   .out_dir = ".", .top = 5};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        double v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--stats") == 0 && usage == usage_explain) {
            o->stats = true;
        } else if (strcmp(a, "--allow-cublas") == 0 && (usage == usage_compile || usage == usage_tune)) {
            o->allow_cublas = true;
        } else if (strcmp(a, "--dims") == 0 || strcmp(a, "--seed") == 0 || strcmp(a, "--max-memory") == 0 ||
                   strcmp(a, "--print") == 0 || strcmp(a, "--rules") == 0 || strcmp(a, "--term") == 0 ||
                   strcmp(a, "--iter-limit") == 0 || strcmp(a, "--node-limit") == 0 ||
                   strcmp(a, "--time-limit") == 0 || strcmp(a, "-o") == 0 || strcmp(a, "--cost-model") == 0 ||
                   strcmp(a, "--top") == 0 || strcmp(a, "--dump") == 0 ||
                   (strcmp(a, "--name") == 0 && usage == usage_compile) ||
                   (strcmp(a, "--templates") == 0 && (usage == usage_compile || usage == usage_tune))) {
            if (!next) return usage_error(usage, "missing value for", a);
            if (strcmp(a, "--dims") == 0) o->dims = next;
            else if (strcmp(a, "--term") == 0) o->term = next;
            else if (strcmp(a, "-o") == 0) o->out_dir = next;
            else if (strcmp(a, "--dump") == 0) o->dump = next;
            else if (strcmp(a, "--cost-model") == 0) o->cost_model = next;
            else if (strcmp(a, "--templates") == 0) o->templates = next;
            else if (strcmp(a, "--name") == 0) {
                if (!ts_emit_name_ok(next))
                    return usage_error(usage, "--name wants a C identifier (letters, digits, _; at most 64) not "
                                              "starting with a digit, __ or _ and a capital, not", next);
                o->name = next;
            }
            else if (strcmp(a, "--rules") == 0) {
                if (o->nrules == 16) return usage_error(usage, "too many --rules; at most 16", NULL);
                o->rules[o->nrules++] = next;
            } else if (parse_number_arg(next, &v) != 0) return usage_error(usage, "bad number", next);
            else if (strcmp(a, "--iter-limit") == 0) o->iter_limit = v;
            else if (strcmp(a, "--node-limit") == 0) o->node_limit = v;
            else if (strcmp(a, "--time-limit") == 0) o->time_limit = v;
            else if (strcmp(a, "--top") == 0) o->top = v;
            else if (strcmp(a, "--seed") == 0) o->seed = (uint64_t)v;
            else if (strcmp(a, "--max-memory") == 0) o->max_gib = v;
            else o->print = v > 1e6 ? 1000000 : (int)v;
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error(usage, "unknown option", a);
        } else if (o->file) {
            return usage_error(usage, "one FILE at a time; unexpected argument", a);
        } else {
            o->file = a;
        }
    }
    if (!o->file) return usage_error(usage, "missing FILE", NULL);
    return -1;
}

/* ---- load + check (shared by every command) ---------------------------------------------------- */

/* Loads and checks o->file into g at the sizes of --dims, which land in *bind (NULL: not kept).
 * Prints diagnostics. Returns 0, or an exit code. */
static int load_graph_bound(const options *o, ts_spec *spec, ts_graph *g, ts_binding *bind) {
    ts_diags d;
    ts_binding local = {0};
    ts_binding *b = bind ? bind : &local;
    *b = (ts_binding){0};
    int rc = ts_spec_load(spec, o->file, &d);
    if (rc == 0 && o->dims) rc = ts_binding_parse(b, o->dims, &d);
    if (rc == 0) rc = ts_check(spec, b, g, &d);
    else ts_graph_init(g, NULL);
    ts_diags_print(&d, stderr);
    ts_diags_free(&d);
    ts_binding_free(&local);
    return rc == 0 ? 0 : EXIT_INPUT;
}

static int load_graph(const options *o, ts_spec *spec, ts_graph *g) { return load_graph_bound(o, spec, g, NULL); }

/* ---- check ------------------------------------------------------------------------------------- */

static void print_dims(const ts_graph *g, const ts_view *v) {
    printf("[");
    for (int i = 0; i < v->ndim; i++) printf("%s%s", i ? ", " : "", g->axes[v->axis[i]].name);
    printf("]");
}

static void print_quantity(double x, const char *unit) {
    const char *prefix[] = {"", "K", "M", "G", "T", "P"};
    int p = 0;
    while (fabs(x) >= 1000 && p < 5) x /= 1000, p++;
    printf(p ? "%.1f %s%s" : "%.0f %s%s", x, prefix[p], unit);
}

static void print_summary(const ts_graph *g, const char *path) {
    printf("graph %s (%s)\n", g->name, path);
    printf("axes:");
    for (int i = 0; i < g->naxes; i++) {
        const ts_axis *a = &g->axes[i];
        printf(" %s=%" PRId64 "%s", a->name, a->size, a->dynamic ? " (dynamic)" : "");
    }
    printf("\ntensors:\n");
    double *flops = ts_xcalloc((size_t)g->nnamed + 1, sizeof *flops);
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        ts_op_kind k = ts_op_kind_of(n->op);
        if (k == TS_KIND_SOURCE || k == TS_KIND_UPDATE || n->op == TS_OP_COPY || n->op == TS_OP_CAST) continue;
        flops[n->origin] += k == TS_KIND_REDUCE ? (double)ts_view_numel(&n->src[0].view) : (double)ts_node_numel(g, n);
    }
    for (int i = 0; i < g->nnamed; i++) {
        const ts_named *t = &g->named[i];
        printf("  %-12s %-10s %-5s ", t->name, t->op, ts_dtype_name(t->dtype));
        print_dims(g, &t->ref.view);
        if (flops[i] > 0) {
            printf("  ");
            print_quantity(flops[i], "FLOP");
        }
        printf("\n");
    }
    free(flops);
    printf("outputs:");
    for (int i = 0; i < g->noutputs; i++) printf(" %s", g->outputs[i].name);
    ts_graph_stats s = ts_graph_measure(g);
    printf("\nprimitive nodes: %d\nFLOPs: ", g->nnodes);
    print_quantity(s.flops, "FLOP");
    printf(" total, ");
    print_quantity(s.contraction_flops, "FLOP");
    printf(" in contractions\nminimum bytes: ");
    print_quantity(s.min_bytes, "B");
    printf(" (inputs read once, outputs written once)\n");
}

static int cmd_check(int argc, char **argv) {
    options o;
    int rc = parse_options(argc, argv, usage_check, &o);
    if (rc >= 0) return rc;
    ts_spec spec;
    ts_graph g;
    rc = load_graph(&o, &spec, &g);
    if (rc == 0) print_summary(&g, o.file);
    ts_graph_free(&g);
    ts_spec_free(&spec);
    return rc;
}

/* ---- eval -------------------------------------------------------------------------------------- */

static void print_output(const ts_graph *g, int i, const double *x, int nprint) {
    const ts_output *o = &g->outputs[i];
    int64_t n = ts_output_numel(g, i), nans = 0;
    double sum = 0, sq = 0, amax = 0;
    for (int64_t k = 0; k < n; k++) {
        if (isnan(x[k])) {
            nans++;
            continue;
        }
        sum += x[k];
        sq += x[k] * x[k];
        if (fabs(x[k]) > amax) amax = fabs(x[k]);
    }
    printf("output %s %s ", o->name, ts_dtype_name(o->dtype));
    print_dims(g, &o->ref.view);
    printf(" (");
    for (int d = 0; d < o->ref.view.ndim; d++) printf("%s%" PRId64, d ? "x" : "", o->ref.view.size[d]);
    printf(")\n  sum %.12g  l2 %.12g  max|x| %.12g  nan %" PRId64 "\n  first", sum, sqrt(sq), amax, nans);
    for (int64_t k = 0; k < n && k < nprint; k++) printf(" %.9g", x[k]);
    printf("\n");
}

static int dump_tensor(FILE *manifest, const char *dir, const char *kind, const char *name, ts_dtype t,
                       const ts_view *v, const double *x) {
    char *path = ts_strfmt("%s/%s.f64", dir, name);
    FILE *f = fopen(path, "wb");
    size_t n = (size_t)ts_view_numel(v);
    bool ok = f && fwrite(x, sizeof *x, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "tsopt: error: cannot write %s\n", path);
    free(path);
    fprintf(manifest, "%s %s %s", kind, name, ts_dtype_name(t));
    for (int d = 0; d < v->ndim; d++) fprintf(manifest, " %lld", (long long)v->size[d]);
    fputc('\n', manifest);
    return ok ? 0 : -1;
}

/* Writes inputs and outputs for other tools (the GPU check compares against them). */
static int dump_all(const char *dir, const ts_graph *g, double *const *in, double *const *out) {
    mkdir(dir, 0777);
    char *path = ts_strfmt("%s/manifest.txt", dir);
    FILE *m = fopen(path, "w");
    free(path);
    if (!m) {
        fprintf(stderr, "tsopt: error: cannot write %s/manifest.txt\n", dir);
        return EXIT_LIMIT;
    }
    int bad = 0;
    for (int i = 0; i < g->ninputs; i++) {
        ts_view v = ts_view_of_node(g, g->inputs[i].node);
        bad |= dump_tensor(m, dir, "in", g->inputs[i].name, g->nodes[g->inputs[i].node].dtype, &v, in[i]);
    }
    for (int i = 0; i < g->noutputs; i++)
        bad |= dump_tensor(m, dir, "out", g->outputs[i].name, g->outputs[i].dtype, &g->outputs[i].ref.view, out[i]);
    if (fclose(m) != 0) bad = 1;
    return bad ? EXIT_LIMIT : 0;
}

static int cmd_eval(int argc, char **argv) {
    options o;
    int rc = parse_options(argc, argv, usage_eval, &o);
    if (rc >= 0) return rc;
    ts_spec spec;
    ts_graph g;
    rc = load_graph(&o, &spec, &g);
    if (rc == 0) {
        ts_interp_opts opts = {.max_bytes = (size_t)(o.max_gib * (double)(1u << 30))};
        /* The random inputs are allocated here, before ts_interp_run checks its budget: refuse inputs that
         * alone exceed it rather than allocating them (an input can be declared with 2^60 elements). */
        double budget = opts.max_bytes ? (double)opts.max_bytes : (double)(8ull << 30), in_bytes = 0;
        for (int i = 0; i < g.ninputs; i++) in_bytes += 8.0 * (double)ts_input_numel(&g, i);
        if (in_bytes > budget) {
            double gib = (double)(1u << 30), mib = (double)(1u << 20);
            fprintf(stderr,
                    "%s: error: the inputs alone need %.2f %s of float64 buffers, over the interpreter's budget of "
                    "%.2f %s; evaluate at smaller sizes with --dims\n",
                    o.file, in_bytes >= gib ? in_bytes / gib : in_bytes / mib, in_bytes >= gib ? "GiB" : "MiB",
                    budget >= gib ? budget / gib : budget / mib, budget >= gib ? "GiB" : "MiB");
            ts_graph_free(&g);
            ts_spec_free(&spec);
            return EXIT_LIMIT;
        }
        double **in = ts_random_inputs(&g, o.seed), **out = NULL;
        char *err = NULL;
        if (ts_interp_run(&g, in, &out, &opts, &err) != 0) {
            fprintf(stderr, "%s: error: %s\n", o.file, err);
            free(err);
            rc = EXIT_LIMIT;
        } else {
            printf("graph %s seed %" PRIu64 "\n", g.name, o.seed);
            for (int i = 0; i < g.noutputs; i++) print_output(&g, i, out[i], o.print);
            if (o.dump) rc = dump_all(o.dump, &g, in, out);
        }
        ts_free_buffers(in, g.ninputs);
        ts_free_buffers(out, g.noutputs);
    }
    ts_graph_free(&g);
    ts_spec_free(&spec);
    return rc;
}

/* ---- explain ----------------------------------------------------------------------------------- */

static void print_phases(const ts_saturation *s, const ts_rules *rs) {
    printf("%-12s %10s %9s %9s %9s  %s\n", "phase", "iterations", "e-nodes", "e-classes", "seconds", "stop");
    for (int i = 0; i < s->run.nphases; i++) {
        const ts_runner_phase *p = &s->run.phase[i];
        printf("%-12s %10u %9u %9u %9.4f  %s\n", rs->set[p->ruleset].name, p->iterations, p->nodes, p->classes,
               p->seconds, ts_runner_stop_str(p->stop));
    }
}

static const ts_runner_rule_stats *sort_stats;
static int by_matches(const void *a, const void *b) {
    uint64_t x = sort_stats[*(const int *)a].matches, y = sort_stats[*(const int *)b].matches;
    return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

static void print_busiest_rules(const ts_saturation *s, const ts_rules *rs, int top) {
    int *order = ts_xmalloc(sizeof *order * (size_t)(rs->nrules + 1));
    for (int i = 0; i < rs->nrules; i++) order[i] = i;
    sort_stats = s->run.stats;
    qsort(order, (size_t)rs->nrules, sizeof *order, by_matches);
    printf("busiest rules:\n  %-26s %-28s %9s %9s %9s\n", "rule", "defined at", "matches", "applied", "changed");
    for (int i = 0; i < rs->nrules && i < top && s->run.stats[order[i]].matches > 0; i++) {
        const ts_rule *r = &rs->rule[order[i]];
        const ts_runner_rule_stats *st = &s->run.stats[order[i]];
        char *at = ts_strfmt("%s:%d", r->file, r->line);
        printf("  %-26s %-28s %9llu %9llu %9llu\n", r->name, at, (unsigned long long)st->matches,
               (unsigned long long)st->applied, (unsigned long long)st->changed);
        free(at);
    }
    free(order);
}

/* The rules that built term t, in the order they first fired (the derivation from the input graph). */
static void print_derivation(ts_saturation *s, const ts_eg_term *t) {
    ts_runner_step *steps = NULL;
    size_t n = ts_runner_derivation(&s->run, t, &steps);
    if (n == 0) printf("  derivation: the input graph itself\n");
    else printf("  derivation (%zu rule%s, in the order they first fired):\n", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        const ts_rule *r = &s->run.rules->rule[steps[i].rule];
        printf("    %2zu. iteration %-3d %-28s %s:%d\n", i + 1, steps[i].iteration, r->name, r->file, r->line);
    }
    free(steps);
}

static void explain_class(ts_saturation *s, const char *name, uint32_t cls) {
    ts_eg_term t;
    if (!ts_eg_extract_smallest(s->x.eg, ts_eg_find(s->x.eg, cls), &t)) {
        printf("%s has no finite term\n", name);
        return;
    }
    char *text = ts_egir_term_str(&s->x, &t);
    printf("%s = %s   (smallest)\n", name, text);
    free(text);
    print_derivation(s, &t);
    ts_eg_term_free(&t);
    if (ts_search_seed_term(&s->x, cls, &t)) {
        text = ts_egir_term_str(&s->x, &t);
        printf("%s = %s   (the search's first seed)\n", name, text);
        free(text);
        print_derivation(s, &t);
        ts_eg_term_free(&t);
    }
}

static int explain_terms(const options *o, ts_graph *g, ts_saturation *s) {
    if (!o->term) {
        for (int i = 0; i < g->noutputs; i++) explain_class(s, g->outputs[i].name, s->x.output_class[i]);
        return 0;
    }
    for (int i = 0; i < g->nnamed; i++)
        if (strcmp(g->named[i].name, o->term) == 0) {
            explain_class(s, o->term, s->x.node_class[g->named[i].ref.node]);
            return 0;
        }
    fprintf(stderr, "%s: error: --term: the graph has no tensor '%s'\n", o->file, o->term);
    return EXIT_INPUT;
}

static int load_rules(const options *o, ts_rules *rs) {
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(rs, &env);
    char *dflt = ts_data_path("rules");
    const char *d = dflt;
    int rc = ts_load_rule_paths(rs, o->nrules ? o->rules : &d, o->nrules ? o->nrules : 1, stderr) ? EXIT_INPUT : 0;
    free(dflt);
    return rc;
}

static int count_work_nodes(const ts_graph *g) {
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += ts_op_kind_of(g->nodes[i].op) != TS_KIND_SOURCE;
    return n;
}

typedef struct {
    double seconds;
    uint64_t enodes, eclasses;
} explain_totals;

/* Saturates one graph (a whole graph, or a group's representative chunk) and prints what happened. */
static int explain_graph(const options *o, ts_graph *g, const ts_rules *rs, explain_totals *tot) {
    ts_runner_limits lim = ts_runner_default_limits();
    lim.iter_limit = (uint32_t)o->iter_limit;
    lim.node_limit = (uint32_t)o->node_limit;
    lim.time_limit_s = o->time_limit;
    ts_saturation s;
    char *err = NULL;
    int rc = 0;
    if (ts_saturate(g, rs, ts_default_phases, ts_default_nphases, &lim, &s, &err) != 0) {
        fprintf(stderr, "%s: error: %s\n", o->file, err);
        free(err);
        rc = EXIT_INPUT;
    } else {
        printf("saturation: %.4f s, %d rules, %u e-nodes, %u e-classes\n", s.seconds, rs->nrules,
               ts_eg_node_count(s.x.eg), ts_eg_class_count(s.x.eg));
        print_phases(&s, rs);
        print_busiest_rules(&s, rs, 8);
        rc = explain_terms(o, g, &s);
        tot->seconds += s.seconds;
        tot->enodes += ts_eg_node_count(s.x.eg);
        tot->eclasses += ts_eg_class_count(s.x.eg);
    }
    ts_saturation_free(&s);
    return rc;
}

static int explain_partitioned(const options *o, ts_graph *g, const ts_rules *rs) {
    ts_partition part;
    ts_partition_graph(g, &part);
    printf("graph %s (%s): %d nodes, %d chunks in %d groups\n", g->name, o->file, count_work_nodes(g), part.nchunks,
           part.ngroups);
    explain_totals tot = {0};
    int rc = 0;
    if (part.nchunks <= 1) {
        rc = explain_graph(o, g, rs, &tot);
    } else {
        for (int i = 0; i < part.ngroups && rc == 0; i++) {
            ts_graph cg;
            ts_partition_chunk_graph(g, &part, part.groups[i].rep, &cg);
            printf("\n== group %d: chunk %d stands for %d chunks (%d nodes)\n", i, part.groups[i].rep,
                   part.groups[i].members, count_work_nodes(&cg));
            rc = explain_graph(o, &cg, rs, &tot);
            ts_graph_free(&cg);
        }
    }
    if (o->stats)
        printf("stats: nodes=%d chunks=%d groups=%d seconds=%.6f enodes=%llu eclasses=%llu\n", count_work_nodes(g),
               part.nchunks, part.ngroups, tot.seconds, (unsigned long long)tot.enodes, (unsigned long long)tot.eclasses);
    ts_partition_free(&part);
    return rc;
}

/* The chosen plan's kernels with their predicted times beside the runner-up's: why the search chose it. */
static void print_plan_pair(const ts_graph *g, const ts_plan *a, const ts_plan *b) {
    printf("  %-3s %-46s %10s   %-46s %10s\n", "#", "chosen", "ms", b ? "runner-up" : "", b ? "ms" : "");
    int n = a->nk > (b ? b->nk : 0) ? a->nk : b->nk;
    for (int i = 0; i < n; i++) {
        char *x = i < a->nk ? ts_kernel_describe(a, g, i) : ts_strdup(""), *y = b && i < b->nk ? ts_kernel_describe(b, g, i) : ts_strdup("");
        char ta[32] = "", tb[32] = "";
        if (i < a->nk) snprintf(ta, sizeof ta, "%.4f", a->k[i].predicted_s * 1e3);
        if (b && i < b->nk) snprintf(tb, sizeof tb, "%.4f", b->k[i].predicted_s * 1e3);
        printf("  %-3d %-46.46s %10s   %-46.46s %10s\n", i + 1, x, ta, y, tb);
        free(x), free(y);
    }
    printf("  %-3s %-46s %10.4f   %-46s %10s\n", "", "total", a->predicted_s * 1e3, "", "");
    if (b) printf("  %-3s %-46s %10s   %-46s %10.4f\n", "", "", "", "total", b->predicted_s * 1e3);
}

/* Loads the cost model of --cost-model, else the shipped one (then named as shipped, so that headers do
 * not depend on where it lies). Returns 0, or EXIT_INPUT with diagnostics printed (cm to be freed). */
static int load_cost_model(const options *o, ts_costmodel *cm) {
    ts_diags d;
    char *path = o->cost_model ? ts_strdup(o->cost_model) : ts_data_path(DEFAULT_COST_MODEL);
    int rc = ts_costmodel_load(cm, path, &d) != 0 ? EXIT_INPUT : 0;
    ts_diags_print(&d, stderr);
    ts_diags_free(&d);
    if (rc == 0 && !o->cost_model) {
        free(cm->path);
        cm->path = ts_strdup(DEFAULT_COST_MODEL);
    }
    free(path);
    return rc;
}

/* What compile would choose, and why: the search's statistics, the chosen plan against the runner-up. */
static int explain_plan(const options *o, ts_spec *spec, ts_graph *g, const ts_rules *rs) {
    ts_costmodel cm;
    if (load_cost_model(o, &cm) != 0) {
        ts_costmodel_free(&cm);
        return EXIT_INPUT;
    }
    ts_compiled c;
    char *err = NULL;
    if (ts_compile(spec, NULL, g, rs, &cm, &c, &err) != 0) {
        fprintf(stderr, "%s: error: %s\n", o->file, err);
        free(err);
        ts_costmodel_free(&cm);
        return EXIT_INPUT;
    }
    printf("\n== plan (what compile chooses): the search lowered and predicted %d candidates from its seeds, %d moves "
           "improved the prediction; %d distinct plans kept, ranked with %s\n",
           c.search.evals, c.search.accepted, c.n, cm.path);
    const ts_plan *best = &c.plans[0], *next = c.n > 1 ? &c.plans[1] : NULL;
    printf("chosen:    %s, %d kernel%s, predicted %.4f ms (%.2fx the one-kernel-per-op baseline)\n", best->name, best->nk,
           best->nk == 1 ? "" : "s", best->predicted_s * 1e3, c.baseline_s / best->predicted_s);
    if (next)
        printf("runner-up: %s, %d kernel%s, predicted %.4f ms (%+.1f%%)\n", next->name, next->nk, next->nk == 1 ? "" : "s",
               next->predicted_s * 1e3, 100 * (next->predicted_s / best->predicted_s - 1));
    print_plan_pair(g, best, next);
    ts_compiled_free(&c);
    ts_costmodel_free(&cm);
    return 0;
}

static int cmd_explain(int argc, char **argv) {
    options o;
    int rc = parse_options(argc, argv, usage_explain, &o);
    if (rc >= 0) return rc;
    ts_spec spec;
    ts_graph g;
    ts_rules rs;
    rc = load_graph(&o, &spec, &g);
    int rrc = load_rules(&o, &rs);
    if (rc == 0) rc = rrc;
    if (rc == 0) rc = explain_partitioned(&o, &g, &rs);
    if (rc == 0) rc = explain_plan(&o, &spec, &g, &rs);
    ts_rule_free(&rs);
    ts_graph_free(&g);
    ts_spec_free(&spec);
    return rc;
}

/* ---- compile ----------------------------------------------------------------------------------- */

/* The ranking lists a plan's first RANKING_KERNELS kernels (a 32-layer stack has hundreds); `tsopt explain`
 * lists every one. */
enum { RANKING_KERNELS = 12 };

static void print_ranking(const ts_plan *plans, int n, const ts_graph *g, double baseline_s, int top) {
    printf("%-4s %-30s %8s %12s %9s  %s\n", "rank", "plan", "kernels", "predicted", "speedup", "kernels in order");
    for (int i = 0; i < n && i < top; i++) {
        char *desc = ts_plan_describe(&plans[i], g), *cut = desc;
        for (int k = 0; k < RANKING_KERNELS && cut; k++) cut = strstr(cut + (k ? 2 : 0), "; ");
        if (cut) *cut = 0;
        printf("%-4d %-30s %8d %9.4f ms %8.2fx  %s", i + 1, plans[i].name, plans[i].nk, plans[i].predicted_s * 1e3,
               baseline_s / plans[i].predicted_s, desc);
        if (cut) printf("; ... %d more (tsopt explain lists them)", plans[i].nk - RANKING_KERNELS);
        putchar('\n');
        free(desc);
    }
}

/* A warning for each GEMM of plan p that reads an operand whose rows are not 16-byte aligned: it cannot use TMA
 * and runs the mma.sync kernel's 4-byte or element-wise loader, a fifth to a tenth of the tensor-core rate
 * (bench/NOTES.md runs 117-118). Where the sizes are static and the GEMM large the search reads padded copies
 * instead (src/pad.h), so this names GEMMs where the copies would cost more than they save, or could not be
 * made (a run-time row length). Names the tensor and says what would fix it. An fp32 GEMM (gemm_f32.cuh) is
 * not named: its 4-byte loader is asynchronous and pipelined too. */
static void warn_unchunked_gemms(const char *file, const ts_graph *g, const ts_plan *p) {
    for (int i = 0; i < p->nk; i++) {
        const ts_kernel *k = &p->k[i];
        const int slot = k->kind == TS_KERNEL_GEMM && !k->cfg.tf32x3 ? ts_costmodel_gemm_unchunked_slot(k) : -1;
        if (slot < 0) continue;
        const ts_buffer *b = &p->buf[k->acc[slot].buf];
        const char *name = b->kind == TS_BUF_INPUT ? g->inputs[b->index].name : b->kind == TS_BUF_OUTPUT ? g->outputs[b->index].name : NULL;
        fprintf(stderr,
                "%s: warning: kernel %d (a GEMM) reads %s%s%s with a row stride or offset that is not a multiple of 8 "
                "elements (16 bytes): no TMA or 16-byte loads, a fifth to a tenth of the tensor-core rate (predicted %.4f ms); "
                "sizes along its rows that are multiples of 8 would avoid it\n",
                file, i + 1, name ? "'" : "an intermediate", name ? name : "", name ? "'" : "", k->predicted_s * 1e3);
    }
}

/* A warning for each matmul over fp32 operands of at least 0.1 GFLOP when the plan has no fp32 GEMM kernel (an
 * fp32 GEMM runs gemm_f32.cuh's 3xTF32 kernel, or cuBLASLt's SGEMM): no GEMM template took the contraction, so
 * it runs as a reduction on the CUDA cores, a tenth of the tensor-core rate or less. Names the place and says
 * what would help. */
static void warn_fp32_matmuls(const char *file, const ts_graph *g, const ts_plan *p) {
    for (int i = 0; i < p->nk; i++)
        if (ts_gemm_fp32(p, &p->k[i])) return;
    for (int i = 0; i < g->nnamed; i++) {
        const ts_named *t = &g->named[i];
        const ts_node *n = &g->nodes[t->ref.node];
        if (strcmp(t->op, "matmul") != 0 || n->op != TS_OP_REDUCE_SUM || n->dtype != TS_FP32) continue;
        double flops = 2.0 * (double)ts_view_numel(&n->src[0].view);
        if (flops < 1e8) continue;
        fprintf(stderr,
                "%s:%d:%d: warning: matmul '%s' is fp32 (%.1f GFLOP) and no GEMM template took it, so it runs as a "
                "reduction on the CUDA cores; cast its operands to bf16 or fp16 (tsopt_torch.export --dtype bfloat16) "
                "for the fp16/bf16 tensor-core GEMMs\n",
                file, t->line, t->col, t->name, flops * 1e-9);
    }
}

/* Writes the best-ranked plan the emitter can express as DIR/<graph>.cuh. */
static int write_best(const options *o, const ts_spec *spec, const ts_graph *g, const ts_plan *plans, int n,
                      const ts_costmodel *cm, double baseline) {
    char *templates = o->templates ? ts_strdup(o->templates) : ts_data_path("templates");
    ts_emit_opts eo = {.source_path = o->file, .source_text = spec->text, .source_len = spec->len,
                       .templates_dir = templates, .cost_model = cm, .baseline_s = baseline, .name = o->name};
    for (int i = 0; i < n; i++) {
        char *err = NULL;
        if (ts_emit_header_file(o->out_dir, g, &plans[i], &eo, &err) == 0) {
            printf("wrote %s/%s.cuh (plan %d: %s, predicted %.4f ms)\n", o->out_dir, o->name ? o->name : g->name, i + 1,
                   plans[i].name, plans[i].predicted_s * 1e3);
            warn_unchunked_gemms(o->file, g, &plans[i]);
            warn_fp32_matmuls(o->file, g, &plans[i]);
            if (ts_plan_uses_cublas(&plans[i]))
                printf("note: the header runs GEMMs by cuBLASLt (--allow-cublas): link the program with -lcublasLt\n");
            free(templates);
            return 0;
        }
        bool plan_specific = strncmp(err, "cannot read", 11) != 0; /* else no plan can be written */
        fprintf(stderr, "%s: %s: plan %d (%s) cannot be emitted: %s\n", o->file, plan_specific ? "note" : "error", i + 1,
                plans[i].name, err);
        free(err);
        if (!plan_specific) break;
    }
    fprintf(stderr, "%s: error: no plan could be emitted\n", o->file);
    free(templates);
    return EXIT_INPUT;
}

static int compile_plans(const options *o, ts_spec *spec, const ts_binding *bind, ts_graph *g, const ts_rules *rs,
                         const ts_costmodel *cm) {
    ts_compiled c;
    char *err = NULL;
    if (ts_compile_with(spec, bind, g, rs, cm, o->allow_cublas, &c, &err) != 0) {
        fprintf(stderr, "%s: error: %s\n", o->file, err);
        free(err);
        return EXIT_INPUT;
    }
    printf("graph %s: %d candidate plans, ranked with %s (%s%s)\n", g->name, c.n, cm->path, cm->gpu,
           cm->calibrated ? "" : ", uncalibrated");
    print_ranking(c.plans, c.n, g, c.baseline_s, (int)o->top);
    int rc = write_best(o, spec, g, c.plans, c.n, cm, c.baseline_s);
    ts_compiled_free(&c);
    return rc;
}

/* What compile and tune start from: the graph at --dims, the rules and the cost model. */
typedef struct {
    ts_spec spec;
    ts_graph g;
    ts_binding bind;
    ts_rules rs;
    ts_costmodel cm;
} compile_inputs;

/* Loads every part (each is freed by free_compile_inputs whatever the result). Returns 0 or EXIT_INPUT
 * (diagnostics printed). */
static int load_compile_inputs(const options *o, compile_inputs *in) {
    memset(&in->cm, 0, sizeof in->cm);
    int rc = load_graph_bound(o, &in->spec, &in->g, &in->bind);
    int rrc = load_rules(o, &in->rs);
    if (rc == 0) rc = rrc;
    if (rc == 0) rc = load_cost_model(o, &in->cm);
    return rc;
}

static void free_compile_inputs(compile_inputs *in) {
    ts_binding_free(&in->bind);
    ts_costmodel_free(&in->cm);
    ts_rule_free(&in->rs);
    ts_graph_free(&in->g);
    ts_spec_free(&in->spec);
}

static int cmd_compile(int argc, char **argv) {
    options o;
    int rc = parse_options(argc, argv, usage_compile, &o);
    if (rc >= 0) return rc;
    compile_inputs in;
    rc = load_compile_inputs(&o, &in);
    if (rc == 0) rc = compile_plans(&o, &in.spec, &in.bind, &in.g, &in.rs, &in.cm);
    free_compile_inputs(&in);
    return rc;
}

/* ---- verify-rules ------------------------------------------------------------------------------ */

static int cmd_verify(int argc, char **argv) {
    ts_verify_opts vo = {.trials = 40, .seed = 1};
    const char *paths[64];
    int npaths = 0;
    for (int i = 0; i < argc; i++) {
        double v;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_verify, stdout);
            return 0;
        } else if (strcmp(argv[i], "--trials") == 0 || strcmp(argv[i], "--seed") == 0) {
            if (i + 1 >= argc) return usage_error(usage_verify, "missing value for", argv[i]);
            if (parse_number_arg(argv[i + 1], &v) != 0 || v < 1) return usage_error(usage_verify, "bad number", argv[i + 1]);
            if (strcmp(argv[i], "--trials") == 0) vo.trials = v > 100000 ? 100000 : (int)v;
            else vo.seed = (uint64_t)v;
            i++;
        } else if (argv[i][0] == '-') {
            return usage_error(usage_verify, "unknown option", argv[i]);
        } else if (npaths < 64) {
            paths[npaths++] = argv[i];
        } else {
            return usage_error(usage_verify, "too many paths; at most 64", NULL);
        }
    }
    char *dflt = npaths == 0 ? ts_data_path("rules") : NULL;
    if (npaths == 0) paths[npaths++] = dflt;
    ts_rules rs;
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&rs, &env);
    int rc = ts_load_rule_paths(&rs, paths, npaths, stderr) ? EXIT_INPUT : 0;
    if (rc == 0 && rs.nrules == 0) {
        fprintf(stderr, "tsopt: error: no rules found in the given paths\n");
        rc = EXIT_INPUT;
    }
    if (rc == 0 && ts_verify_all(&rs, &vo, stdout) > 0) rc = EXIT_INPUT;
    ts_rule_free(&rs);
    free(dflt);
    return rc;
}

/* ---- calibrate --------------------------------------------------------------------------------- */

/* ---- tune -------------------------------------------------------------------------------------- */

static char *default_cache_dir(void) {
    const char *env = getenv("TSOPT_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && *env) return ts_strdup(env);
    if (xdg && *xdg) return ts_strfmt("%s/tsopt", xdg);
    return ts_strfmt("%s/.cache/tsopt", home && *home ? home : ".");
}

/* Takes tune's own options out of argv (the rest go to parse_options). Returns -1 to go on, or an exit code. */
static int parse_tune_options(int argc, char **argv, ts_tune_opts *to, char **rest, int *nrest) {
    *nrest = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--build-only") == 0) {
            to->build_only = true;
        } else if (strcmp(a, "--record") == 0 || strcmp(a, "--cache") == 0 || strcmp(a, "--arch") == 0 ||
                   strcmp(a, "--nvcc") == 0 || strcmp(a, "--jobs") == 0 || strcmp(a, "--reps") == 0 ||
                   strcmp(a, "--warmup") == 0 || strcmp(a, "--watchdog") == 0) {
            if (i + 1 >= argc) return usage_error(usage_tune, "missing value for", a);
            const char *v = argv[++i];
            double x;
            if (strcmp(a, "--record") == 0) to->record = v;
            else if (strcmp(a, "--cache") == 0) to->cache_dir = v;
            else if (strcmp(a, "--nvcc") == 0) to->nvcc = v;
            else if (strcmp(a, "--arch") == 0) {
                to->arch = strncmp(v, "sm_", 3) == 0 ? v + 3 : v;
                for (const char *c = to->arch; *c; c++)
                    if (!isalnum((unsigned char)*c) || strlen(to->arch) > 8)
                        return usage_error(usage_tune, "--arch wants a target such as 90a or sm_80, not", v);
            } else if (parse_number_arg(v, &x) != 0 || x < (strcmp(a, "--warmup") == 0 ? 0 : 1) || x > 10000)
                return usage_error(usage_tune, "bad number", v);
            else if (strcmp(a, "--jobs") == 0) to->jobs = (int)x;
            else if (strcmp(a, "--reps") == 0) to->reps = (int)x;
            else if (strcmp(a, "--watchdog") == 0) to->watchdog_s = x;
            else to->warmup = (int)x;
        } else {
            rest[(*nrest)++] = argv[i];
        }
    }
    return -1;
}

static int cmd_tune(int argc, char **argv) {
    ts_tune_opts to = {.top = 4, .reps = 20, .warmup = 3, .watchdog_s = 120};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    to.jobs = cpus > 0 ? (int)cpus : 1;
    char **rest = ts_xcalloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0;
    int rc = parse_tune_options(argc, argv, &to, rest, &nrest);
    options o;
    if (rc < 0) rc = parse_options(nrest, rest, usage_tune, &o);
    free(rest);
    if (rc >= 0) return rc;
    bool out_given = false, top_given = false;
    for (int i = 0; i < argc; i++) out_given |= strcmp(argv[i], "-o") == 0, top_given |= strcmp(argv[i], "--top") == 0;
    compile_inputs in;
    rc = load_compile_inputs(&o, &in);
    ts_compiled c = {0};
    char *err = NULL, *cache = to.cache_dir ? NULL : default_cache_dir(), *templates = NULL;
    if (rc == 0 && ts_compile_with(&in.spec, &in.bind, &in.g, &in.rs, &in.cm, o.allow_cublas, &c, &err) != 0) {
        fprintf(stderr, "%s: error: %s\n", o.file, err);
        free(err);
        rc = EXIT_INPUT;
    }
    if (rc == 0) {
        to.file = o.file, to.spec = &in.spec, to.bind = &in.bind, to.g = &in.g, to.cm = &in.cm;
        to.plans = c.plans, to.nplans = c.n, to.baseline_s = c.baseline_s;
        to.top = !top_given ? 4 : o.top >= 1 ? (int)(o.top > 1000 ? 1000 : o.top) : 1, to.seed = o.seed;
        to.out_dir = out_given ? o.out_dir : "tuned";
        to.allow_library = o.allow_cublas;
        to.templates_dir = templates = o.templates ? ts_strdup(o.templates) : ts_data_path("templates");
        if (!to.cache_dir) to.cache_dir = cache;
        rc = ts_tune(&to);
        if (rc == 3) rc = EXIT_LIMIT;
    }
    free(cache);
    free(templates);
    ts_compiled_free(&c);
    free_compile_inputs(&in);
    return rc;
}

/* Reads calibrate's arguments into co (records: room for argc entries); 0, or the usage exit code. */
static int parse_calibrate(int argc, char **argv, ts_calib_opts *co, const char **records, const char **held_out) {
    const char *gpu_only = NULL; /* an option that applies to the microbenchmarks only */
    int nrec = 0, nheld = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0) {
            co->quick = true, gpu_only = a;
        } else if (strcmp(a, "--events") == 0) {
            co->events = true, gpu_only = a;
        } else if (strcmp(a, "--from-tune") == 0) {
            int before = nrec;
            while (i + 1 < argc && (argv[i + 1][0] != '-' || !argv[i + 1][1])) records[nrec++] = argv[++i];
            if (nrec == before) return usage_error(usage_calibrate, "--from-tune wants one or more record files", NULL);
        } else if (strcmp(a, "--evaluate") == 0) {
            int before = nheld;
            while (i + 1 < argc && (argv[i + 1][0] != '-' || !argv[i + 1][1])) held_out[nheld++] = argv[++i];
            if (nheld == before) return usage_error(usage_calibrate, "--evaluate wants one or more record files", NULL);
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--base") == 0 || strcmp(a, "--kernels") == 0 ||
                   strcmp(a, "--date") == 0) {
            if (i + 1 >= argc) return usage_error(usage_calibrate, "missing value for", a);
            const char *v = argv[++i];
            if (strcmp(a, "-o") == 0) co->out_path = v;
            else if (strcmp(a, "--base") == 0) co->base_path = v;
            else if (strcmp(a, "--kernels") == 0) co->kernels = v, gpu_only = a;
            else if (ts_calib_parse_date(v, &co->when) != 0)
                return usage_error(usage_calibrate, "--date wants YYYY-MM-DD, not", v);
        } else {
            return usage_error(usage_calibrate, a[0] == '-' ? "unknown option" : "unexpected argument", a);
        }
    }
    if (nrec && gpu_only) return usage_error(usage_calibrate, "--from-tune does not go with", gpu_only);
    if (nheld && !nrec) return usage_error(usage_calibrate, "--evaluate goes with --from-tune", NULL);
    co->from_tune = records, co->nfrom_tune = nrec;
    co->evaluate = held_out, co->nevaluate = nheld;
    return 0;
}

static int cmd_calibrate(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_calibrate, stdout);
            return 0;
        }
    char *base = ts_data_path(DEFAULT_COST_MODEL);
    ts_calib_opts co = {.base_path = base, .when = time(NULL)};
    const char **records = ts_xcalloc((size_t)argc + 1, sizeof *records);
    const char **held_out = ts_xcalloc((size_t)argc + 1, sizeof *held_out);
    int rc = parse_calibrate(argc, argv, &co, records, held_out);
    if (rc == 0) {
        rc = co.nfrom_tune ? ts_calibrate_from_tune(&co) : ts_calibrate(&co);
        rc = rc == TS_CALIB_NO_GPU ? EXIT_LIMIT : rc == TS_CALIB_OK ? 0 : EXIT_INPUT;
    }
    free(records);
    free(held_out);
    free(base);
    return rc;
}

/* ---- dispatch ---------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"check", cmd_check},
    {"eval", cmd_eval},
    {"compile", cmd_compile},
    {"explain", cmd_explain},
    {"verify-rules", cmd_verify},
    {"calibrate", cmd_calibrate},
    {"tune", cmd_tune},
};

/* Extraction and planning recurse along the graph's paths (up to TS_MAX_DEPTH ops deep, a few KB a
 * level, more under the sanitizers): commands run on a thread with a 1 GiB stack (address space only
 * until used) rather than the default 8 MiB. The stack is mapped here as glibc maps one for
 * pthread_attr_setstacksize (read-write, one PROT_NONE guard page below it), but in one read-write mmap:
 * glibc maps it PROT_NONE and then mprotects the 1 GiB read-write, which valgrind's memcheck takes about
 * 4 s to track, in every command under valgrind (make valgrind-cli runs 69). */
#define TS_STACK_BYTES ((size_t)1 << 30)

typedef struct {
    int (*run)(int argc, char **argv);
    int argc;
    char **argv;
    int rc;
} command_call;

static void *call_command(void *arg) {
    command_call *c = arg;
    c->rc = c->run(c->argc, c->argv);
    return NULL;
}

static int run_on_big_stack(int (*run)(int, char **), int argc, char **argv) {
    command_call c = {run, argc, argv, 0};
    long page = sysconf(_SC_PAGESIZE);
    size_t guard = page > 0 ? (size_t)page : 4096;
    char *mem = mmap(NULL, guard + TS_STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                     -1, 0);
    if (mem == MAP_FAILED) return run(argc, argv); /* no stack: the default one */
    pthread_attr_t attr;
    pthread_t th;
    int started = 0;
    if (mprotect(mem, guard, PROT_NONE) == 0 && pthread_attr_init(&attr) == 0) {
        started = pthread_attr_setstack(&attr, mem + guard, TS_STACK_BYTES) == 0 &&
                  pthread_create(&th, &attr, call_command, &c) == 0;
        if (started) pthread_join(th, NULL);
        pthread_attr_destroy(&attr);
    }
    munmap(mem, guard + TS_STACK_BYTES);
    return started ? c.rc : run(argc, argv); /* no thread: the default stack */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("tsopt %s\n", TS_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return run_on_big_stack(commands[i].run, argc - 2, argv + 2);
    fprintf(stderr, "tsopt: error: unknown command '%s'\n\n%s", argv[1], usage_main);
    return EXIT_USAGE;
}
