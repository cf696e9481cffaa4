/* test_tunefit.c — `tsopt calibrate --from-tune` without a GPU: the efficiencies recovered from synthetic
 * tune records made from known ones (with a few % noise), kinds with too few samples kept, failed
 * candidates and null timings ignored, the accuracy metrics on hand-computed examples, malformed records
 * refused with file:line:col errors, the rewritten cost model loading with the fitted values, and the
 * command on the records in tests/data/tune/. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "costmodel.h"
#include "testutil.h"
#include "tunefit.h"

/* The base cost model: the shipped one as it was before its efficiencies were fitted (a frozen copy). */
#define BASE "tests/data/tune/base-h200.yaml"

/* ---- synthetic records ----------------------------------------------------------------------------- */

/* The efficiencies the synthetic timings are made with, by ts_kernel_kind: map, reduce, gemm, attention, row. */
static const double true_eff[TS_NKINDS] = {0.66, 0.45, 0.62, 0.41, 0.55};
/* ... and skinny_gemm_efficiency (the kernels with work.skinny: decode-size GEMMs, decode attention). */
static const double true_skinny = 0.95;
#define SKINNY_BIT (1u << TS_NKINDS) /* a candidate's kernel mask: a skinny GEMM too */

/* H200-like rates (variant v shifts them a little: each record keeps its own) with the shipped model's
 * efficiencies, which the timings do not follow. */
static ts_costmodel rates(int v) {
    ts_costmodel m = {.launch_s = 4.3e-6 + 0.2e-6 * v, .dram_bytes_per_s = 3.9e12 * (1 + 0.05 * v),
                      .tensor_flops_per_s = 6.4e14 * (1 - 0.03 * v), .fma_flops_per_s = 6.4e13, .sfu_ops_per_s = 4.2e12,
                      .sms = 132, .l2_bytes = 62914560, .gemm_efficiency = 0.75, .attention_efficiency = 0.5,
                      .reduce_efficiency = 0.6, .map_efficiency = 0.8, .strided_efficiency = 0.5 + 0.1 * v,
                      .row_efficiency = 0.8, .skinny_gemm_efficiency = 0.85, .skinny_tensor_efficiency = 0.3};
    return m;
}

/* A kernel of this kind whose time depends on its efficiency: tensor-bound GEMM and attention,
 * DRAM-bound reduce and map, from about 10 us to 1 ms. */
static ts_kernel_work random_work(ts_kernel_kind kind, unsigned long long *st) {
    double scale = pow(10, 2 * ts_uniform(st));
    ts_kernel_work w = {.kind = kind, .wave_efficiency = 1};
    if (kind == TS_NKINDS) { /* SKINNY_BIT: a decode-size GEMM streaming its weight from a share of the SMs */
        w.kind = TS_KERNEL_GEMM, w.skinny = true;
        w.bytes = 3e7 * scale;
        w.tensor_flops = w.bytes * 16;
        w.wave_efficiency = 0.5 + 0.5 * ts_uniform(st);
        return w;
    }
    if (kind == TS_KERNEL_GEMM || kind == TS_KERNEL_ATTENTION) {
        w.tensor_flops = 3e9 * scale;
        w.bytes = w.tensor_flops / 600;
        w.sfu_ops = kind == TS_KERNEL_ATTENTION ? w.tensor_flops / 512 : 0;
        w.wave_efficiency = 0.5 + 0.5 * ts_uniform(st);
    } else {
        w.bytes = 3e7 * scale;
        w.strided_bytes = w.bytes * 0.3 * ts_uniform(st); /* read uncoalesced, at strided_efficiency */
        w.fma_flops = w.bytes / 4;
    }
    return w;
}

static double true_time(const ts_costmodel *rec, const ts_kernel_work *w) {
    ts_costmodel m = *rec;
    for (int k = 0; k < TS_NKINDS; k++) *ts_costmodel_efficiency_slot(&m, k) = true_eff[k];
    m.skinny_gemm_efficiency = true_skinny;
    return ts_costmodel_time(&m, w);
}

static void put_num(FILE *f, const char *key, double x) {
    if (isnan(x)) fprintf(f, "\"%s\": null", key);
    else fprintf(f, "\"%s\": %.17g", key, x);
}

static void put_costmodel(FILE *f, const ts_costmodel *m) {
    fputs("\"costmodel\": {\"path\": \"costmodel/h200.yaml\"", f);
    const char *names[] = {"launch_s", "dram_bytes_per_s", "tensor_flops_per_s", "fma_flops_per_s", "sfu_ops_per_s",
                           "sms", "l2_bytes", "gemm_efficiency", "attention_efficiency", "reduce_efficiency",
                           "map_efficiency", "strided_efficiency", "row_efficiency", "skinny_gemm_efficiency",
                           "skinny_tensor_efficiency"};
    double v[] = {m->launch_s, m->dram_bytes_per_s, m->tensor_flops_per_s, m->fma_flops_per_s, m->sfu_ops_per_s, m->sms,
                  m->l2_bytes, m->gemm_efficiency, m->attention_efficiency, m->reduce_efficiency, m->map_efficiency,
                  m->strided_efficiency, m->row_efficiency, m->skinny_gemm_efficiency, m->skinny_tensor_efficiency};
    for (int i = 0; i < 15; i++) fputs(", ", f), put_num(f, names[i], v[i]);
    fputs("}", f);
}

static void put_kernel(FILE *f, const ts_costmodel *m, const ts_kernel_work *w, double measured) {
    fprintf(f, "{\"label\": \"k\", \"kind\": \"%s\", ", ts_kernel_kind_name(w->kind));
    put_num(f, "tensor_flops", w->tensor_flops), fputs(", ", f);
    put_num(f, "fma_flops", w->fma_flops), fputs(", ", f);
    put_num(f, "sfu_ops", w->sfu_ops), fputs(", ", f);
    put_num(f, "bytes", w->bytes), fputs(", ", f);
    put_num(f, "strided_bytes", w->strided_bytes), fputs(", ", f);
    put_num(f, "wave_efficiency", w->wave_efficiency), fputs(", ", f);
    if (w->skinny) fputs("\"skinny\": true, ", f);
    put_num(f, "predicted_s", ts_costmodel_time(m, w)), fputs(", ", f);
    put_num(f, "measured_s", measured), fputs("}", f);
}

typedef enum { CAND_OK, CAND_OK_NO_KERNEL_TIMES, CAND_INVALID, CAND_BUILD_FAILED } cand_type;

/* One candidate: a kernel of each kind in `kinds` (a bit mask), timed from true_eff with noise. Failed
 * candidates get absurd timings (20x), which the fit must ignore. */
static void put_candidate(FILE *f, const ts_costmodel *m, int rank, cand_type type, unsigned kinds, double noise,
                          unsigned long long *st) {
    static const char *const status[] = {"ok", "ok", "invalid", "build-failed"};
    ts_kernel_work w[TS_NKINDS + 1];
    double meas[TS_NKINDS + 1], total = 0, pred = 0;
    int n = 0;
    for (int k = 0; k <= TS_NKINDS; k++) {
        if (!(kinds >> k & 1)) continue;
        w[n] = random_work((ts_kernel_kind)k, st);
        meas[n] = true_time(m, &w[n]) * (1 + noise * (2 * ts_uniform(st) - 1)) * (type == CAND_INVALID ? 20 : 1);
        total += meas[n], pred += ts_costmodel_time(m, &w[n]);
        n++;
    }
    fprintf(f, "    {\"rank\": %d, \"plan\": \"plan %d\", ", rank, rank);
    put_num(f, "predicted_s", pred), fputs(", ", f);
    put_num(f, "measured_s", type == CAND_BUILD_FAILED ? NAN : total * 1.01);
    fprintf(f, ", \"status\": \"%s\", \"detail\": \"\",\n     \"kernels\": [", status[type]);
    for (int i = 0; i < n; i++) {
        fputs(i ? ",\n       " : "\n       ", f);
        bool timed = type == CAND_OK || type == CAND_INVALID;
        put_kernel(f, m, &w[i], timed ? meas[i] : NAN);
    }
    fputs("]}", f);
}

/* A record of `nok` ok candidates with kernels of `kinds`, plus one of each failure type. */
static char *synthetic_record(int variant, int nok, unsigned kinds, double noise, unsigned long long seed) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    ts_costmodel m = rates(variant);
    fprintf(f, "{\n  \"format\": \"tsopt-tune-record 1\",\n  \"tsopt\": \"0.1.0\",\n  \"graph\": \"g%d\",\n  ", variant);
    put_costmodel(f, &m);
    fputs(",\n  \"chosen\": 1,\n  \"candidates\": [\n", f);
    int rank = 1;
    for (int i = 0; i < nok; i++, rank++) put_candidate(f, &m, rank, CAND_OK, kinds, noise, &seed), fputs(",\n", f);
    put_candidate(f, &m, rank++, CAND_OK_NO_KERNEL_TIMES, kinds, noise, &seed), fputs(",\n", f);
    put_candidate(f, &m, rank++, CAND_INVALID, kinds, noise, &seed), fputs(",\n", f);
    put_candidate(f, &m, rank++, CAND_BUILD_FAILED, kinds, noise, &seed);
    fputs("\n  ]\n}\n", f);
    fclose(f);
    return buf;
}

static void load_ok(ts_tune_set *s, const char *path, const char *text) {
    ts_diags d;
    int rc = ts_tune_load_text(s, path, text, strlen(text), &d);
    char *msg = d.n ? ts_diag_headline(&d, 0) : ts_strdup("");
    cr_assert_eq(rc, 0, "%s\n%s", msg, text);
    free(msg);
    ts_diags_free(&d);
}

/* Three records with every kind (and a skinny GEMM when `skinny`): 5 ok candidates each (15 samples a kind),
 * `noise` relative. */
static void synthetic_set_of(ts_tune_set *s, double noise, bool skinny) {
    memset(s, 0, sizeof *s);
    for (int v = 0; v < 3; v++) {
        unsigned kinds = ((1u << TS_NKINDS) - 1) | (skinny ? SKINNY_BIT : 0);
        char *text = synthetic_record(v, 5, kinds, noise, 100 + (unsigned long long)v);
        load_ok(s, "synthetic.json", text);
        free(text);
    }
}

static void synthetic_set(ts_tune_set *s, double noise) { synthetic_set_of(s, noise, false); }

static ts_costmodel shipped_model(void) {
    ts_costmodel m;
    ts_diags d;
    cr_assert_eq(ts_costmodel_load(&m, BASE, &d), 0);
    ts_diags_free(&d);
    return m;
}

/* ---- the fit --------------------------------------------------------------------------------------- */

/* synthetic_set(s, noise) fitted with the shipped model as the base. */
static void fit_synthetic(ts_tune_set *s, double noise, ts_costmodel *base, ts_tune_fit *f) {
    synthetic_set(s, noise);
    *base = shipped_model();
    ts_tune_fit_run(s, base, f);
}

Test(tunefit, recovers_known_efficiencies_from_noisy_timings) {
    ts_tune_set s;
    synthetic_set(&s, 0.04);
    cr_assert_eq(s.n, 3);
    cr_assert_eq(s.r[0].nc, 8);
    ts_costmodel base = shipped_model();
    ts_tune_fit f;
    ts_tune_fit_run(&s, &base, &f);
    cr_assert_eq(f.nfitted, TS_NKINDS);
    for (int k = 0; k < TS_NKINDS; k++) {
        const ts_eff_fit *e = &f.kind[k];
        cr_assert(e->fitted, "%s: %s", ts_kernel_kind_name((ts_kernel_kind)k), e->why_not);
        cr_assert_eq(e->samples, 15, "%s: %d samples: only ok candidates' timed kernels count",
                     ts_kernel_kind_name((ts_kernel_kind)k), e->samples);
        cr_assert_float_eq(e->after, true_eff[k], 0.05 * true_eff[k], "%s: fitted %g, true %g",
                           ts_kernel_kind_name((ts_kernel_kind)k), e->after, true_eff[k]);
        cr_assert_float_eq(e->before, ts_costmodel_efficiency(&base, (ts_kernel_kind)k), 0);
        cr_assert_eq(e->fit.n, 15);
        cr_assert_eq(e->fit.p, 1);
        cr_assert_float_eq(e->fit.coef[0], e->after, 0);
        cr_assert_lt(e->fit.resid_rms, 0.04, "residuals %g reflect the noise", e->fit.resid_rms);
        cr_assert_gt(e->fit.resid_rms, 0.005);
        cr_assert_lt(e->fit.resid_max, 0.08);
        cr_assert_gt(e->fit.r2, 0.99);
        cr_assert(!e->at_bound);
    }
    cr_assert(!f.kind[TS_FIT_SKINNY].fitted && f.kind[TS_FIT_SKINNY].samples == 0, "no skinny kernels: not fitted");
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
}

/* Kernels in their skinny form (work.skinny) fit skinny_gemm_efficiency alone: their GEMM kind's fit keeps
 * its own 15 samples and value, and the skinny one recovers the efficiency their timings follow. */
Test(tunefit, fits_skinny_streaming_apart_from_its_kind) {
    ts_tune_set s;
    synthetic_set_of(&s, 0.04, true);
    ts_costmodel base = shipped_model();
    ts_tune_fit f;
    ts_tune_fit_run(&s, &base, &f);
    const ts_eff_fit *sk = &f.kind[TS_FIT_SKINNY], *g = &f.kind[TS_KERNEL_GEMM];
    cr_assert(sk->fitted, "%s", sk->why_not);
    cr_assert_eq(sk->samples, 15);
    cr_assert_float_eq(sk->after, true_skinny, 0.05 * true_skinny, "fitted %g, true %g", sk->after, true_skinny);
    cr_assert_float_eq(sk->before, base.skinny_gemm_efficiency, 0);
    cr_assert_str_eq(sk->fit.name, "skinny_gemm_efficiency");
    cr_assert_eq(g->samples, 15, "the skinny GEMMs are not gemm_efficiency's samples: %d", g->samples);
    cr_assert_float_eq(g->after, true_eff[TS_KERNEL_GEMM], 0.05 * true_eff[TS_KERNEL_GEMM]);
    cr_assert_eq(f.nfitted, TS_NKINDS + 1);
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
}

Test(tunefit, noiseless_timings_give_the_exact_efficiencies) {
    ts_tune_set s;
    ts_costmodel base;
    ts_tune_fit f;
    fit_synthetic(&s, 0, &base, &f);
    for (int k = 0; k < TS_NKINDS; k++) {
        cr_assert_float_eq(f.kind[k].after, true_eff[k], 1e-6, "%g", f.kind[k].after);
        cr_assert_lt(f.kind[k].fit.resid_max, 1e-6);
    }
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
}

Test(tunefit, kinds_with_fewer_than_three_samples_keep_the_base_value) {
    /* 2 ok candidates with GEMM and attention kernels: 2 samples each (the failed ones do not count);
     * map and reduce have none */
    ts_tune_set s = {0};
    char *text = synthetic_record(0, 2, 1u << TS_KERNEL_GEMM | 1u << TS_KERNEL_ATTENTION, 0.02, 5);
    load_ok(&s, "few.json", text);
    free(text);
    ts_costmodel base = shipped_model();
    ts_tune_fit f;
    ts_tune_fit_run(&s, &base, &f);
    cr_assert_eq(f.nfitted, 0);
    cr_assert_eq(f.kind[TS_KERNEL_GEMM].samples, 2);
    cr_assert_str_eq(f.kind[TS_KERNEL_GEMM].why_not, "fewer than 3 timed kernels");
    cr_assert_str_eq(f.kind[TS_KERNEL_MAP].why_not, "no timed kernels");
    for (int k = 0; k < TS_NKINDS; k++) {
        cr_assert(!f.kind[k].fitted);
        cr_assert_float_eq(f.kind[k].after, ts_costmodel_efficiency(&base, (ts_kernel_kind)k), 0);
    }
    /* one more record with 2 GEMM candidates: 4 samples now, fitted; attention still kept */
    text = synthetic_record(1, 2, 1u << TS_KERNEL_GEMM, 0.02, 6);
    load_ok(&s, "more.json", text);
    free(text);
    ts_tune_fit_run(&s, &base, &f);
    cr_assert(f.kind[TS_KERNEL_GEMM].fitted);
    cr_assert_eq(f.kind[TS_KERNEL_GEMM].samples, 4);
    cr_assert_float_eq(f.kind[TS_KERNEL_GEMM].after, true_eff[TS_KERNEL_GEMM], 0.05 * true_eff[TS_KERNEL_GEMM]);
    cr_assert(!f.kind[TS_KERNEL_ATTENTION].fitted);
    cr_assert_eq(f.nfitted, 1);
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
}

Test(tunefit, failed_candidates_and_null_timings_are_ignored) {
    ts_tune_set s;
    synthetic_set(&s, 0);
    /* each record: 5 timed ok, 1 ok without kernel times, 1 invalid (20x timings), 1 build-failed */
    const ts_tune_record *r = &s.r[0];
    cr_assert(r->c[5].ok && isnan(r->c[5].k[0].measured_s));
    cr_assert(!r->c[6].ok && r->c[6].k[0].measured_s > 0);
    cr_assert_str_eq(r->c[6].status, "invalid");
    cr_assert(!r->c[7].ok && isnan(r->c[7].measured_s));
    cr_assert_str_eq(r->c[7].status, "build-failed");
    ts_acc_point *p;
    int n = ts_tune_points(&s, NULL, &p);
    cr_assert_eq(n, 18, "6 ok, timed candidates a record (kernel times are not needed): %d", n);
    for (int i = 0; i < n; i++) cr_assert_eq(p[i].group, i / 6);
    free(p);
    ts_tune_set_free(&s);
}

Test(tunefit, a_flat_objective_is_not_fitted) {
    /* map kernels so small that launch_s is all of their time: no efficiency in range changes it */
    ts_costmodel m = rates(0);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    fputs("{\"format\": \"tsopt-tune-record 1\", \"graph\": \"tiny\", ", f);
    put_costmodel(f, &m);
    fputs(", \"candidates\": [{\"rank\": 1, \"plan\": \"p\", \"predicted_s\": 5e-6, \"measured_s\": 5e-6, \"status\": "
          "\"ok\", \"kernels\": [", f);
    for (int i = 0; i < 4; i++) {
        ts_kernel_work w = {.kind = TS_KERNEL_MAP, .bytes = 0, .wave_efficiency = 1};
        fputs(i ? ", " : "", f);
        put_kernel(f, &m, &w, 4.5e-6 + 1e-7 * i);
    }
    fputs("]}]}", f);
    fclose(f);
    ts_tune_set s = {0};
    load_ok(&s, "tiny.json", buf);
    free(buf);
    ts_costmodel base = shipped_model();
    ts_tune_fit fit;
    ts_tune_fit_run(&s, &base, &fit);
    cr_assert(!fit.kind[TS_KERNEL_MAP].fitted);
    cr_assert_eq(fit.kind[TS_KERNEL_MAP].samples, 4);
    cr_assert_str_eq(fit.kind[TS_KERNEL_MAP].why_not, "no timed kernel's time depends on it");
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
}

/* ---- accuracy -------------------------------------------------------------------------------------- */

Test(tunefit, spearman_gives_ties_their_average_rank) {
    double x[] = {1, 2, 2, 3}, y[] = {1, 3, 2, 4};
    /* ranks of x: 1, 2.5, 2.5, 4; of y: 1, 3, 2, 4: Pearson of the ranks = 4.5 / sqrt(4.5 * 5) */
    cr_assert_float_eq(ts_spearman(x, y, 4), 4.5 / sqrt(4.5 * 5), 1e-12);
    double up[] = {10, 20, 30, 40, 50}, down[] = {5, 4, 3, 2, 1}, bent[] = {1, 2, 3, 5, 4};
    cr_assert_float_eq(ts_spearman(up, down, 5), -1, 1e-12);
    cr_assert_float_eq(ts_spearman(up, up, 5), 1, 1e-12);
    cr_assert_float_eq(ts_spearman(up, bent, 5), 1 - 6.0 * 2 / (5 * 24), 1e-12); /* 1 - 6 sum d^2 / n(n^2-1) */
    double same[] = {7, 7, 7};
    cr_assert(isnan(ts_spearman(same, up, 3)), "a constant side has no rank correlation");
    cr_assert(isnan(ts_spearman(up, down, 1)));
    cr_assert(isnan(ts_spearman(up, down, 0)));
    double t1[] = {1, 1, 2, 2}, t2[] = {1, 1, 2, 2};
    cr_assert_float_eq(ts_spearman(t1, t2, 4), 1, 1e-12);
}

Test(tunefit, median_absolute_percentage_error) {
    ts_acc_point odd[] = {{0, 1.1, 1}, {0, 0.5, 1}, {1, 3, 2}}; /* APEs 0.1, 0.5, 0.5 */
    ts_accuracy a;
    ts_accuracy_compute(odd, 3, &a);
    cr_assert_float_eq(a.median_ape, 0.5, 1e-12);
    ts_acc_point even[] = {{0, 1.1, 1}, {0, 1.2, 1}, {0, 1.4, 1}, {0, 0.5, 1}}; /* 0.1, 0.2, 0.4, 0.5 */
    ts_accuracy_compute(even, 4, &a);
    cr_assert_float_eq(a.median_ape, 0.3, 1e-12);
    double x[] = {3, 1, 2};
    cr_assert_float_eq(ts_median(x, 3), 2, 0);
    cr_assert(isnan(ts_median(x, 0)));
    ts_accuracy_compute(NULL, 0, &a);
    cr_assert_eq(a.points, 0);
    cr_assert_eq(a.groups, 0);
    cr_assert(isnan(a.median_ape) && isnan(a.spearman) && isnan(a.spearman_per_group) && isnan(a.top1_share));
}

Test(tunefit, top1_within_ten_percent_and_per_group_spearman) {
    /* groups interleaved on purpose:
     *   0: predicted 1, 2, 3; measured 1.05, 1.0, 2 -> predicted best measures 1.05 <= 1.1: a hit;
     *      ranks 1 2 3 vs 2 1 3: Spearman 1 - 6*2/24 = 0.5
     *   1: predicted 1, 2; measured 1.2, 1.0 -> 1.2 > 1.1: a miss (too few points for Spearman)
     *   2: one point: a hit
     *   3: predicted 1, 1 (a tie: the first counts); measured 2, 1 -> a miss */
    ts_acc_point p[] = {{0, 1, 1.05}, {1, 1, 1.2}, {0, 2, 1.0}, {2, 5, 7},  {1, 2, 1.0},
                        {0, 3, 2},    {3, 1, 2},   {3, 1, 1}};
    ts_accuracy a;
    ts_accuracy_compute(p, 8, &a);
    cr_assert_eq(a.points, 8);
    cr_assert_eq(a.groups, 4);
    cr_assert_eq(a.top1_hits, 2);
    cr_assert_float_eq(a.top1_share, 0.5, 1e-12);
    cr_assert_eq(a.spearman_groups, 1);
    cr_assert_float_eq(a.spearman_per_group, 0.5, 1e-12);
    double pred[8], meas[8];
    for (int i = 0; i < 8; i++) pred[i] = p[i].predicted, meas[i] = p[i].measured;
    cr_assert_float_eq(a.spearman, ts_spearman(pred, meas, 8), 1e-12);
    /* exactly 10% slower still counts */
    ts_acc_point edge[] = {{0, 1, 1.1}, {0, 2, 1.0}};
    ts_accuracy_compute(edge, 2, &a);
    cr_assert_eq(a.top1_hits, 1);
}

Test(tunefit, the_fit_improves_the_accuracy_in_sample) {
    ts_tune_set s;
    ts_costmodel base;
    ts_tune_fit f;
    fit_synthetic(&s, 0.03, &base, &f);
    double eff[TS_FIT_SLOTS];
    for (int k = 0; k < TS_FIT_SLOTS; k++) eff[k] = f.kind[k].after;
    ts_acc_point *p;
    ts_accuracy before, after;
    int n = ts_tune_points(&s, NULL, &p);
    ts_accuracy_compute(p, n, &before);
    free(p);
    n = ts_tune_points(&s, eff, &p);
    ts_accuracy_compute(p, n, &after);
    free(p);
    cr_assert_gt(before.median_ape, 0.15, "the records' efficiencies are off: %g", before.median_ape);
    cr_assert_lt(after.median_ape, 0.05, "%g", after.median_ape);
    cr_assert_eq(after.groups, 3);
    cr_assert_eq(after.spearman_groups, 3);
    cr_assert_gt(after.spearman, 0.9);
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
}

/* ---- malformed records ----------------------------------------------------------------------------- */

static const char mini[] =
    "{\"format\": \"tsopt-tune-record 1\", \"graph\": \"mini\",\n"
    " \"costmodel\": {\"launch_s\": 4e-06, \"dram_bytes_per_s\": 4e+12, \"tensor_flops_per_s\": 6e+14,\n"
    "   \"fma_flops_per_s\": 6e+13, \"sfu_ops_per_s\": 4e+12, \"sms\": 132, \"l2_bytes\": 62914560,\n"
    "   \"gemm_efficiency\": 0.75, \"attention_efficiency\": 0.5, \"reduce_efficiency\": 0.6, \"map_efficiency\": 0.8},\n"
    " \"candidates\": [\n"
    "  {\"rank\": 1, \"plan\": \"fused\", \"predicted_s\": 2e-05, \"measured_s\": 1.8e-05, \"status\": \"ok\",\n"
    "   \"kernels\": [{\"kind\": \"map\", \"tensor_flops\": 0, \"fma_flops\": 1e6, \"sfu_ops\": 0, \"bytes\": 1e7,\n"
    "                \"wave_efficiency\": 1, \"predicted_s\": 7e-06, \"measured_s\": 6e-06}]}]}\n";

/* mini with `from` replaced by `to` (which must occur). */
static char *mini_with(const char *from, const char *to) {
    const char *at = strstr(mini, from);
    cr_assert_not_null(at, "'%s' is not in the mini record", from);
    return ts_strfmt("%.*s%s%s", (int)(at - mini), mini, to, at + strlen(from));
}

/* The first error's headline of loading text as "g.json" ("" when it loads). */
static char *load_error(const char *text, size_t len) {
    ts_tune_set s = {0};
    ts_diags d;
    int rc = ts_tune_load_text(&s, "g.json", text, len, &d);
    char *msg = NULL;
    for (int i = 0; i < d.n && !msg; i++)
        if (d.items[i].severity == TS_ERROR) msg = ts_diag_headline(&d, i);
    cr_assert((rc != 0) == (msg != NULL), "status and diagnostics disagree: rc=%d", rc);
    cr_assert_eq(s.n, rc == 0 ? 1 : 0, "a refused record is not added");
    ts_diags_free(&d);
    ts_tune_set_free(&s);
    return msg ? msg : ts_strdup("");
}

#define EXPECT_LOAD_ERROR(text, len, needle)                                                            \
    do {                                                                                                \
        char *msg_ = load_error(text, len);                                                             \
        cr_assert_not_null(strstr(msg_, needle), "expected '%s', got '%s'", needle, msg_);              \
        free(msg_);                                                                                     \
    } while (0)


Test(tunefit, the_mini_record_loads) {
    char *msg = load_error(mini, strlen(mini));
    cr_assert_str_eq(msg, "");
    free(msg);
    ts_tune_set s = {0};
    load_ok(&s, "g.json", mini);
    cr_assert_str_eq(s.r[0].graph, "mini");
    cr_assert_str_eq(s.r[0].c[0].plan, "fused");
    cr_assert_eq(s.r[0].c[0].rank, 1);
    cr_assert_float_eq(s.r[0].cm.sms, 132, 0);
    cr_assert_float_eq(s.r[0].c[0].k[0].work.bytes, 1e7, 0);
    cr_assert_float_eq(s.r[0].c[0].k[0].measured_s, 6e-6, 0);
    cr_assert_float_eq(s.r[0].c[0].k[0].work.strided_bytes, 0, 0, "optional: 0 when absent");
    cr_assert_float_eq(s.r[0].cm.strided_efficiency, 1, 0, "optional: 1 when absent");
    ts_tune_set_free(&s);
}

/* A GEMM kernel's form: "skinny": true/false when the record has it, else whether its config (as
 * ts_config_describe writes it) starts "skinny"; tile_waves 0 when absent. */
Test(tunefit, a_gemm_kernels_skinny_form_and_tile_waves_are_read) {
    static const struct {
        const char *to;
        bool skinny;
        double waves;
    } cases[] = {
        {"\"kind\": \"gemm\", \"skinny\": true, \"config\": \"128x256, 4 stages\", \"tile_waves\": 2,", true, 2},
        {"\"kind\": \"gemm\", \"skinny\": false, \"config\": \"skinny 64x64, 6 stages\",", false, 0},
        {"\"kind\": \"gemm\", \"config\": \"skinny 64x64, 6 stages\",", true, 0},
        {"\"kind\": \"gemm\", \"config\": \"128x256, 4 stages; M <= 64: skinny 64x64, 6 stages\",", false, 0},
        {"\"kind\": \"map\", \"config\": \"skinny\",", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *t = mini_with("\"kind\": \"map\",", cases[i].to);
        ts_tune_set s = {0};
        load_ok(&s, "g.json", t);
        cr_expect_eq(s.r[0].c[0].k[0].work.skinny, cases[i].skinny, "case %zu", i);
        cr_expect_float_eq(s.r[0].c[0].k[0].work.tile_waves, cases[i].waves, 0, "case %zu", i);
        ts_tune_set_free(&s);
        free(t);
    }
    char *t = mini_with("\"kind\": \"map\",", "\"kind\": \"gemm\", \"skinny\": \"yes\",");
    EXPECT_LOAD_ERROR(t, strlen(t), "kernel 1 of candidate 1: 'skinny' must be true/false, not a string");
    free(t);
    /* the ping-pong form (absent: false), predicted as such when the record is refitted */
    for (int pp = 0; pp < 2; pp++) {
        t = mini_with("\"kind\": \"map\",", pp ? "\"kind\": \"gemm\", \"pingpong\": true," : "\"kind\": \"gemm\",");
        ts_tune_set ps = {0};
        load_ok(&ps, "g.json", t);
        cr_expect_eq(ps.r[0].c[0].k[0].work.pingpong, pp);
        ts_tune_set_free(&ps);
        free(t);
    }
    t = mini_with("\"kind\": \"map\",", "\"kind\": \"gemm\", \"pingpong\": 1,");
    EXPECT_LOAD_ERROR(t, strlen(t), "kernel 1 of candidate 1: 'pingpong' must be true/false, not a number");
    free(t);
    /* skinny-form GEMMs are no samples of gemm_efficiency (their MMAs use skinny_tensor_efficiency) */
    t = mini_with("\"kind\": \"map\",", "\"kind\": \"gemm\", \"skinny\": true, \"tile_waves\": 0,");
    ts_tune_set s = {0};
    for (int i = 0; i < 3; i++) load_ok(&s, "g.json", t);
    free(t);
    ts_costmodel base = shipped_model();
    ts_tune_fit f;
    ts_tune_fit_run(&s, &base, &f);
    cr_assert_eq(f.kind[TS_KERNEL_GEMM].samples, 0);
    cr_assert(!f.kind[TS_KERNEL_GEMM].fitted);
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
}

/* A GEMM epilogue's work: `epilogue_slots` and `epilogue_sfu_ops` as written; a record from before them counts every
 * op alike in `epilogue_ops`, priced at its own model's retired epilogue_ops_per_s (6.5e12 where it has none), so
 * that the record predicts its epilogue as its own model did. */
Test(tunefit, a_gemm_epilogue_is_read_by_pipe_and_old_records_keep_their_price) {
    char *t = mini_with("\"kind\": \"map\",", "\"kind\": \"gemm\", \"epilogue_slots\": 3e8, \"epilogue_sfu_ops\": 2e7,");
    ts_tune_set s = {0};
    load_ok(&s, "g.json", t);
    cr_expect_float_eq(s.r[0].c[0].k[0].work.epilogue_slots, 3e8, 0);
    cr_expect_float_eq(s.r[0].c[0].k[0].work.epilogue_sfu_ops, 2e7, 0);
    ts_tune_set_free(&s);
    free(t);
    static const struct {
        const char *costmodel;
        double ops_per_s;
    } olds[] = {{"\"map_efficiency\": 0.8", 6.5e12}, {"\"map_efficiency\": 0.8, \"epilogue_ops_per_s\": 2.8e12", 2.8e12}};
    for (int i = 0; i < 2; i++) {
        char *a = mini_with("\"kind\": \"map\",", "\"kind\": \"gemm\", \"epilogue_ops\": 1e8,");
        char *b = ts_strfmt("%.*s%s%s", (int)(strstr(a, "\"map_efficiency\": 0.8") - a), a, olds[i].costmodel,
                            strstr(a, "\"map_efficiency\": 0.8") + strlen("\"map_efficiency\": 0.8"));
        ts_tune_set o = {0};
        load_ok(&o, "g.json", b);
        ts_kernel_work w = o.r[0].c[0].k[0].work;
        const ts_costmodel *cm = &o.r[0].cm;
        double with = ts_costmodel_time(cm, &w);
        w.epilogue_slots = 0;
        cr_expect_float_eq(with - ts_costmodel_time(cm, &w), 1e8 / olds[i].ops_per_s, 1e-9 * 1e8 / olds[i].ops_per_s,
                           "case %d: the epilogue priced as its record's model did", i);
        ts_tune_set_free(&o);
        free(a);
        free(b);
    }
}

/* Malformed variants of the mini record: replace `from` by `to`; the first error contains `error`. */
static const struct {
    const char *from, *to, *error;
} bad_minis[] = {
    {"\"bytes\": 1e7", "\"bytes\": \"12\"",
     "g.json:7:92: error: kernel 1 of candidate 1: 'bytes' must be a non-negative number, not a string"},
    {"\"bytes\": 1e7", "\"bytes\": -5", "'bytes' must be a non-negative number, not -5"},
    {"\"bytes\": 1e7", "\"bytes\": 1e999", "'bytes' must be a non-negative number, not 1e999"},
    {"\"bytes\": 1e7", "\"bytes\": 8e206", "'bytes' is 8e206, outside what a record can hold (0, or 1e-30 to 1e+30)"},
    {"\"sms\": 132", "\"sms\": 1e-300", "'sms' is 1e-300, outside what a record can hold"},
    {"\"bytes\": 1e7", "\"bytes\": 1e7, \"strided_bytes\": 2e7",
     "kernel 1 of candidate 1: 'strided_bytes' (2e+07) is more than 'bytes' (1e+07)"},
    {"\"map_efficiency\": 0.8", "\"map_efficiency\": 0.8, \"strided_efficiency\": -1",
     "costmodel: 'strided_efficiency' must be a positive number, not -1"},
    {"\"bytes\": 1e7", "\"bytes\": null", "'bytes' must be a non-negative number, not null"},
    {"\"bytes\": 1e7", "\"bytes\": [1]", "'bytes' must be a non-negative number, not an array"},
    {"\"bytes\": 1e7", "\"bytes\": .inf", "not a bare word (not JSON)"},
    {"\"bytes\": 1e7", "\"bytes\": 0x10", "not a bare word (not JSON)"},
    {"\"bytes\": 1e7", "\"bytes\": true", "not true/false"},
    {"\"measured_s\": 6e-06", "\"measured_s\": -1e-6", "'measured_s' must be a non-negative number or null, not -1e-6"},
    {"\"wave_efficiency\": 1", "\"wave_efficiency\": 0", "'wave_efficiency' must be a number in (0, 1]"},
    {"\"wave_efficiency\": 1", "\"wave_efficiency\": 1.5", "must be a number in (0, 1], not 1.5"},
    {"\"kind\": \"map\"", "\"kind\": \"conv\"", "kernel 1 of candidate 1: unknown kind 'conv'"},
    {"\"kind\": \"map\", ", "", "kernel 1 of candidate 1 has no 'kind'"},
    {"\"status\": \"ok\"", "\"status\": \"OK\"", "candidate 1: unknown status 'OK'"},
    {"\"status\": \"ok\"", "\"status\": 1", "candidate 1: 'status' must be a string, not a number"},
    {"\"rank\": 1", "\"rank\": 1.5", "'rank' must be a whole number from 1, not 1.5"},
    {"\"rank\": 1", "\"rank\": 0", "'rank' must be a positive number, not 0"},
    {"\"plan\": \"fused\"", "\"plan\": fused", "'plan' must be a string, not a bare word"},
    {"\"kernels\": [", "\"kernelz\": [", "g.json:6:3: error: candidate 1 has no 'kernels'"},
    {"\"kernels\": [{", "\"kernels\": {}, \"k\": [{", "candidate 1: 'kernels' must be an array, not an object"},
    {"\"kernels\": [{", "\"kernels\": [3, {", "kernel 1 of candidate 1 must be an object, not a number"},
    {"\"candidates\": [", "\"candidates\": 7, \"x\": [", "'candidates' must be an array, not a number"},
    {"\"candidates\": [\n  {", "\"candidates\": [\n  null, {", "candidate 1 must be an object, not null"},
    {"\"launch_s\": 4e-06", "\"launch_s\": 0", "costmodel: 'launch_s' must be a positive number, not 0"},
    {"\"sms\": 132, ", "", "costmodel has no 'sms'"},
    {"\"tsopt-tune-record 1\"", "\"tsopt-tune-record 2\"",
     "unsupported record format 'tsopt-tune-record 2'; this tsopt reads 'tsopt-tune-record 1'"},
    {"\"graph\": \"mini\"", "\"graph\": null", "'graph' must be a string, not null"},
    {"\"bytes\": 1e7", "\"bytes\": ", "'bytes' must be a non-negative number, not nothing"},
};

/* An attention kernel's softmax work (`scores`, absent: 0) and whether it ran whole tiles (`whole_tiles`,
 * absent: false — records before run 66 fit as before). */
Test(tunefit, an_attention_kernels_scores_and_whole_tiles_are_read) {
    char *t = mini_with("\"kind\": \"map\",", "\"kind\": \"attention\", \"scores\": 268435456, \"whole_tiles\": true,");
    ts_tune_set s = {0};
    load_ok(&s, "g.json", t);
    cr_expect_float_eq(s.r[0].c[0].k[0].work.scores, 268435456.0, 0);
    cr_expect(s.r[0].c[0].k[0].work.whole_tiles);
    ts_tune_set_free(&s);
    free(t);
    t = mini_with("\"kind\": \"map\",", "\"kind\": \"attention\",");
    ts_tune_set a = {0};
    load_ok(&a, "g.json", t);
    cr_expect_float_eq(a.r[0].c[0].k[0].work.scores, 0, 0);
    cr_expect(!a.r[0].c[0].k[0].work.whole_tiles);
    ts_tune_set_free(&a);
    free(t);
    t = mini_with("\"kind\": \"map\",", "\"kind\": \"attention\", \"scores\": -1,");
    EXPECT_LOAD_ERROR(t, strlen(t), "'scores'");
    free(t);
}

Test(tunefit, malformed_records_are_errors_with_their_place) {
    /* truncated anywhere: an error, never a crash */
    for (size_t cut = 0; cut < strlen(mini) - 1; cut += 7) {
        char *msg = load_error(mini, cut);
        cr_assert(strstr(msg, "g.json:") == msg && strstr(msg, ": error: "), "cut at %zu: '%s'", cut, msg);
        free(msg);
    }
    EXPECT_LOAD_ERROR(mini, 120, "g.json:2:");
    EXPECT_LOAD_ERROR(mini, 120, ": error: malformed YAML");
    EXPECT_LOAD_ERROR("", 0, "g.json:1:1: error: empty file: a tune record is a JSON object");
    EXPECT_LOAD_ERROR("  \n# x\n", 7, "empty file");
    EXPECT_LOAD_ERROR("[1, 2]", 6, "g.json:1:1: error: a tune record is a JSON object, not an array");
    EXPECT_LOAD_ERROR("{\"a\": 1}", 8, "the record has no 'format'");
    EXPECT_LOAD_ERROR("{\"a\": \0}", 8, "binary file");
    for (size_t i = 0; i < sizeof bad_minis / sizeof *bad_minis; i++) {
        char *t = mini_with(bad_minis[i].from, bad_minis[i].to);
        EXPECT_LOAD_ERROR(t, strlen(t), bad_minis[i].error);
        free(t);
    }
}

Test(tunefit, yaml_aliases_and_deep_nesting_are_refused) {
    char *t = mini_with("  {\"rank\": 1", "  &c {\"rank\": 1");
    char *t2 = ts_strfmt("%.*s, *c]}\n", (int)(strlen(t) - 3), t);
    EXPECT_LOAD_ERROR(t2, strlen(t2), "YAML alias: this value is used twice");
    free(t);
    free(t2);
    char deep[400];
    memset(deep, '[', 300);
    deep[300] = '\0';
    EXPECT_LOAD_ERROR(deep, 300, "nested more than 64 levels deep");
}

/* Every input fuzz_tune once failed on (tests/fuzz/regressions/fuzz_tune/) loads or is refused with an
 * error, under the sanitizers too; the one found so far (a kernel of 8e206 FMA operations, whose
 * residuals overflowed) is refused. */
Test(tunefit, fuzz_regressions_are_refused) {
    DIR *dp = opendir("tests/fuzz/regressions/fuzz_tune");
    cr_assert_not_null(dp);
    int n = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        if (e->d_name[0] == '.') continue;
        char *path = ts_strfmt("tests/fuzz/regressions/fuzz_tune/%s", e->d_name);
        ts_tune_set s = {0};
        ts_diags d;
        int rc = ts_tune_load(&s, path, &d);
        cr_assert((rc != 0) == (d.nerrors > 0), "%s: status and errors disagree", path);
        if (strstr(path, "huge_work")) {
            char *msg = ts_diag_headline(&d, 0);
            cr_assert_not_null(strstr(msg, "outside what a record can hold"), "%s", msg);
            free(msg);
        }
        ts_diags_free(&d);
        ts_tune_set_free(&s);
        free(path);
        n++;
    }
    closedir(dp);
    cr_assert_geq(n, 1);
}

/* ---- the cost-model file --------------------------------------------------------------------------- */

static char *temp_path(void) {
    char *p = ts_strdup("/tmp/tsopt-tunefit-XXXXXX");
    int fd = mkstemp(p);
    cr_assert_geq(fd, 0);
    close(fd);
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* text with its comment lines joined ("\n# " becomes " "), so that checks do not depend on the wrapping. */
static char *unwrapped(const char *text) {
    char *s = ts_strdup(text), *w = s;
    for (const char *p = text; *p;)
        if (strncmp(p, "\n# ", 3) == 0) *w++ = ' ', p += 3;
        else *w++ = *p++;
    *w = '\0';
    return s;
}

/* Loads text as a cost model (it must load) into m. */
static void load_model(const char *text, ts_costmodel *m) {
    char *path = temp_path();
    write_text(path, text);
    ts_diags d;
    int rc = ts_costmodel_load(m, path, &d);
    char *msg = d.n ? ts_diag_headline(&d, 0) : ts_strdup("");
    cr_assert_eq(rc, 0, "%s\n%s", msg, text);
    free(msg);
    ts_diags_free(&d);
    unlink(path);
    free(path);
}

/* Lines of the "# Template efficiencies:" sentence in a model file's text (0 when it has none). */
static int sentence_lines(const char *text) {
    const char *at = strstr(text, "# Template efficiencies:");
    int n = 0;
    while (at && strncmp(at, "# ", 2) == 0) {
        n++;
        at = strchr(at, '\n');
        at = at ? at + 1 : NULL;
    }
    return n;
}

Test(tunefit, the_rewritten_model_loads_with_the_fitted_values) {
    ts_tune_set s;
    ts_costmodel base;
    ts_tune_fit f;
    fit_synthetic(&s, 0.03, &base, &f);
    f.kind[TS_KERNEL_MAP].fitted = false; /* as if map had too few samples: its line is kept */
    f.kind[TS_KERNEL_MAP].after = f.kind[TS_KERNEL_MAP].before;
    f.kind[TS_KERNEL_MAP].why_not = "fewer than 3 timed kernels";
    const char *records[] = {"a.json", "b.json"};
    char *err = NULL, *text = ts_tune_model_text(base.text, "costmodel/h200.yaml", &f, records, 2, 1795910400, &err);
    cr_assert_not_null(text, "%s", err ? err : "");
    cr_assert_null(strstr(text, "NOT measured"), "%s", text);
    char *flat = unwrapped(text);
    cr_assert_not_null(strstr(text, "\n# Template efficiencies: gemm_efficiency (15 kernels),"), "%s", text);
    cr_assert_not_null(strstr(flat, " Template efficiencies: gemm_efficiency (15 kernels), attention_efficiency (15 "
                                    "kernels), reduce_efficiency (15 kernels) and row_efficiency (15 kernels) fitted by "
                                    "`tsopt calibrate --from-tune` "
                                    "(tsopt 0.1.0) on 2026-11-29 UTC to the per-kernel timings in 2 tsopt tune records "
                                    "(a.json, b.json), each minimising"), "%s", flat);
    cr_assert_not_null(strstr(flat, "(the `fit:` section); cublas_efficiency (no timed kernels), gemm_tf32x3_efficiency (no "
                                    "timed kernels), skinny_gemm_efficiency "
                                    "(no timed kernels) and map_efficiency "
                                    "(fewer than 3 timed kernels): not fitted, kept at their values from "
                                    "costmodel/h200.yaml.\ngpu:"), "%s", flat);
    free(flat);
    cr_assert_not_null(strstr(text, "\n  map_efficiency: 0.8  # not measured: kept\n"), "%s", text);
    cr_assert_not_null(strstr(text, "  # fitted: 15 kernels from tsopt tune records\n"), "%s", text);
    cr_assert_not_null(strstr(text, "\n  gemm_efficiency: {model: \"t = launch + max(tensor / (tensor rate * c0 * "),
                       "%s", text);
    cr_assert_not_null(strstr(text, ", samples: 15}\nmeasured:\n"), "the entries end the fit section:\n%s", text);
    cr_assert_not_null(strstr(text, "\n  mma_f16: {model:"), "the calibrated fits are kept");
    cr_assert_not_null(strstr(text, "\nmeasured:\n  empty_kernel_s:"), "so is measured:");
    cr_assert_eq(count(text, "\n# "), count(base.text, "\n# ") + 4, "the 3-line sentence became 7 lines:\n%s", text);
    ts_costmodel m;
    load_model(text, &m);
    cr_assert_eq(m.nfits, base.nfits + 4);
    cr_assert(m.calibrated);
    cr_assert_float_eq(m.gemm_efficiency, f.kind[TS_KERNEL_GEMM].after, 1e-4 * f.kind[TS_KERNEL_GEMM].after);
    cr_assert_float_eq(m.attention_efficiency, f.kind[TS_KERNEL_ATTENTION].after, 1e-4);
    cr_assert_float_eq(m.reduce_efficiency, f.kind[TS_KERNEL_REDUCE].after, 1e-4);
    cr_assert_float_eq(m.map_efficiency, 0.8, 0);
    cr_assert_float_eq(m.launch_s, base.launch_s, 0);
    cr_assert_float_eq(m.dram_bytes_per_s, base.dram_bytes_per_s, 0);

    /* rewriting the rewritten file: one sentence and one fit entry per efficiency, never two */
    f.kind[TS_KERNEL_MAP] = (ts_eff_fit){.samples = 4, .fitted = true, .before = 0.8, .after = 0.7,
                                         .fit = {.name = "map_efficiency", .model = "m", .n = 4, .p = 1, .coef = {0.7}}};
    char *again = ts_tune_model_text(m.text, "x.yaml", &f, records, 1, 1795910400, &err);
    cr_assert_not_null(again, "%s", err ? err : "");
    cr_assert_eq(count(again, "# Template efficiencies:"), 1, "%s", again);
    cr_assert_eq(count(again, "  gemm_efficiency: {model:"), 1, "%s", again);
    cr_assert_eq(count(again, "  map_efficiency: {model:"), 1, "%s", again);
    cr_assert_eq(count(again, "\n# ") - sentence_lines(again), count(text, "\n# ") - sentence_lines(text),
                 "the sentence replaced by another, the other comments kept:\n%s", again);
    ts_costmodel m2;
    load_model(again, &m2);
    cr_assert_eq(m2.nfits, base.nfits + 5);
    cr_assert_float_eq(m2.map_efficiency, 0.7, 0);
    ts_costmodel_free(&m2);
    ts_costmodel_free(&m);
    free(again);
    free(text);
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
}

Test(tunefit, bases_without_a_fit_section_or_in_flow_style) {
    ts_tune_fit f = {0};
    f.kind[TS_KERNEL_GEMM] = (ts_eff_fit){.samples = 3, .fitted = true, .before = 0.75, .after = 0.6,
                                          .fit = {.name = "gemm_efficiency", .model = "m", .n = 3, .p = 1, .coef = {0.6}}};
    f.nfitted = 1;
    for (int k = 0; k < TS_FIT_SLOTS; k++)
        if (!f.kind[k].fitted) f.kind[k] = (ts_eff_fit){.why_not = "no timed kernels", .before = 0.5, .after = 0.5};
    const char *records[] = {"r.json"};
    const char *plain = "gpu: X\ncoefficients:\n  launch_s: 3.0e-6\n  dram_bytes_per_s: 4.3e12\n  tensor_flops_per_s: 9.9e14\n"
                        "  fma_flops_per_s: 6.7e13\n  sfu_ops_per_s: 1.7e13\n  sms: 132\n  l2_bytes: 6.0e7\n"
                        "  gemm_efficiency: 0.75\n  attention_efficiency: 0.5\n  reduce_efficiency: 0.6\n"
                        "  map_efficiency: 0.8";
    char *err = NULL, *text = ts_tune_model_text(plain, "plain.yaml", &f, records, 1, 0, &err);
    cr_assert_not_null(text, "%s", err ? err : "");
    cr_assert(strstr(text, "# Template efficiencies: gemm_efficiency (3 kernels) fitted") == text, "%s", text);
    char *flat = unwrapped(text);
    cr_assert_not_null(strstr(flat, "cublas_efficiency (no timed kernels), gemm_tf32x3_efficiency (no timed kernels), "
                                    "attention_efficiency (no timed kernels), "
                                    "skinny_gemm_efficiency (no timed kernels), "
                                    "reduce_efficiency (no timed kernels), row_efficiency (no timed kernels) and "
                                    "map_efficiency (no timed kernels): not fitted, "
                                    "kept at their values from plain.yaml.\n"
                                    "gpu: X\n"), "%s", flat);
    free(flat);
    cr_assert_not_null(strstr(text, "\n  map_efficiency: 0.8\n  cublas_efficiency: 0.5  # not fitted: the value it "
                                    "defaulted to\n  gemm_tf32x3_efficiency: 0.5  # not fitted: the value it defaulted to\n"
                                    "  skinny_gemm_efficiency: 0.5  # not fitted: the value it "
                                    "defaulted to\n  row_efficiency: 0.5  # not fitted: the value it defaulted "
                                    "to\n# The template efficiencies' fits"), "absent optional efficiencies keep their values:\n%s", text);
    ts_costmodel m;
    load_model(text, &m);
    cr_assert_eq(m.nfits, 1);
    cr_assert_float_eq(m.gemm_efficiency, 0.6, 0);
    cr_assert_float_eq(m.map_efficiency, 0.8, 0);
    ts_costmodel_free(&m);
    free(text);

    const char *flow = "gpu: X\ncoefficients: {launch_s: 3.0e-6, gemm_efficiency: 0.75}\n";
    cr_assert_null(ts_tune_model_text(flow, "flow.yaml", &f, records, 1, 0, &err));
    cr_assert_str_eq(err, "line 2: 'coefficients:' is not a block mapping (one entry per line): cannot rewrite it");
    free(err);
    const char *no_line = "gpu: X\ncoefficients:\n  launch_s: 3.0e-6\n";
    cr_assert_null(ts_tune_model_text(no_line, "short.yaml", &f, records, 1, 0, &err));
    cr_assert_str_eq(err, "no line '  gemm_efficiency: ...' under 'coefficients:' to replace");
    free(err);
}

/* ---- the command, on tests/data/tune/ -------------------------------------------------------------- */

/* tsopt ARGS with its standard error dropped: only what it writes to standard output. */
static tsopt_result run_stdout_only(const char *args) {
    return run_tsopt_env("sh -c '\"$@\" 2>/dev/null' sh", args);
}

#define RECORDS "tests/data/tune/rmsnorm_mlp.json tests/data/tune/attention.json tests/data/tune/swiglu.json"

Test(tunefit, command_fits_the_committed_records) {
    const char *out = "build/tunefit-cli.yaml";
    unlink(out);
    tsopt_result r = run_tsopt("calibrate --from-tune " RECORDS " --base " BASE " -o build/tunefit-cli.yaml");
    cr_assert_eq(r.code, 0, "exit %d:\n%s", r.code, r.out);
    cr_assert_not_null(strstr(r.out, "template efficiencies fitted to 3 tune records"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "  attention_efficiency         1      0.5      0.5  kept: fewer than 3 timed "
                                     "kernels\n"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "cost-model accuracy over 7 ok, timed candidates of 3 tuning runs:"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "as recorded    after fit"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "predicted best within 10% of the measured best                 3 of 3"), "%s",
                       r.out);
    /* the records were timed from gemm 0.62, reduce 0.45, map 0.66 with up to 3% noise */
    ts_costmodel m;
    ts_diags d;
    cr_assert_eq(ts_costmodel_load(&m, out, &d), 0);
    cr_assert_float_eq(m.gemm_efficiency, 0.62, 0.05 * 0.62, "%g", m.gemm_efficiency);
    cr_assert_float_eq(m.reduce_efficiency, 0.45, 0.05 * 0.45, "%g", m.reduce_efficiency);
    cr_assert_float_eq(m.map_efficiency, 0.66, 0.05 * 0.66, "%g", m.map_efficiency);
    cr_assert_float_eq(m.attention_efficiency, 0.5, 0, "kept");
    cr_assert_eq(m.nfits, 8 + 3);
    ts_diags_free(&d);
    ts_costmodel_free(&m);
    free(r.out);

    /* -o naming --base: replaced in place, by a complete file, with no temporary left */
    char *shipped = read_text(BASE);
    write_text("build/tunefit-inplace.yaml", shipped);
    free(shipped);
    tsopt_result in = run_tsopt("calibrate --from-tune " RECORDS " --base build/tunefit-inplace.yaml "
                                "-o build/tunefit-inplace.yaml");
    cr_assert_eq(in.code, 0, "%s", in.out);
    cr_assert_eq(ts_costmodel_load(&m, "build/tunefit-inplace.yaml", &d), 0);
    cr_assert_float_eq(m.gemm_efficiency, 0.62, 0.05 * 0.62, "%g", m.gemm_efficiency);
    cr_assert_eq(m.nfits, 8 + 3);
    ts_diags_free(&d);
    ts_costmodel_free(&m);
    free(in.out);
    DIR *dp = opendir("build");
    for (struct dirent *e; dp && (e = readdir(dp));)
        cr_assert_null(strstr(e->d_name, "tunefit-inplace.yaml.tmp"), "left behind: build/%s", e->d_name);
    if (dp) closedir(dp);
    unlink("build/tunefit-inplace.yaml");

    /* the model on standard output, the report on standard error */
    tsopt_result so = run_stdout_only("calibrate --from-tune " RECORDS " --base " BASE " --date 2026-12-01");
    cr_assert_eq(so.code, 0);
    cr_assert(strncmp(so.out, "# The analytic cost model's coefficients", 40) == 0, "%s", so.out);
    cr_assert_not_null(strstr(so.out, "on 2026-12-01 UTC"), "%s", so.out);
    cr_assert_null(strstr(so.out, "template efficiencies fitted"));
    free(so.out);
}

Test(tunefit, command_refuses_bad_records_and_writes_nothing) {
    const char *out = "build/tunefit-keep.yaml";
    write_text(out, "untouched\n");
    write_text("build/tunefit-bad.json", "{\"format\": \"tsopt-tune-record 1\", \"graph\": 3}\n");
    tsopt_result r = run_tsopt("calibrate --from-tune tests/data/tune/swiglu.json build/tunefit-bad.json "
                               "build/tunefit-missing.json -o build/tunefit-keep.yaml");
    cr_assert_eq(r.code, 1, "exit %d:\n%s", r.code, r.out);
    cr_assert_not_null(strstr(r.out, "build/tunefit-bad.json:1:44: error: the record: 'graph' must be a string, not "
                                     "a number"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "build/tunefit-missing.json: error: cannot open file"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "nothing was written"), "%s", r.out);
    char *kept = read_text(out);
    cr_assert_str_eq(kept, "untouched\n");
    free(kept);
    free(r.out);

    /* nothing to fit: an error too, and the output stays */
    tsopt_result none = run_tsopt("calibrate --from-tune tests/data/tune/attention.json --base " BASE
                                  " -o build/tunefit-keep.yaml");
    cr_assert_eq(none.code, 1, "%s", none.out);
    cr_assert_not_null(strstr(none.out, "no efficiency could be fitted"), "%s", none.out);
    kept = read_text(out);
    cr_assert_str_eq(kept, "untouched\n");
    free(kept);
    free(none.out);
    unlink(out);
    unlink("build/tunefit-bad.json");
}

Test(tunefit, command_line_usage) {
    tsopt_result h = run_tsopt("calibrate --help");
    cr_assert_eq(h.code, 0);
    cr_assert_not_null(strstr(h.out, "tsopt calibrate --from-tune RECORD.json... [--evaluate RECORD.json...] [--base FILE]"),
                       "%s", h.out);
    free(h.out);
    tsopt_result empty = run_tsopt("calibrate --from-tune -o x.yaml");
    cr_assert_eq(empty.code, 2, "%s", empty.out);
    cr_assert_not_null(strstr(empty.out, "--from-tune wants one or more record files"), "%s", empty.out);
    free(empty.out);
    tsopt_result mixed = run_tsopt("calibrate --from-tune tests/data/tune/swiglu.json --quick");
    cr_assert_eq(mixed.code, 2, "%s", mixed.out);
    cr_assert_not_null(strstr(mixed.out, "--from-tune does not go with '--quick'"), "%s", mixed.out);
    free(mixed.out);
    tsopt_result base = run_tsopt("calibrate --from-tune tests/data/tune/swiglu.json --base build/no-such-model.yaml");
    cr_assert_eq(base.code, 1, "%s", base.out);
    cr_assert_not_null(strstr(base.out, "build/no-such-model.yaml: error: cannot open file"), "%s", base.out);
    free(base.out);
}
