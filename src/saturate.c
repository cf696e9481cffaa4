/* saturate.c — rule loading and the phased saturation of a graph (see saturate.h). */
#include "saturate.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "spec.h"
#include "util.h"

const char *const ts_default_phases[] = {"algebra", "reductions", "fusion", "lowering"};
const int ts_default_nphases = 4;

static int load_one(ts_rules *rs, const char *path, FILE *err) {
    struct stat st; /* rules.c reads a file whole: refuse oversized ones first, as graph files are */
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > (off_t)TS_MAX_FILE_BYTES) {
        fprintf(err, "%s: error: file is larger than the %u MiB limit\n", path, TS_MAX_FILE_BYTES >> 20);
        return 1;
    }
    ts_diags d;
    bool ok = ts_rule_load_file(rs, path, &d);
    ts_diags_print(&d, err);
    int n = d.nerrors + (!ok && d.nerrors == 0);
    ts_diags_free(&d);
    return n;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int load_dir(ts_rules *rs, const char *dir, FILE *err) {
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(err, "%s: error: cannot open folder\n", dir);
        return 1;
    }
    char **names = NULL;
    int n = 0, cap = 0, errors = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        size_t len = strlen(e->d_name);
        if (len > 6 && strcmp(e->d_name + len - 6, ".rules") == 0) {
            TS_GROW(names, n, cap);
            names[n++] = ts_strfmt("%s/%s", dir, e->d_name);
        }
    }
    closedir(dp);
    if (n > 0) qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        errors += load_one(rs, names[i], err);
        free(names[i]);
    }
    free(names);
    return errors;
}

int ts_load_rule_paths(ts_rules *rs, const char *const *paths, int n, FILE *err) {
    int errors = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode)) errors += load_dir(rs, paths[i], err);
        else errors += load_one(rs, paths[i], err);
    }
    return errors;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int ts_saturate(ts_graph *g, const ts_rules *rs, const char *const *phases, int nphases,
                const ts_runner_limits *lim, ts_saturation *out, char **err) {
    memset(out, 0, sizeof *out);
    double t0 = now_s();
    if (ts_egir_init(&out->x, g, err) != 0) return -1;
    ts_runner_init(&out->run, out->x.eg, rs);
    for (int i = 0; i < nphases; i++) { /* each phase may grow the e-graph by node_limit e-nodes */
        int set = ts_rule_find_ruleset(rs, phases[i]);
        if (set < 0) {
            *err = ts_strfmt("no ruleset named '%s' was loaded", phases[i]);
            return -1;
        }
        ts_runner_limits phase = *lim;
        phase.node_limit = ts_eg_node_count(out->x.eg) + lim->node_limit;
        ts_runner_run_phase(&out->run, set, &phase);
    }
    out->seconds = now_s() - t0;
    return 0;
}

void ts_saturation_free(ts_saturation *s) {
    if (s->run.eg) ts_runner_free(&s->run);
    ts_egir_free(&s->x);
}
