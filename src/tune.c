/* tune.c — `tsopt tune` (see tune.h): candidates emitted and built into the cache, the sampled reference,
 * validation and timing on the GPU through the header's C ABI, the choice, the tuned header and the record
 * (docs/tune-records.md). */
#include "tune.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "emit.h"
#include "gpu.h"
#include "interp.h"
#include "libgemm.h"
#include "sample.h"
#include "sym.h"
#include "util.h"
#include "version.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_NO_GPU = 3 };

#define REF_ROWS 32             /* rows kept per sampled axis */
#define REF_BUDGET_FLOPS 2.5e9  /* float64 work of the reference (~5 s of the interpreter) */
#define REF_MIN_DYN 16          /* dynamic axes are validated at no fewer than this many */
#define FLUSH_BYTES ((size_t)256 << 20)

/* ---- candidates: selection and table (no GPU) -------------------------------------------------- */

const char *ts_cand_status_name(ts_cand_status s) {
    switch (s) {
    case TS_CAND_OK: return "ok";
    case TS_CAND_INVALID: return "invalid";
    case TS_CAND_BUILD_FAILED: return "build-failed";
    case TS_CAND_RUN_FAILED: return "run-failed";
    default: return "pending";
    }
}

int ts_tune_select(const ts_tune_cand *c, int n) {
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (c[i].status != TS_CAND_OK || !(c[i].measured_s > 0)) continue;
        if (best < 0 || c[i].measured_s < c[best].measured_s ||
            (c[i].measured_s == c[best].measured_s && c[i].rank < c[best].rank))
            best = i;
    }
    return best;
}

static void print_ms(FILE *out, double s) {
    if (isfinite(s)) fprintf(out, " %9.4f ms", s * 1e3);
    else fprintf(out, " %12s", "-");
}

void ts_tune_print_table(FILE *out, const ts_tune_cand *c, int n, int chosen) {
    fprintf(out, "%-4s %-30s %7s %12s %12s %8s  %s\n", "rank", "plan", "kernels", "predicted", "measured", "error",
            "status");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%-4d %-30s %7d", c[i].rank, c[i].plan->name, c[i].plan->nk);
        print_ms(out, c[i].predicted_s);
        print_ms(out, c[i].measured_s);
        if (isfinite(c[i].measured_s) && c[i].measured_s > 0)
            fprintf(out, " %+7.1f%%", 100 * (c[i].predicted_s - c[i].measured_s) / c[i].measured_s);
        else fprintf(out, " %8s", "-");
        fprintf(out, "  %s%s%s%s\n", ts_cand_status_name(c[i].status), c[i].detail ? " (" : "",
                c[i].detail ? c[i].detail : "", c[i].detail ? ")" : "");
        if (i == chosen) fprintf(out, "     ^ chosen: the fastest valid candidate\n");
    }
}

/* ---- the tuning session ------------------------------------------------------------------------ */

typedef struct {
    const ts_tune_opts *o;
    ts_tune_cand *c;
    int n;
    ts_dyn dyn;                   /* the graph's dynamic axes (the C ABI's dims, in order) */
    int64_t time_dims[TS_SYM_MAX_DYN], val_dims[TS_SYM_MAX_DYN];
    /* validation */
    ts_binding vbind;             /* the sizes validated at */
    ts_graph vg;                  /* checked at vbind */
    ts_sample_plan sp;
    double **vin;                 /* inputs at vbind (float64, exactly representable) */
    double **ref;                 /* sampled reference outputs */
    char ref_key[17];
    /* GPU */
    ts_cuda cu;
    ts_cupti cp;
    bool gpu_open, cupti_on;
    CUdevice dev;
    CUcontext ctx;
    char gpu_name[128], driver[128], err[1024];
    int cc_major, cc_minor;
    CUdeviceptr *din, *dout, *tin, *tout, flush, ws;
    size_t ws_bytes;
    char arch[16];                /* the compile target: "90a" */
    bool other_kinds;             /* a candidate beside the top plans: the best of other kernel kinds (TUNE_DIVERSE) */
} tuner;

static const char *flags_text(const tuner *t) {
    static char buf[160];
    snprintf(buf, sizeof buf, "-O3 -std=c++17 -gencode=arch=compute_%s,code=sm_%s -Xcompiler -fPIC -shared", t->arch,
             t->arch);
    return buf;
}

static char *emit_to_string(const ts_tune_opts *o, const ts_plan *p, const char *measured, size_t *len, char **err) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) {
        *err = ts_strfmt("open_memstream: %s", strerror(errno));
        return NULL;
    }
    ts_emit_opts eo = {.source_path = o->file, .source_text = o->spec->text, .source_len = o->spec->len,
                       .templates_dir = o->templates_dir, .cost_model = o->cm, .baseline_s = o->baseline_s,
                       .measured = measured};
    int rc = ts_emit_header(f, o->g, p, &eo, err);
    fclose(f);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void hash_hex(unsigned long long h, char out[17]) { snprintf(out, 17, "%016llx", h); }

/* ---- candidates: the top plans, and configurations of the best ------------------------------------ */

enum { TUNE_CONFIG_VARIANTS = 2 };
/* With --allow-cublas one more: the best plan with every GEMM cuBLASLt can run run by it, timed whatever its
 * prediction (the model knows the library's rate only as well as its records; a user who accepts the
 * dependency should never get a plan slower than cuBLAS where cuBLAS could run it). */
enum { TUNE_LIBRARY_VARIANTS = 1 };
/* A plan predicted more than this many times the best plan's time is not timed: the cost model is within
 * 10-50% on every timed kernel kind but one (a contraction computed as a reduce kernel, predicted 2.3 ms and
 * measured 91.5 ms: timing it cost seconds of GPU time a tune and could not have won). */
#define TUNE_HOPELESS 10.0
/* With --top 2 or more, one more candidate: the best plan with other kinds of kernels than the top ones, when one
 * is predicted within this many times the best. The model is surest between near twins; an error between kernel
 * kinds (an attention kernel with a score mask at head dim 256 against its score GEMM, softmax and P·V) is what
 * only timing both can catch. */
#define TUNE_DIVERSE 1.15

static void free_variant(ts_plan *q) {
    if (!q) return;
    free(q->name), free(q->k), free(q);
}

/* A shallow copy of p named `name` (taken), its kernels' array its own: kernels share operands and expressions
 * with p, so that only their configurations may be changed (freed by free_variant). */
static ts_plan *shallow_variant(const ts_plan *p, char *name) {
    ts_plan *q = ts_xmalloc(sizeof *q);
    *q = *p;
    q->k = ts_xmalloc(sizeof *q->k * (size_t)p->nk);
    memcpy(q->k, p->k, sizeof *q->k * (size_t)p->nk);
    q->cap_k = p->nk;
    q->name = name;
    return q;
}

/* Plan p with every GEMM's configuration replaced by its variant v (config.h) where it has one, predicted;
 * NULL when no kernel has a variant v. A shallow copy: its kernels share operands and expressions with p. */
static ts_plan *plan_variant(const tuner *t, const ts_plan *p, int v) {
    ts_plan *q = NULL;
    for (int i = 0; i < p->nk; i++) {
        ts_kernel_config alt[TS_CONFIG_MAX_VARIANTS];
        if (ts_config_variants(t->o->g, p, &p->k[i], false, t->o->cm->sms, alt, TS_CONFIG_MAX_VARIANTS) <= v) continue;
        if (!q) q = shallow_variant(p, ts_strfmt("%s, config %d", p->name, v + 2));
        q->k[i].cfg = alt[v];
    }
    if (q) ts_costmodel_predict(t->o->cm, t->o->g, q);
    return q;
}

/* Plan p with every GEMM that cuBLASLt can run (libgemm.h) configured to, predicted; NULL when none can.
 * A shallow copy, as plan_variant's. */
static ts_plan *plan_library(const tuner *t, const ts_plan *p) {
    ts_plan *q = NULL;
    for (int i = 0; i < p->nk; i++) {
        ts_kernel_config alt[TS_CONFIG_MAX_VARIANTS];
        int n = ts_config_variants(t->o->g, p, &p->k[i], true, t->o->cm->sms, alt, TS_CONFIG_MAX_VARIANTS);
        if (n == 0 || !alt[n - 1].library) continue; /* the library's is the last */
        if (!q) q = shallow_variant(p, ts_strfmt("%s, cuBLASLt GEMMs", p->name));
        q->k[i].cfg = alt[n - 1];
    }
    if (q) ts_costmodel_predict(t->o->cm, t->o->g, q);
    return q;
}

/* Candidate t->n: plan (ranked `rank`; `owned` when it is a configuration variant) as a header, unless it
 * cannot be emitted or its code equals a better-ranked candidate's. Returns whether it was added. */
static bool add_candidate(tuner *t, int rank, const ts_plan *plan, ts_plan *owned) {
    const ts_tune_opts *o = t->o;
    ts_tune_cand *c = &t->c[t->n];
    char *err = NULL;
    *c = (ts_tune_cand){.rank = rank, .plan = plan, .predicted_s = plan->predicted_s, .measured_s = NAN,
                        .rel_error = NAN, .owned = owned};
    c->header = emit_to_string(o, c->plan, NULL, &c->header_len, &err);
    if (!c->header) {
        fprintf(stderr, "%s: note: plan %d (%s) cannot be emitted: %s\n", o->file, rank, c->plan->name, err);
        free(err);
        free_variant(owned);
        return false;
    }
    /* the key is the code past the banner (whose predicted times move with the cost model) and the
     * compiler flags; a plan whose code equals a better-ranked one's is not a new candidate */
    const char *code = strstr(c->header, "\n#ifndef "), *flags = flags_text(t);
    if (!code) code = c->header;
    c->code_hash = ts_fnv1a(ts_fnv1a(TS_FNV_OFFSET, code, strlen(code)), flags, strlen(flags));
    hash_hex(c->code_hash, c->hash);
    bool dup = false;
    for (int j = 0; j < t->n; j++) dup |= t->c[j].code_hash == c->code_hash;
    if (dup) {
        free(c->header);
        free_variant(owned);
        return false;
    }
    c->lib = ts_strfmt("%s/%s/lib%s.so", o->cache_dir, c->hash, o->g->name);
    c->kernel_s = ts_xmalloc(sizeof(double) * (size_t)(c->plan->nk ? c->plan->nk : 1));
    for (int k = 0; k < c->plan->nk; k++) c->kernel_s[k] = NAN;
    t->n++;
    return true;
}

/* v[0..n) by predicted time, stably (a tie keeps the order of config.c's list). */
static void sort_by_prediction(ts_plan **v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j]->predicted_s < v[j - 1]->predicted_s; j--) {
            ts_plan *x = v[j];
            v[j] = v[j - 1], v[j - 1] = x;
        }
}

/* The best plan again under its GEMMs' other configurations (config.h): variant v gives every GEMM its
 * v-th alternative where it has one; the cost model ranks them and the TUNE_CONFIG_VARIANTS best become
 * candidates, so tune times a handful of configurations, not every combination. */
static void add_config_variants(tuner *t) {
    if (t->n == 0) return;
    ts_plan *v[TS_CONFIG_MAX_VARIANTS];
    int nv = 0;
    for (ts_plan *q; nv < TS_CONFIG_MAX_VARIANTS && (q = plan_variant(t, t->c[0].plan, nv)) != NULL;) v[nv++] = q;
    sort_by_prediction(v, nv);
    int added = 0;
    for (int i = 0; i < nv; i++) /* ranked after every plan: a tie keeps the default configuration */
        if (i < TUNE_CONFIG_VARIANTS) added += add_candidate(t, t->o->nplans + 1 + added, v[i], v[i]);
        else free_variant(v[i]);
    ts_plan *lib = t->o->allow_library && !ts_plan_uses_cublas(t->c[0].plan) ? plan_library(t, t->c[0].plan) : NULL;
    if (lib) add_candidate(t, t->o->nplans + 1 + added, lib, lib);
}

/* Plan p's kernels of each kind that take a tenth of its predicted time or more, added into n (sign +1) or taken
 * from it (-1): what a plan computes its graph with, its small kernels (a bias's sum, a weight's copy) left out. */
static void count_main_kernels(const ts_plan *p, int sign, int *n) {
    for (int i = 0; i < p->nk; i++) n[p->k[i].kind] += sign * (p->k[i].predicted_s >= 0.1 * p->predicted_s);
}

/* Whether plans a and b run the same main kernels (near twins: another tiling, order of axes or small kernel), not
 * two ways of computing the graph (one attention kernel against a score GEMM, a softmax row kernel and P·V). */
static bool same_kernel_kinds(const ts_plan *a, const ts_plan *b) {
    int n[TS_NKINDS] = {0};
    count_main_kernels(a, 1, n);
    count_main_kernels(b, -1, n);
    for (int k = 0; k < TS_NKINDS; k++)
        if (n[k] != 0) return false;
    return true;
}

/* The best-ranked plan from index `from` on, predicted within TUNE_DIVERSE times the best, whose kernel kinds
 * differ from every candidate's so far; -1 when there is none. */
static int first_other_kinds(const tuner *t, int from) {
    const ts_tune_opts *o = t->o;
    for (int i = from; i < o->nplans && o->plans[i].predicted_s <= TUNE_DIVERSE * o->plans[0].predicted_s; i++) {
        bool seen = false;
        for (int j = 0; j < t->n && !seen; j++) seen = same_kernel_kinds(&o->plans[i], t->c[j].plan);
        if (!seen) return i;
    }
    return -1;
}

/* The top K plans as headers (those predicted within TUNE_HOPELESS times the best; the plans come best
 * predicted first), duplicates (the same header text) dropped; with K ≥ 2 also the best plan that computes the
 * graph with other kinds of kernels than those, where one is predicted within TUNE_DIVERSE of the best; then
 * configuration variants of the best. */
static void make_candidates(tuner *t) {
    const ts_tune_opts *o = t->o;
    t->c = ts_xcalloc((size_t)o->nplans + 1 + TUNE_CONFIG_VARIANTS + TUNE_LIBRARY_VARIANTS, sizeof *t->c);
    for (int i = 0; i < o->nplans && t->n < o->top; i++) {
        if (i > 0 && o->plans[i].predicted_s > TUNE_HOPELESS * o->plans[0].predicted_s) break;
        add_candidate(t, i + 1, &o->plans[i], NULL);
    }
    const int other = o->top >= 2 && t->n > 0 ? first_other_kinds(t, 0) : -1;
    t->other_kinds = other >= 0 && add_candidate(t, other + 1, &o->plans[other], NULL);
    add_config_variants(t);
}

/* ---- building into the cache ------------------------------------------------------------------- */

static int mkdir_p(const char *path) {
    char *p = ts_strdup(path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) break;
            *s = '/';
        }
    int rc = mkdir(p, 0777) == 0 || errno == EEXIST ? 0 : -1;
    free(p);
    return rc;
}

static int write_file(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    bool ok = fwrite(text, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* The CUDA compiler: --nvcc, $TSOPT_NVCC, nvcc on the PATH, /usr/local/cuda/bin/nvcc. */
static const char *find_nvcc(const ts_tune_opts *o) {
    if (o->nvcc) return o->nvcc;
    const char *env = getenv("TSOPT_NVCC");
    if (env && *env) return env;
    const char *path = getenv("PATH");
    static char found[4096];
    for (const char *s = path; s && *s;) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        snprintf(found, sizeof found, "%.*s/nvcc", (int)n, s);
        if (access(found, X_OK) == 0) return found;
        s = e ? e + 1 : s + n;
    }
    return access("/usr/local/cuda/bin/nvcc", X_OK) == 0 ? "/usr/local/cuda/bin/nvcc" : NULL;
}

typedef struct {
    pid_t pid;
    char *tmp, *final;
    int cand;
} build_job;

/* Writes the header and its C ABI translation unit into a fresh temporary folder and starts nvcc there. */
static int start_build(tuner *t, int ci, const char *nvcc, build_job *job) {
    const ts_tune_opts *o = t->o;
    ts_tune_cand *c = &t->c[ci];
    job->cand = ci;
    job->final = ts_strfmt("%s/%s", o->cache_dir, c->hash);
    job->tmp = ts_strfmt("%s/%s.tmp.%ld", o->cache_dir, c->hash, (long)getpid());
    char *hdr = ts_strfmt("%s/%s.cuh", job->tmp, o->g->name), *tu = ts_strfmt("%s/%s.cu", job->tmp, o->g->name);
    char *upper = ts_strdup(o->g->name);
    for (char *s = upper; *s; s++) *s = (char)(*s >= 'a' && *s <= 'z' ? *s - 32 : *s);
    char *tu_text = ts_strfmt("#define TSOPT_%s_IMPLEMENTATION\n#include \"%s.cuh\"\n", upper, o->g->name);
    int rc = mkdir_p(job->tmp) == 0 && write_file(hdr, c->header, c->header_len) == 0 &&
                     write_file(tu, tu_text, strlen(tu_text)) == 0
                 ? 0
                 : -1;
    char *lib = ts_strfmt("%s/lib%s.so", job->tmp, o->g->name), *log = ts_strfmt("%s/build.log", job->tmp);
    char *gencode = ts_strfmt("-gencode=arch=compute_%s,code=sm_%s", t->arch, t->arch);
    if (rc == 0) {
        job->pid = fork();
        if (job->pid == 0) {
            FILE *lf = freopen(log, "w", stdout);
            if (lf) dup2(fileno(stdout), 2);
            /* --allow-cublas: a header that calls cuBLASLt links it (otherwise the list ends there) */
            const char *lt = ts_plan_uses_cublas(c->plan) ? "-lcublasLt" : NULL;
            execl(nvcc, nvcc, "-O3", "-std=c++17", gencode, "-Xcompiler", "-fPIC", "-shared", "-o", lib, tu, lt,
                  (char *)NULL);
            fprintf(stderr, "cannot run %s: %s\n", nvcc, strerror(errno));
            _exit(127);
        }
        if (job->pid < 0) rc = -1;
    }
    if (rc != 0) {
        c->status = TS_CAND_BUILD_FAILED;
        c->detail = ts_strfmt("cannot write %s or start the compiler: %s", job->tmp, strerror(errno));
        job->pid = -1;
    }
    free(hdr), free(tu), free(upper), free(tu_text), free(lib), free(log), free(gencode);
    return rc;
}

/* The last line of the build log that says "error", for the table. */
static char *build_error(const char *dir) {
    char *path = ts_strfmt("%s/build.log", dir), line[512], *last = NULL;
    FILE *f = fopen(path, "r");
    free(path);
    if (!f) return ts_strdup("the compiler failed");
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strstr(line, "error")) {
            free(last);
            last = ts_strdup(line);
        }
    }
    fclose(f);
    return last ? last : ts_strdup("the compiler failed (see its build.log)");
}

static void finish_build(tuner *t, build_job *job, int status) {
    ts_tune_cand *c = &t->c[job->cand];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (rename(job->tmp, job->final) != 0 && !exists(c->lib)) {
            c->status = TS_CAND_BUILD_FAILED;
            c->detail = ts_strfmt("cannot move %s into the cache: %s", job->tmp, strerror(errno));
        }
    } else {
        c->status = TS_CAND_BUILD_FAILED;
        char *why = build_error(job->tmp);
        c->detail = ts_strfmt("%s; log in %s/build.log", why, job->tmp);
        free(why);
    }
    free(job->tmp), free(job->final);
}

/* Builds every candidate not in the cache, `jobs` compilers at a time. Returns the number built. */
static int build_missing(tuner *t) {
    const ts_tune_opts *o = t->o;
    int todo = 0;
    for (int i = 0; i < t->n; i++) todo += t->c[i].status == TS_CAND_PENDING && !exists(t->c[i].lib);
    if (!todo) return 0;
    const char *nvcc = find_nvcc(o);
    if (!nvcc || mkdir_p(o->cache_dir) != 0) {
        for (int i = 0; i < t->n; i++)
            if (t->c[i].status == TS_CAND_PENDING && !exists(t->c[i].lib)) {
                t->c[i].status = TS_CAND_BUILD_FAILED;
                t->c[i].detail = nvcc ? ts_strfmt("cannot create the cache %s: %s", o->cache_dir, strerror(errno))
                                      : ts_strdup("not in the cache, and no CUDA compiler (nvcc) to build it: "
                                                  "set --nvcc or $TSOPT_NVCC, or build with --build-only elsewhere");
            }
        return 0;
    }
    fprintf(stderr, "tune: building %d candidate%s with %s (%s)\n", todo, todo == 1 ? "" : "s", nvcc, flags_text(t));
    build_job *jobs = ts_xcalloc((size_t)todo, sizeof *jobs);
    int running = 0, next = 0, built = 0;
    for (;;) {
        while (running < (o->jobs > 0 ? o->jobs : 1) && next < t->n) {
            int i = next++;
            if (t->c[i].status != TS_CAND_PENDING || exists(t->c[i].lib)) continue;
            if (start_build(t, i, nvcc, &jobs[running]) == 0) running++;
        }
        if (running == 0) break;
        int status = 0;
        pid_t pid = wait(&status);
        for (int j = 0; j < running; j++)
            if (jobs[j].pid == pid) {
                finish_build(t, &jobs[j], status);
                built += t->c[jobs[j].cand].status == TS_CAND_PENDING;
                jobs[j] = jobs[--running];
                break;
            }
    }
    free(jobs);
    return built;
}

/* ---- the reference ----------------------------------------------------------------------------- */

static bool weight_name(const char *name) { return name[0] == 'W'; }

/* x[e] ← round(x[e] · scale) over a range of e (ts_parallel_ranges). */
typedef struct {
    double *x;
    ts_dtype dtype;
    double scale;
} scale_job;

static void scale_range(void *ctx, long long begin, long long end) {
    const scale_job *j = ctx;
    for (long long e = begin; e < end; e++) j->x[e] = ts_dtype_round(j->dtype, j->x[e] * j->scale);
}

/* Fresh inputs at the validation sizes: uniform in [-1, 1) rounded to each dtype; weight matrices (inputs
 * named W...) scaled by 1/sqrt(their first dim) so that fp16 activations stay in range through deep
 * graphs (the same convention as bench/gpu_check.py). */
static double **validation_inputs(const ts_graph *g, uint64_t seed) {
    double **in = ts_random_inputs(g, seed);
    for (int i = 0; i < g->ninputs; i++) {
        const ts_node *n = &g->nodes[g->inputs[i].node];
        if (!weight_name(g->inputs[i].name) || n->ndim < 2) continue;
        scale_job j = {in[i], n->dtype, 1 / sqrt((double)g->axes[n->axis[0]].size)};
        ts_parallel_ranges(ts_input_numel(g, i), TS_PARALLEL_MIN_PART, scale_range, &j);
    }
    return in;
}

/* bind with every dynamic root axis at `size[d]`. */
static void bind_dynamic(const ts_graph *g, const ts_binding *bind, const ts_dyn *dyn, const int64_t *size,
                         ts_binding *out) {
    ts_binding_copy(out, bind);
    for (int d = 0; d < dyn->n; d++) ts_binding_set(out, g->axes[dyn->axis[d]].name, size[d]);
}

/* The graph checked at dynamic sizes `dims` into t->vbind / t->vg, its sampled rows chosen into t->sp; the
 * sampled reference's FLOPs, or -1 when the graph does not check there. */
static double validation_flops(tuner *t, const int64_t *dims) {
    const ts_tune_opts *o = t->o;
    ts_binding_free(&t->vbind);
    bind_dynamic(o->g, o->bind, &t->dyn, dims, &t->vbind);
    ts_graph_free(&t->vg);
    ts_diags d;
    ts_diags_init(&d, o->spec->path, o->spec->text, o->spec->len);
    int rc = ts_check(o->spec, &t->vbind, &t->vg, &d);
    ts_diags_free(&d);
    if (rc != 0) return -1;
    ts_sample_free(&t->sp);
    ts_sample_choose(&t->vg, REF_ROWS, REF_BUDGET_FLOPS, o->seed, &t->sp);
    return ts_sample_flops(&t->vg, &t->sp);
}

/* Chooses the validation sizes and the sampled rows: while the sampled reference is over budget, each dynamic
 * axis whose halving saves at least REF_MIN_SAVING of its work is halved (not below REF_MIN_DYN). An axis that
 * costs little stays at its timed size: a decode step keeps its 4096-long cache (the weights' work does not
 * shrink with it), so the reference checks the kernels on the cache length they are timed at. */
#define REF_MIN_SAVING 0.1
static int plan_validation(tuner *t, char **err) {
    for (int d = 0; d < t->dyn.n; d++) t->val_dims[d] = t->time_dims[d];
    double flops = validation_flops(t, t->val_dims);
    while (flops > REF_BUDGET_FLOPS) {
        int64_t next[TS_SYM_MAX_DYN];
        memcpy(next, t->val_dims, sizeof next);
        for (int d = 0; d < t->dyn.n; d++) {
            if (t->val_dims[d] <= REF_MIN_DYN) continue;
            int64_t trial[TS_SYM_MAX_DYN];
            memcpy(trial, t->val_dims, sizeof trial);
            trial[d] = t->val_dims[d] / 2 > REF_MIN_DYN ? t->val_dims[d] / 2 : REF_MIN_DYN;
            double f = validation_flops(t, trial);
            if (f >= 0 && f <= (1 - REF_MIN_SAVING) * flops) next[d] = trial[d];
        }
        bool shrunk = memcmp(next, t->val_dims, sizeof next) != 0;
        memcpy(t->val_dims, next, sizeof next);
        flops = validation_flops(t, t->val_dims); /* t->vg and t->sp back at the chosen sizes after the trials */
        if (!shrunk) break;
    }
    if (flops < 0) {
        *err = ts_strdup("the graph does not check at the validation sizes");
        return -1;
    }
    return 0;
}

/* The key of the cached reference: the graph text, the sizes, the rows, the seed and the input policy. */
static void reference_key(tuner *t) {
    unsigned long long h = ts_fnv1a(TS_FNV_OFFSET, t->o->spec->text, t->o->spec->len);
    for (int a = 0; a < t->vg.naxes; a++) h = ts_fnv1a(h, &t->vg.axes[a].size, sizeof t->vg.axes[a].size);
    for (int s = 0; s < t->sp.n; s++) h = ts_fnv1a(h, t->sp.index[s], sizeof(int64_t) * (size_t)t->sp.count[s]);
    h = ts_fnv1a(h, &t->o->seed, sizeof t->o->seed);
    h = ts_fnv1a(h, "inputs v1: uniform, W/sqrt(fan-in)", 34);
    hash_hex(h, t->ref_key);
}

static int64_t output_sample_numel(const tuner *t, int i) {
    const ts_view *v = &t->vg.outputs[i].ref.view;
    return ts_sample_numel(&t->vg, v->axis, v->ndim, &t->sp);
}

static bool load_reference(tuner *t, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    t->ref = ts_xcalloc((size_t)t->vg.noutputs + 1, sizeof *t->ref);
    char magic[8] = {0};
    bool ok = fread(magic, 1, 8, f) == 8 && memcmp(magic, "TSREF1\n", 8) == 0;
    for (int i = 0; ok && i < t->vg.noutputs; i++) {
        int64_t n = output_sample_numel(t, i), got = -1;
        ok = fread(&got, sizeof got, 1, f) == 1 && got == n;
        if (ok) {
            t->ref[i] = ts_xmalloc(sizeof(double) * (size_t)n);
            ok = fread(t->ref[i], sizeof(double), (size_t)n, f) == (size_t)n;
        }
    }
    fclose(f);
    if (!ok) {
        ts_free_buffers(t->ref, t->vg.noutputs);
        t->ref = NULL;
    }
    return ok;
}

static void save_reference(tuner *t, const char *path) {
    char *tmp = ts_strfmt("%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite("TSREF1\n", 1, 8, f) == 8;
    for (int i = 0; ok && i < t->vg.noutputs; i++) {
        int64_t n = output_sample_numel(t, i);
        ok = fwrite(&n, sizeof n, 1, f) == 1 && fwrite(t->ref[i], sizeof(double), (size_t)n, f) == (size_t)n;
    }
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
    free(tmp);
}

/* Bytes of host memory the float64 validation inputs take (the interpreter's intermediates come on top). */
static double validation_input_bytes(const ts_graph *g) {
    double bytes = 0;
    for (int i = 0; i < g->ninputs; i++) bytes += 8.0 * (double)ts_input_numel(g, i);
    return bytes;
}

static double physical_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : INFINITY;
}

/* Inputs, and the reference from the cache or the interpreter (then cached). A reference whose float64
 * inputs would take over REF_MEMORY_SHARE of this machine's memory (a 32-layer stack: 56 GB) is not made:
 * --build-only leaves it to the GPU machine's tune (t->ref stays NULL), tune proper fails with the sizes. */
#define REF_MEMORY_SHARE 0.6
static int prepare_reference(tuner *t, char **err) {
    if (plan_validation(t, err) != 0) return -1;
    reference_key(t);
    double need = validation_input_bytes(&t->vg), have = physical_memory_bytes();
    if (need > REF_MEMORY_SHARE * have) {
        if (t->o->build_only) {
            fprintf(stderr, "tune: the float64 reference is left to the GPU machine: its inputs take %.1f GB, "
                            "this machine has %.1f GB\n", need * 1e-9, have * 1e-9);
            return 0;
        }
        *err = ts_strfmt("the float64 validation inputs take %.1f GB, more than %.0f%% of this machine's %.1f GB",
                         need * 1e-9, 100 * REF_MEMORY_SHARE, have * 1e-9);
        return -1;
    }
    t->vin = validation_inputs(&t->vg, t->o->seed);
    char *path = ts_strfmt("%s/ref-%s.bin", t->o->cache_dir, t->ref_key);
    int rc = 0;
    if (!load_reference(t, path)) {
        double f = ts_sample_flops(&t->vg, &t->sp);
        fprintf(stderr, "tune: computing the float64 reference (%.2f GFLOP%s)\n", f * 1e-9,
                t->sp.n ? ", sampled rows" : "");
        rc = ts_sample_reference(t->o->spec, &t->vbind, &t->vg, t->vin, &t->sp, &t->ref, err);
        if (rc == 0 && mkdir_p(t->o->cache_dir) == 0) save_reference(t, path);
    }
    free(path);
    return rc;
}

/* ---- the GPU ----------------------------------------------------------------------------------- */

static int cu_check(tuner *t, CUresult r, const char *what) {
    if (r == 0) return 0;
    const char *s = NULL;
    if (t->cu.cuGetErrorString) t->cu.cuGetErrorString(r, &s);
    snprintf(t->err, sizeof t->err, "%s failed: %s (CUresult %d)", what, s ? s : "unknown error", r);
    return -1;
}
#define CU(t, call) cu_check((t), (t)->cu.call, #call)

/* dlopen only: the parent never initialises CUDA (a child of a process that has cannot use it). */
static int load_driver(tuner *t) {
    char *why = NULL;
    if (ts_gpu_load_cuda(&t->cu, &why) == 0) return 0;
    snprintf(t->err, sizeof t->err, "tune needs the CUDA driver (a GPU machine): %s", why);
    free(why);
    return -1;
}

/* cuInit, the device's name and compute capability, its primary context made current (in a child). */
static int init_gpu(tuner *t) {
    int count = 0, ver = 0;
    if (CU(t, cuInit(0)) || CU(t, cuDeviceGetCount(&count))) return -1;
    if (count < 1) {
        snprintf(t->err, sizeof t->err, "the CUDA driver sees no GPU");
        return -1;
    }
    if (CU(t, cuDeviceGet(&t->dev, 0)) || CU(t, cuDeviceGetName(t->gpu_name, (int)sizeof t->gpu_name, t->dev)) ||
        CU(t, cuDriverGetVersion(&ver)) || CU(t, cuDeviceGetAttribute(&t->cc_major, 75, t->dev)) ||
        CU(t, cuDeviceGetAttribute(&t->cc_minor, 76, t->dev)) || CU(t, cuDevicePrimaryCtxRetain(&t->ctx, t->dev)) ||
        CU(t, cuCtxSetCurrent(t->ctx)))
        return -1;
    snprintf(t->driver, sizeof t->driver, "CUDA %d.%d", ver / 1000, ver % 1000 / 10);
    t->gpu_open = true;
    return 0;
}

/* CUPTI on, or the reason it is not in `note` (reported once by the parent). */
static void start_cupti(tuner *t, char *note, size_t cap) {
    char *why = NULL;
    if (ts_gpu_load_cupti(&t->cp, &why) == 0 && ts_cupti_start(&t->cp, &why) == 0) t->cupti_on = true;
    else snprintf(note, cap, "%s", why ? why : "CUPTI unavailable");
    free(why);
}

/* IEEE binary16 bits of x, rounded to nearest even. */
uint16_t ts_half_bits(double x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (isnan(x)) return 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00; /* rounds to infinity */
    if (a < 0x1p-14) {                      /* subnormal: multiples of 2^-24 */
        double q = nearbyint(a * 0x1p24);   /* default rounding mode: to nearest even */
        return sign | (uint16_t)q;          /* q == 1024 lands on the smallest normal, as it should */
    }
    int e;
    double m = frexp(a, &e); /* a = m · 2^e, m in [0.5, 1) */
    double q = nearbyint(m * 2048.0);           /* 11 significant bits */
    if (q == 2048.0) q = 1024.0, e++;
    if (e + 14 > 30) return sign | 0x7c00;
    return sign | (uint16_t)((e + 14) << 10) | (uint16_t)((int)q - 1024);
}

typedef struct {
    ts_dtype t;
    const double *x;
    void *out;
} convert_job;

static void convert_range(void *ctx, long long begin, long long end) {
    const convert_job *j = ctx;
    for (long long i = begin; i < end; i++) {
        float f = (float)j->x[i];
        if (j->t == TS_FP32) memcpy((char *)j->out + 4 * i, &f, 4);
        else if (j->t == TS_FP16) ((uint16_t *)j->out)[i] = ts_half_bits(j->x[i]);
        else { /* bf16: values are bf16-representable, so the top half of the float is exact */
            uint32_t u;
            memcpy(&u, &f, 4);
            ((uint16_t *)j->out)[i] = (uint16_t)(u >> 16);
        }
    }
}

/* Device bytes of a float64 array in dtype t (large arrays converted by several threads). */
static void *to_dtype(ts_dtype t, const double *x, int64_t n, size_t *bytes) {
    *bytes = (size_t)n * (size_t)ts_dtype_bytes(t);
    void *out = ts_xmalloc(*bytes ? *bytes : 1);
    convert_job j = {t, x, out};
    ts_parallel_ranges(n, TS_PARALLEL_MIN_PART, convert_range, &j);
    return out;
}

static double from_dtype(ts_dtype t, const void *p, int64_t i) {
    if (t == TS_FP32) {
        float f;
        memcpy(&f, (const char *)p + 4 * i, 4);
        return f;
    }
    uint16_t h = ((const uint16_t *)p)[i];
    if (t == TS_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static int upload(tuner *t, CUdeviceptr *dst, ts_dtype dt, const double *x, int64_t n) {
    size_t bytes;
    void *host = to_dtype(dt, x, n, &bytes);
    int rc = CU(t, cuMemAlloc(dst, bytes ? bytes : 1));
    if (rc == 0 && bytes) rc = CU(t, cuMemcpyHtoD(*dst, host, bytes));
    free(host);
    return rc;
}

static ts_dtype input_dtype(const ts_graph *g, int i) { return g->nodes[g->inputs[i].node].dtype; }

static int64_t output_numel(const ts_graph *g, int i) { return ts_view_numel(&g->outputs[i].ref.view); }

/* Device inputs at the validation sizes; outputs allocated (poisoned before every checked run). */
static int upload_validation(tuner *t) {
    const ts_graph *g = &t->vg;
    t->din = ts_xcalloc((size_t)g->ninputs + 1, sizeof *t->din);
    t->dout = ts_xcalloc((size_t)g->noutputs + 1, sizeof *t->dout);
    for (int i = 0; i < g->ninputs; i++)
        if (upload(t, &t->din[i], input_dtype(g, i), t->vin[i], ts_input_numel(g, i)) != 0) return -1;
    for (int i = 0; i < g->noutputs; i++) {
        if (g->outputs[i].inout) { /* an updated inout input: its own input's buffer */
            t->dout[i] = t->din[g->outputs[i].input];
            continue;
        }
        size_t bytes = (size_t)output_numel(g, i) * (size_t)ts_dtype_bytes(g->outputs[i].dtype);
        if (CU(t, cuMemAlloc(&t->dout[i], bytes ? bytes : 1)) != 0) return -1;
    }
    return CU(t, cuMemAlloc(&t->flush, FLUSH_BYTES));
}

/* Buffers at the timed sizes: the validation ones where the sizes agree, fresh random ones otherwise. */
static int upload_timing(tuner *t) {
    const ts_graph *g = t->o->g;
    t->tin = ts_xcalloc((size_t)g->ninputs + 1, sizeof *t->tin);
    t->tout = ts_xcalloc((size_t)g->noutputs + 1, sizeof *t->tout);
    double **fresh = NULL;
    int rc = 0;
    for (int i = 0; i < g->ninputs && rc == 0; i++) {
        if (ts_input_numel(g, i) == ts_input_numel(&t->vg, i)) {
            t->tin[i] = t->din[i];
            continue;
        }
        if (!fresh) fresh = validation_inputs(g, t->o->seed + 1);
        rc = upload(t, &t->tin[i], input_dtype(g, i), fresh[i], ts_input_numel(g, i));
    }
    if (fresh) ts_free_buffers(fresh, g->ninputs);
    for (int i = 0; i < g->noutputs && rc == 0; i++) {
        if (g->outputs[i].inout) {
            t->tout[i] = t->tin[g->outputs[i].input];
            continue;
        }
        if (output_numel(g, i) == output_numel(&t->vg, i)) {
            t->tout[i] = t->dout[i];
            continue;
        }
        size_t bytes = (size_t)output_numel(g, i) * (size_t)ts_dtype_bytes(g->outputs[i].dtype);
        rc = CU(t, cuMemAlloc(&t->tout[i], bytes ? bytes : 1));
    }
    return rc;
}

typedef int (*run_fn)(void *const *buffers, const int64_t *dims, void *workspace, void *stream);
typedef size_t (*workspace_fn)(const int64_t *dims);

typedef struct {
    void *lib;
    run_fn run;
    workspace_fn workspace;
} entry;

static int open_entry(tuner *t, ts_tune_cand *c, entry *e) {
    e->lib = dlopen(c->lib, RTLD_NOW | RTLD_LOCAL);
    if (!e->lib) {
        c->detail = ts_strfmt("cannot load %s: %s", c->lib, dlerror());
        return -1;
    }
    char *run = ts_strfmt("%s_run", t->o->g->name), *ws = ts_strfmt("%s_workspace", t->o->g->name);
    void *r = dlsym(e->lib, run), *w = dlsym(e->lib, ws);
    free(run), free(ws);
    if (!r || !w) {
        c->detail = ts_strfmt("%s lacks the C ABI entry points", c->lib);
        return -1;
    }
    memcpy(&e->run, &r, sizeof r);
    memcpy(&e->workspace, &w, sizeof w);
    return 0;
}

/* Enough workspace for both sizes. */
static int ensure_workspace(tuner *t, size_t bytes) {
    if (bytes <= t->ws_bytes) return 0;
    if (t->ws) t->cu.cuMemFree(t->ws);
    t->ws = 0;
    t->ws_bytes = 0;
    if (CU(t, cuMemAlloc(&t->ws, bytes)) != 0) return -1;
    t->ws_bytes = bytes;
    return 0;
}

/* One call of the C ABI; a CUDA error (returned, or raised by a kernel) goes into c->detail. */
static int call(tuner *t, ts_tune_cand *c, const entry *e, const CUdeviceptr *in, const CUdeviceptr *out,
                const int64_t *dims) {
    const ts_graph *g = t->o->g;
    void **bufs = ts_xcalloc((size_t)(g->ninputs + g->noutputs) + 1, sizeof *bufs);
    for (int i = 0; i < g->ninputs; i++) bufs[i] = (void *)(uintptr_t)in[i];
    for (int i = 0; i < ts_graph_abi_outputs(g); i++) bufs[g->ninputs + i] = (void *)(uintptr_t)out[i]; /* not the
                                                                       updated inout inputs: they are inputs */
    int rc = e->run(bufs, dims, (void *)(uintptr_t)t->ws, NULL);
    free(bufs);
    if (rc != 0) {
        c->detail = ts_strfmt("%s_run returned cudaError %d", g->name, rc);
        return -1;
    }
    return 0;
}

static int sync_checked(tuner *t, ts_tune_cand *c) {
    if (CU(t, cuCtxSynchronize()) == 0) return 0;
    c->detail = ts_strdup(t->err);
    return -1;
}

/* The relative L2 a candidate may differ from the float64 reference by: fp16/bf16 outputs 1e-2, fp32 2e-3. */
static double tolerance(const ts_graph *g) {
    double tol = 1e-2;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].dtype == TS_FP32) tol = 2e-3;
    return tol;
}

/* Hidden output i (an updated inout input, src/check.c's append) before a checked run: the input's values
 * uploaded again, except the slice the append writes, which is poisoned (NaN), so that a run that does not
 * write it, or writes elsewhere, fails validation. */
static int restore_inout(tuner *t, const ts_graph *g, int i) {
    const ts_output *o = &g->outputs[i];
    const ts_node *u = &g->nodes[o->ref.node];
    int64_t n = output_numel(g, i), stride = 1, size = g->axes[u->reduce_axis].size;
    int w = -1;
    for (int d = u->ndim - 1; d >= 0 && w < 0; d--) {
        if (u->axis[d] == u->reduce_axis) w = d;
        else stride *= g->axes[u->axis[d]].size;
    }
    double *x = ts_xmalloc(sizeof(double) * (size_t)n + 1);
    memcpy(x, t->vin[o->input], sizeof(double) * (size_t)n);
    int64_t end = g->axes[u->at_axis].size, first = end - (u->rows_axis >= 0 ? g->axes[u->rows_axis].size : 1);
    for (int64_t k = 0; k < n; k++) {
        int64_t row = (k / stride) % size;
        if (row >= first && row < end) x[k] = NAN;
    }
    size_t bytes;
    void *host = to_dtype(o->dtype, x, n, &bytes);
    int rc = CU(t, cuMemcpyHtoD(t->dout[i], host, bytes));
    free(host);
    free(x);
    return rc;
}

/* Runs at the validation sizes on poisoned outputs and compares the sampled rows with the reference. */
static int validate(tuner *t, ts_tune_cand *c, const entry *e) {
    const ts_graph *g = &t->vg;
    for (int i = 0; i < g->noutputs; i++) {
        size_t bytes = (size_t)output_numel(g, i) * (size_t)ts_dtype_bytes(g->outputs[i].dtype);
        if (g->outputs[i].inout) { /* an inout input: its values again, its written slice poisoned */
            if (restore_inout(t, g, i) != 0) return c->detail = ts_strdup(t->err), -1;
            continue;
        }
        if (CU(t, cuMemsetD8(t->dout[i], 0xff, bytes)) != 0) return c->detail = ts_strdup(t->err), -1; /* NaN */
    }
    if (ensure_workspace(t, e->workspace(t->dyn.n ? t->val_dims : NULL)) != 0) return c->detail = ts_strdup(t->err), -1;
    if (call(t, c, e, t->din, t->dout, t->dyn.n ? t->val_dims : NULL) != 0 || sync_checked(t, c) != 0) return -1;
    double worst = 0;
    for (int i = 0; i < g->noutputs; i++) {
        ts_dtype dt = g->outputs[i].dtype;
        int64_t n = output_numel(g, i), m = output_sample_numel(t, i);
        void *host = ts_xmalloc((size_t)n * (size_t)ts_dtype_bytes(dt) + 1);
        if (CU(t, cuMemcpyDtoH(host, t->dout[i], (size_t)n * (size_t)ts_dtype_bytes(dt))) != 0) {
            free(host);
            return c->detail = ts_strdup(t->err), -1;
        }
        double *full = ts_xmalloc(sizeof(double) * (size_t)n + 1), *got = ts_xmalloc(sizeof(double) * (size_t)m + 1);
        for (int64_t k = 0; k < n; k++) full[k] = from_dtype(dt, host, k);
        const ts_view *v = &g->outputs[i].ref.view;
        ts_sample_gather(g, v->axis, v->ndim, &t->sp, full, got);
        double num = 0, den = 0;
        bool nan = false;
        for (int64_t k = 0; k < m; k++) {
            if (isnan(got[k]) != isnan(t->ref[i][k]) || isinf(got[k]) != isinf(t->ref[i][k])) nan = true;
            else if (isfinite(got[k])) num += (got[k] - t->ref[i][k]) * (got[k] - t->ref[i][k]), den += t->ref[i][k] * t->ref[i][k];
        }
        double rel = nan ? INFINITY : sqrt(num) / (den > 0 ? sqrt(den) : 1);
        if (rel > worst || isnan(rel)) worst = rel;
        free(host), free(full), free(got);
    }
    c->rel_error = worst;
    double tol = tolerance(g);
    if (!(worst <= tol)) {
        c->status = TS_CAND_INVALID;
        c->detail = ts_strfmt(isinf(worst) ? "unwritten or non-finite outputs" : "rel. error %.2e > %.0e", worst, tol);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of o->reps CUDA-event timings after o->warmup runs, the L2 flushed before each. */
static int time_candidate(tuner *t, ts_tune_cand *c, const entry *e) {
    const int64_t *dims = t->dyn.n ? t->time_dims : NULL;
    if (ensure_workspace(t, e->workspace(dims)) != 0) return c->detail = ts_strdup(t->err), -1;
    for (int i = 0; i < t->o->warmup; i++)
        if (call(t, c, e, t->tin, t->tout, dims) != 0) return -1;
    if (sync_checked(t, c) != 0) return -1;
    int reps = t->o->reps > 0 ? t->o->reps : 1;
    double *ms = ts_xmalloc(sizeof *ms * (size_t)reps);
    CUevent e0 = NULL, e1 = NULL;
    int rc = CU(t, cuEventCreate(&e0, 0)) || CU(t, cuEventCreate(&e1, 0)) ? -1 : 0;
    for (int r = 0; r < reps && rc == 0; r++) {
        float f = 0;
        rc = CU(t, cuMemsetD8(t->flush, (unsigned char)r, FLUSH_BYTES)) || CU(t, cuEventRecord(e0, NULL)) ? -1 : 0;
        if (rc == 0) rc = call(t, c, e, t->tin, t->tout, dims);
        if (rc == 0) rc = CU(t, cuEventRecord(e1, NULL)) || CU(t, cuEventSynchronize(e1)) ||
                                  CU(t, cuEventElapsedTime(&f, e0, e1))
                              ? -1
                              : 0;
        ms[r] = f;
    }
    if (rc != 0 && !c->detail) c->detail = ts_strdup(t->err);
    if (rc == 0) {
        qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
        c->measured_s = (reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2])) * 1e-3;
    }
    if (e0) t->cu.cuEventDestroy(e0);
    if (e1) t->cu.cuEventDestroy(e1);
    free(ms);
    return rc;
}

/* One more call with CUPTI on, each kernel launched as plain stream work: per-kernel durations (each kernel's
 * own: the candidate's time is the timed runs', with PDL), matched to the plan's kernels in launch order (a plan
 * kernel that launches two, ts_kernel_launches, takes both). */
static void profile_kernels(tuner *t, ts_tune_cand *c, const entry *e) {
    const int64_t *dims = t->dyn.n ? t->time_dims : NULL;
    if (CU(t, cuMemsetD8(t->flush, 1, FLUSH_BYTES)) != 0 || CU(t, cuCtxSynchronize()) != 0) return;
    ts_cupti_clear();
    /* without programmatic dependent launch (templates/tile.cuh): under it a kernel launches while its
     * predecessor runs and waits inside, and its record would count the wait (bench/NOTES.md run 67) */
    setenv("TSOPT_NO_PDL", "1", 1);
    int rc = call(t, c, e, t->tin, t->tout, dims);
    unsetenv("TSOPT_NO_PDL");
    if (rc != 0 || CU(t, cuCtxSynchronize()) != 0) return;
    uint64_t *start = NULL, *end = NULL;
    size_t want = 0; /* a plan kernel may launch two (ts_kernel_launches): its time is theirs together */
    for (int k = 0; k < c->plan->nk; k++) want += (size_t)ts_kernel_launches(&c->plan->k[k]);
    size_t n = ts_cupti_collect(want, &start, &end);
    if (n == want)
        for (int k = 0, r = 0; k < c->plan->nk; k++) {
            double s = 0;
            for (int l = 0; l < ts_kernel_launches(&c->plan->k[k]); l++, r++) s += (double)(end[r] - start[r]) * 1e-9;
            c->kernel_s[k] = s;
        }
    else fprintf(stderr, "tune: %s: %zu kernel records for %zu launches of %d kernels: no per-kernel times\n", c->plan->name, n,
                 want, c->plan->nk);
    free(start);
    free(end);
}

static void release_gpu(tuner *t);

/* ---- fault isolation: one child process per candidate ------------------------------------------ */
/* A kernel fault poisons the CUDA context and a hung kernel never returns, and a context belongs to its
 * process: so the GPU is probed, and every candidate validated, timed and profiled, in a child process of
 * its own. A child reports through a pipe: one phase byte as it enters each phase (PHASES), then 'R' and
 * its result. The parent never initialises CUDA. A child that dies by a signal, exits without its result,
 * or outlives the watchdog (then killed) costs only its candidate, and the table says how it ended. */

#define PHASES "svtp" /* starting (context, uploads, library), validating, timing, profiling */
static const char *const phase_names[] = {"starting", "validating", "timing", "profiling"};

typedef struct {
    int status, cupti_on, nk, ndetail;
    double rel_error, measured_s;
    char note[256]; /* why there are no per-kernel times */
} cand_result;

typedef struct {
    int cc_major, cc_minor, ok;
    char name[128], driver[128], err[1024];
} gpu_probe;

typedef struct {
    char *buf;     /* everything the child wrote */
    size_t len;
    int wstatus;   /* from waitpid */
    bool hung;     /* killed by the watchdog */
} child_end;

static void write_all(int fd, const void *p, size_t n) {
    for (const char *s = p; n > 0;) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

static void phase(int fd, int i) { write_all(fd, &PHASES[i], 1); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads the child's pipe to its end or to the deadline (then kills it), and reaps it. */
static void collect_child(pid_t pid, int fd, double watchdog_s, child_end *ce) {
    size_t cap = 4096;
    ce->buf = ts_xmalloc(cap);
    double deadline = now_s() + watchdog_s;
    for (;;) {
        double left = deadline - now_s();
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = left > 0 ? poll(&pf, 1, (int)(left * 1e3) + 1) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            ce->hung = true;
            kill(pid, SIGKILL);
            break;
        }
        if (ce->len == cap) ce->buf = ts_xrealloc(ce->buf, cap *= 2);
        ssize_t n = read(fd, ce->buf + ce->len, cap - ce->len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        ce->len += (size_t)n;
    }
    close(fd);
    while (waitpid(pid, &ce->wstatus, 0) < 0 && errno == EINTR) {}
}

/* Runs body(t, arg, fd) in a child process under the watchdog. Returns -1 when no child could start. */
static int in_child(tuner *t, void (*body)(tuner *, int, int), int arg, child_end *ce) {
    int fds[2];
    *ce = (child_end){0};
    fflush(stdout), fflush(stderr);
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        body(t, arg, fds[1]);
        _exit(0); /* no atexit handlers: the candidate's CUDA runtime is torn down with the process */
    }
    close(fds[1]);
    collect_child(pid, fds[0], t->o->watchdog_s > 0 ? t->o->watchdog_s : 120, ce);
    return 0;
}

/* "crashed while timing: signal 11 (Segmentation fault)", "hung while validating: killed by the 120 s
 * watchdog", ..., or NULL for a normal end. */
static char *abnormal_end(const tuner *t, const child_end *ce, const char *during) {
    if (ce->hung)
        return ts_strfmt("hung while %s: killed by the %g s watchdog", during, t->o->watchdog_s > 0 ? t->o->watchdog_s : 120);
    if (WIFSIGNALED(ce->wstatus))
        return ts_strfmt("crashed while %s: signal %d (%s)", during, WTERMSIG(ce->wstatus), strsignal(WTERMSIG(ce->wstatus)));
    if (WIFEXITED(ce->wstatus) && WEXITSTATUS(ce->wstatus) != 0)
        return ts_strfmt("exited with status %d while %s", WEXITSTATUS(ce->wstatus), during);
    return NULL;
}

static void probe_body(tuner *t, int arg, int fd) {
    (void)arg;
    int ok = init_gpu(t) == 0;
    gpu_probe p = {.ok = ok, .cc_major = t->cc_major, .cc_minor = t->cc_minor};
    snprintf(p.name, sizeof p.name, "%s", t->gpu_name);
    snprintf(p.driver, sizeof p.driver, "%s", t->driver);
    snprintf(p.err, sizeof p.err, "%s", t->err);
    write_all(fd, &p, sizeof p);
}

/* The driver loaded here, the device read in a child: its name, driver version and compute capability. */
static int open_gpu(tuner *t) {
    if (load_driver(t) != 0) return -1;
    child_end ce;
    if (in_child(t, probe_body, 0, &ce) != 0) {
        snprintf(t->err, sizeof t->err, "cannot start a process to open the GPU: %s", strerror(errno));
        return -1;
    }
    gpu_probe p;
    char *why = abnormal_end(t, &ce, "opening the GPU");
    int rc = 0;
    if (why || ce.len != sizeof p) {
        snprintf(t->err, sizeof t->err, "opening the GPU failed: %s", why ? why : "no answer from the probe");
        rc = -1;
    } else {
        memcpy(&p, ce.buf, sizeof p);
        if (!p.ok) snprintf(t->err, sizeof t->err, "%s", p.err), rc = -1;
        snprintf(t->gpu_name, sizeof t->gpu_name, "%s", p.name);
        snprintf(t->driver, sizeof t->driver, "%s", p.driver);
        t->cc_major = p.cc_major, t->cc_minor = p.cc_minor;
    }
    free(why), free(ce.buf);
    return rc;
}

/* Validates, times and profiles candidate i (in its child); c->status and c->detail say how it went. */
static void run_one(tuner *t, ts_tune_cand *c, int fd, char *note, size_t cap) {
    entry e = {0};
    phase(fd, 0);
    if (init_gpu(t) != 0 || upload_validation(t) != 0 || upload_timing(t) != 0) {
        c->status = TS_CAND_RUN_FAILED, c->detail = ts_strdup(t->err);
        return;
    }
    if (open_entry(t, c, &e) != 0) {
        c->status = TS_CAND_RUN_FAILED;
        return;
    }
    phase(fd, 1);
    if (validate(t, c, &e) != 0) {
        if (c->status == TS_CAND_PENDING) c->status = TS_CAND_RUN_FAILED;
        return;
    }
    phase(fd, 2);
    if (time_candidate(t, c, &e) != 0) {
        c->status = TS_CAND_RUN_FAILED;
        return;
    }
    phase(fd, 3);
    start_cupti(t, note, cap);
    if (t->cupti_on) profile_kernels(t, c, &e);
    c->status = TS_CAND_OK;
}

static void candidate_body(tuner *t, int i, int fd) {
    ts_tune_cand *c = &t->c[i];
    cand_result r = {0};
    run_one(t, c, fd, r.note, sizeof r.note);
    r.status = (int)c->status, r.cupti_on = t->cupti_on, r.nk = c->plan->nk;
    r.rel_error = c->rel_error, r.measured_s = c->measured_s;
    r.ndetail = c->detail ? (int)strlen(c->detail) : 0;
    write_all(fd, "R", 1);
    write_all(fd, &r, sizeof r);
    write_all(fd, c->kernel_s, sizeof(double) * (size_t)r.nk);
    write_all(fd, c->detail ? c->detail : "", (size_t)r.ndetail);
    release_gpu(t);
}

/* The candidate's fields from its child's report: how far it got, then its result when it sent one. */
static void apply_report(tuner *t, ts_tune_cand *c, const child_end *ce, char *note, size_t cap) {
    size_t at = 0;
    int ph = 0;
    for (; at < ce->len && ce->buf[at] != 'R'; at++)
        if (strchr(PHASES, ce->buf[at])) ph = (int)(strchr(PHASES, ce->buf[at]) - PHASES);
    cand_result r;
    bool full = at < ce->len && ce->len - at - 1 >= sizeof r;
    if (full) {
        memcpy(&r, ce->buf + at + 1, sizeof r);
        full = r.nk == c->plan->nk && r.ndetail >= 0 &&
               ce->len - at - 1 - sizeof r == sizeof(double) * (size_t)r.nk + (size_t)r.ndetail;
    }
    char *how = abnormal_end(t, ce, phase_names[ph]);
    free(c->detail), c->detail = NULL;
    if (how || !full) {
        c->status = TS_CAND_RUN_FAILED;
        c->detail = how ? how : ts_strfmt("ended without a result while %s", phase_names[ph]);
        return;
    }
    const char *p = ce->buf + at + 1 + sizeof r;
    c->status = (ts_cand_status)r.status, c->rel_error = r.rel_error, c->measured_s = r.measured_s;
    memcpy(c->kernel_s, p, sizeof(double) * (size_t)r.nk);
    if (r.ndetail)
        c->detail = c->status == TS_CAND_RUN_FAILED
                        ? ts_strfmt("failed while %s: %.*s", phase_names[ph], r.ndetail, p + sizeof(double) * (size_t)r.nk)
                        : ts_strfmt("%.*s", r.ndetail, p + sizeof(double) * (size_t)r.nk);
    t->cupti_on |= r.cupti_on;
    if (!r.cupti_on && r.note[0] && !note[0]) snprintf(note, cap, "%.*s", (int)sizeof r.note - 1, r.note);
}

static void run_candidates(tuner *t) {
    char note[256] = "";
    for (int i = 0; i < t->n; i++) {
        ts_tune_cand *c = &t->c[i];
        if (c->status != TS_CAND_PENDING) continue;
        fprintf(stderr, "tune: [%d/%d] %s: validating and timing\n", i + 1, t->n, c->plan->name);
        child_end ce;
        if (in_child(t, candidate_body, i, &ce) != 0) {
            c->status = TS_CAND_RUN_FAILED;
            c->detail = ts_strfmt("cannot start its process: %s", strerror(errno));
            continue;
        }
        apply_report(t, c, &ce, note, sizeof note);
        free(ce.buf);
    }
    if (!t->cupti_on && note[0]) fprintf(stderr, "tune: no per-kernel times: %s\n", note);
}

/* ---- output: the tuned header and the record --------------------------------------------------- */

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.10g", x);
    else fputs("null", f);
}

static void json_sizes(FILE *f, const ts_graph *g) {
    fputc('{', f);
    bool first = true;
    for (int a = 0; a < g->naxes; a++) {
        if (g->axes[a].name[0] == '_') continue;
        fprintf(f, "%s", first ? "" : ", ");
        json_string(f, g->axes[a].name);
        fprintf(f, ": %lld", (long long)g->axes[a].size);
        first = false;
    }
    fputc('}', f);
}

static void json_costmodel(FILE *f, const ts_costmodel *m) {
    fputs("{\"path\": ", f);
    json_string(f, m->path);
    const struct {
        const char *name;
        double v;
    } c[] = {
#define TS_X_COEF_JSON(name, same_as, fallback) {#name, m->name},
        TS_COSTMODEL_COEFFICIENTS(TS_X_COEF_JSON)
#undef TS_X_COEF_JSON
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        fprintf(f, ", \"%s\": ", c[i].name);
        json_number(f, c[i].v);
    }
    fputc('}', f);
}

static void json_kernels(FILE *f, const tuner *t, const ts_tune_cand *c) {
    const ts_tune_opts *o = t->o;
    fputs("[", f);
    for (int k = 0; k < c->plan->nk; k++) {
        ts_kernel_work w;
        ts_costmodel_work(o->cm, o->g, c->plan, &c->plan->k[k], &w);
        char *label = ts_kernel_describe(c->plan, o->g, k);
        fprintf(f, "%s\n       {\"label\": ", k ? "," : "");
        json_string(f, label);
        free(label);
        fprintf(f, ", \"kind\": \"%s\", ", ts_kernel_kind_name(w.kind));
        char cfg[160];
        if (*ts_config_describe(&c->plan->k[k], cfg, sizeof cfg)) /* the configuration it ran with (config.h) */
            fputs("\"config\": ", f), json_string(f, cfg), fputs(", ", f);
        fputs("\"tensor_flops\": ", f);
        json_number(f, w.tensor_flops);
        fputs(", \"fma_flops\": ", f), json_number(f, w.fma_flops);
        fputs(", \"sfu_ops\": ", f), json_number(f, w.sfu_ops);
        fputs(", \"bytes\": ", f), json_number(f, w.bytes);
        fputs(", \"strided_bytes\": ", f), json_number(f, w.strided_bytes);
        fputs(", \"wave_efficiency\": ", f), json_number(f, w.wave_efficiency);
        fputs(", \"epilogue_slots\": ", f), json_number(f, w.epilogue_slots);
        fputs(", \"epilogue_sfu_ops\": ", f), json_number(f, w.epilogue_sfu_ops);
        fputs(", \"score_sfu_ops\": ", f), json_number(f, w.score_sfu_ops);
        fputs(", \"score_loads\": ", f), json_number(f, w.score_loads);
        fputs(", \"tile_waves\": ", f), json_number(f, w.tile_waves);
        fputs(", \"rowstat_stages\": ", f), json_number(f, w.rowstat_stages);
        fprintf(f, ", \"skinny\": %s", w.skinny ? "true" : "false");
        if (w.columns) fputs(", \"columns\": true", f);
        if (w.unchunked) fputs(", \"unchunked\": true", f);
        if (w.paired) fputs(", \"paired\": true", f);
        if (w.pingpong) fputs(", \"pingpong\": true", f);
        if (w.scores > 0) fputs(", \"scores\": ", f), json_number(f, w.scores);
        if (w.score_fn_ops > 0) fputs(", \"score_fn_ops\": ", f), json_number(f, w.score_fn_ops);
        if (w.whole_tiles) fputs(", \"whole_tiles\": true", f);
        if (w.key64) fputs(", \"key64\": true", f);
        if (w.tile64) fputs(", \"tile64\": true", f);
        if (w.library) fputs(", \"library\": true", f);
        if (w.tf32x3) fputs(", \"tf32x3\": true", f);
        if (w.simt_gemm_flops > 0) fputs(", \"simt_gemm_flops\": ", f), json_number(f, w.simt_gemm_flops);
        fputs(", \"predicted_s\": ", f), json_number(f, c->plan->k[k].predicted_s);
        fputs(", \"measured_s\": ", f), json_number(f, c->kernel_s[k]);
        fputc('}', f);
    }
    fputs("]", f);
}

static void write_record(FILE *f, const tuner *t, int chosen) {
    const ts_tune_opts *o = t->o;
    fprintf(f, "{\n  \"format\": \"tsopt-tune-record 1\",\n  \"tsopt\": \"%s\",\n  \"graph\": ", TS_VERSION);
    json_string(f, o->g->name);
    fputs(",\n  \"file\": ", f), json_string(f, o->file);
    fputs(",\n  \"gpu\": ", f), json_string(f, t->gpu_name);
    fputs(",\n  \"driver\": ", f), json_string(f, t->driver);
    fputs(",\n  \"costmodel\": ", f), json_costmodel(f, o->cm);
    fputs(",\n  \"sizes\": ", f), json_sizes(f, o->g);
    fputs(",\n  \"runtime_dims\": [", f);
    for (int d = 0; d < t->dyn.n; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)t->time_dims[d]);
    fputs("],\n  \"validation\": {\"sizes\": ", f), json_sizes(f, &t->vg);
    fputs(", \"sampled\": {", f);
    for (int s = 0; s < t->sp.n; s++) {
        fprintf(f, "%s", s ? ", " : "");
        json_string(f, t->vg.axes[t->sp.axis[s]].name);
        fprintf(f, ": %lld", (long long)t->sp.count[s]);
    }
    fprintf(f, "}, \"seed\": %llu, \"tolerance\": %g},\n", (unsigned long long)o->seed, tolerance(&t->vg));
    fprintf(f, "  \"timing\": {\"warmup\": %d, \"reps\": %d, \"l2_flush_bytes\": %zu, \"timer\": \"CUDA events\", "
               "\"kernel_timer\": \"%s\"},\n",
            o->warmup, o->reps, FLUSH_BYTES, t->cupti_on ? "CUPTI" : "none");
    fputs("  \"baseline_predicted_s\": ", f), json_number(f, o->baseline_s);
    fprintf(f, ",\n  \"chosen\": %d,\n  \"candidates\": [", chosen >= 0 ? t->c[chosen].rank : 0);
    for (int i = 0; i < t->n; i++) {
        const ts_tune_cand *c = &t->c[i];
        fprintf(f, "%s\n    {\"rank\": %d, \"plan\": ", i ? "," : "", c->rank);
        json_string(f, c->plan->name);
        fputs(", \"predicted_s\": ", f), json_number(f, c->predicted_s);
        fputs(", \"measured_s\": ", f), json_number(f, c->measured_s);
        fprintf(f, ", \"status\": \"%s\", \"detail\": ", ts_cand_status_name(c->status));
        json_string(f, c->detail ? c->detail : "");
        fputs(", \"rel_error\": ", f), json_number(f, c->rel_error);
        fprintf(f, ", \"source_hash\": \"%s\", \"library\": ", c->hash);
        json_string(f, c->lib);
        fputs(",\n     \"kernels\": ", f);
        json_kernels(f, t, c);
        fputc('}', f);
    }
    fputs("\n  ]\n}\n", f);
}

static int save_record(const tuner *t, int chosen) {
    char *tmp = ts_strfmt("%s.tmp.%ld", t->o->record, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "tsopt: error: cannot write %s: %s\n", t->o->record, strerror(errno));
        free(tmp);
        return -1;
    }
    write_record(f, t, chosen);
    bool ok = !ferror(f);
    ok = fclose(f) == 0 && ok && rename(tmp, t->o->record) == 0;
    if (!ok) {
        fprintf(stderr, "tsopt: error: cannot write %s: %s\n", t->o->record, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

/* "t_q: 32 sampled rows, t=16" or "in full": how the reference was made, for the table and the banner. */
static char *validation_text(const tuner *t) {
    char *s = ts_strdup("");
    for (int i = 0; i < t->sp.n; i++) {
        char *n = ts_strfmt("%s%s%s: %lld sampled rows", s, *s ? ", " : "", t->vg.axes[t->sp.axis[i]].name,
                            (long long)t->sp.count[i]);
        free(s);
        s = n;
    }
    for (int d = 0; d < t->dyn.n; d++)
        if (t->val_dims[d] != t->time_dims[d]) {
            char *n = ts_strfmt("%s%s%s=%lld", s, *s ? ", " : "", t->vg.axes[t->dyn.axis[d]].name, (long long)t->val_dims[d]);
            free(s);
            s = n;
        }
    if (!*s) {
        free(s);
        s = ts_strdup("in full");
    }
    return s;
}

static int emit_tuned(const tuner *t, int chosen) {
    const ts_tune_opts *o = t->o;
    const ts_tune_cand *c = &t->c[chosen];
    int others = 0;
    for (int i = 0; i < t->n; i++) others += t->c[i].status == TS_CAND_OK;
    char *how = validation_text(t);
    char *measured = ts_strfmt("%.4f ms on %s by `tsopt tune` (median of %d CUDA-event timings, L2 flushed;\n"
                               "//            fastest of %d valid candidate%s; rel. error %.1e against float64, %s)",
                               c->measured_s * 1e3, t->gpu_name, o->reps, others, others == 1 ? "" : "s", c->rel_error,
                               how);
    free(how);
    ts_emit_opts eo = {.source_path = o->file, .source_text = o->spec->text, .source_len = o->spec->len,
                       .templates_dir = o->templates_dir, .cost_model = o->cm, .baseline_s = o->baseline_s,
                       .measured = measured};
    char *err = NULL;
    int rc = mkdir_p(o->out_dir) == 0 ? ts_emit_header_file(o->out_dir, o->g, c->plan, &eo, &err) : -1;
    if (rc == 0) printf("wrote %s/%s.cuh (plan %d: %s, measured %.4f ms)\n", o->out_dir, o->g->name, c->rank,
                        c->plan->name, c->measured_s * 1e3);
    else fprintf(stderr, "tsopt: error: cannot write the tuned header into %s: %s\n", o->out_dir, err ? err : strerror(errno));
    free(err);
    free(measured);
    return rc;
}

/* ---- the command ------------------------------------------------------------------------------- */

/* The device buffers, CUPTI and the context of a candidate's child (the parent never opens the GPU). */
static void release_gpu(tuner *t) {
    if (t->gpu_open) {
        const ts_graph *g = t->o->g;
        for (int i = 0; t->tin && i < g->ninputs; i++)
            if (t->tin[i] && t->tin[i] != t->din[i]) t->cu.cuMemFree(t->tin[i]);
        for (int i = 0; t->tout && i < g->noutputs; i++) /* updated inout inputs are their inputs' buffers */
            if (t->tout[i] && t->tout[i] != t->dout[i] && !g->outputs[i].inout) t->cu.cuMemFree(t->tout[i]);
        for (int i = 0; t->din && i < g->ninputs; i++)
            if (t->din[i]) t->cu.cuMemFree(t->din[i]);
        for (int i = 0; t->dout && i < g->noutputs; i++)
            if (t->dout[i] && !g->outputs[i].inout) t->cu.cuMemFree(t->dout[i]);
        if (t->flush) t->cu.cuMemFree(t->flush);
        if (t->ws) t->cu.cuMemFree(t->ws);
        if (t->cupti_on) ts_cupti_stop();
        t->cu.cuDevicePrimaryCtxRelease(t->dev);
        t->gpu_open = false;
    }
}

static void tuner_free(tuner *t) {
    release_gpu(t);
    free(t->tin), free(t->tout), free(t->din), free(t->dout);
    for (int i = 0; i < t->n; i++) {
        free(t->c[i].header), free(t->c[i].lib), free(t->c[i].detail), free(t->c[i].kernel_s);
        free_variant(t->c[i].owned);
    }
    free(t->c);
    if (t->vin) ts_free_buffers(t->vin, t->vg.ninputs);
    if (t->ref) ts_free_buffers(t->ref, t->vg.noutputs);
    ts_sample_free(&t->sp);
    ts_graph_free(&t->vg);
    ts_binding_free(&t->vbind);
}

static void print_build_table(const tuner *t) {
    printf("%-4s %-30s %12s  %-16s %s\n", "rank", "plan", "predicted", "source hash", "library");
    for (int i = 0; i < t->n; i++) {
        const ts_tune_cand *c = &t->c[i];
        printf("%-4d %-30s %9.4f ms  %-16s %s%s%s\n", c->rank, c->plan->name, c->predicted_s * 1e3, c->hash,
               c->status == TS_CAND_BUILD_FAILED ? "build failed: " : "", c->status == TS_CAND_BUILD_FAILED ? c->detail : c->lib,
               "");
    }
}

/* Every candidate in its own process (which uploads the inputs itself), then the choice and the outputs. */
static int on_gpu(tuner *t) {
    const ts_tune_opts *o = t->o;
    run_candidates(t);
    int chosen = ts_tune_select(t->c, t->n);
    char *how = validation_text(t);
    int variants = 0;
    for (int i = 0; i < t->n; i++) variants += t->c[i].owned != NULL;
    char vtext[112] = "";
    const int len = snprintf(vtext, sizeof vtext, "%s", t->other_kinds ? ", the best of other kernel kinds" : "");
    if (variants)
        snprintf(vtext + len, sizeof vtext - (size_t)len, " and %d configuration%s of the best", variants, variants == 1 ? "" : "s");
    printf("graph %s on %s: %d candidate%s (top %d by prediction%s), validated %s%s, timed as the median of %d runs "
           "(L2 flushed)\n",
           o->g->name, t->gpu_name, t->n, t->n == 1 ? "" : "s", o->top, vtext, strcmp(how, "in full") ? "at " : "", how,
           o->reps);
    free(how);
    ts_tune_print_table(stdout, t->c, t->n, chosen);
    int rc = EXIT_OK;
    if (o->record && save_record(t, chosen) != 0) rc = EXIT_INPUT;
    if (chosen < 0) {
        fprintf(stderr, "%s: error: no candidate passed validation; nothing was emitted\n", o->file);
        return EXIT_INPUT;
    }
    if (emit_tuned(t, chosen) != 0) rc = EXIT_INPUT;
    return rc;
}

int ts_tune(const ts_tune_opts *o) {
    tuner t = {.o = o};
    if (ts_dyn_of(o->g, &t.dyn) != 0) {
        fprintf(stderr, "%s: error: more dynamic axes than tsopt supports\n", o->file);
        return EXIT_INPUT;
    }
    for (int d = 0; d < t.dyn.n; d++) t.time_dims[d] = o->g->axes[t.dyn.axis[d]].size;
    if (!o->build_only && open_gpu(&t) != 0) {
        fprintf(stderr, "tsopt: error: %s\n      = hint: `tsopt tune --build-only` prepares the cache without a GPU\n",
                t.err);
        tuner_free(&t);
        return EXIT_NO_GPU;
    }
    /* the target: --arch, else the GPU's (Hopper: sm_90a, for wgmma and TMA), else (--build-only) sm_90a */
    if (o->arch) snprintf(t.arch, sizeof t.arch, "%s", o->arch);
    else if (!o->build_only && !(t.cc_major == 9 && t.cc_minor == 0)) snprintf(t.arch, sizeof t.arch, "%d%d", t.cc_major, t.cc_minor);
    else snprintf(t.arch, sizeof t.arch, "90a");
    make_candidates(&t);
    int rc = EXIT_OK;
    if (t.n == 0) {
        fprintf(stderr, "%s: error: no plan could be emitted\n", o->file);
        rc = EXIT_INPUT;
        goto out;
    }
    build_missing(&t);
    char *err = NULL;
    if (prepare_reference(&t, &err) != 0) {
        fprintf(stderr, "%s: error: cannot compute the reference: %s\n", o->file, err ? err : "");
        free(err);
        rc = EXIT_INPUT;
        goto out;
    }
    if (o->build_only) {
        printf("graph %s: %d candidate%s built into %s (reference %s %s)\n", o->g->name, t.n, t.n == 1 ? "" : "s",
               o->cache_dir, t.ref_key, t.ref ? "cached" : "not made here");
        print_build_table(&t);
        for (int i = 0; i < t.n; i++)
            if (t.c[i].status == TS_CAND_BUILD_FAILED) rc = EXIT_INPUT;
        goto out;
    }
    rc = on_gpu(&t);
out:
    tuner_free(&t);
    return rc;
}
