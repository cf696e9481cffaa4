/* home.c — the data folder of tsopt (see home.h). */
#include "home.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The folder of the running binary, or NULL. */
static char *binary_dir(void) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return NULL;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = '\0';
    return ts_strdup(exe);
}

char *ts_data_home(void) {
    const char *env = getenv("TSOPT_HOME");
    if (env && *env) return ts_strdup(env);
    char *bin = binary_dir();
    if (!bin) return ts_strdup(".");
    char *installed = ts_strfmt("%s/../share/tsopt", bin), *probe = ts_strfmt("%s/rules", installed);
    char *home = is_dir(probe) ? installed : ts_strfmt("%s/..", bin);
    if (home != installed) free(installed);
    free(probe);
    free(bin);
    return home;
}

/* Whether path names the current directory. */
static bool is_cwd(const char *path) {
    char a[PATH_MAX], b[PATH_MAX];
    return realpath(path, a) && getcwd(b, sizeof b) && strcmp(a, b) == 0;
}

char *ts_data_path(const char *rel) {
    char *home = ts_data_home(), canon[PATH_MAX];
    char *path = is_cwd(home) ? ts_strdup(rel) : ts_strfmt("%s/%s", realpath(home, canon) ? canon : home, rel);
    free(home);
    return path;
}
