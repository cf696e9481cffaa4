/* home.h — where tsopt finds its data (rules/, templates/, costmodel/, calibrate/) when no option names
 * it: so that the tool runs from any directory, in the repository or installed by `make install`.
 * Not a search path: one folder is chosen, and a file missing there is an error naming the path tried. */
#ifndef TS_HOME_H
#define TS_HOME_H

/* The data folder: $TSOPT_HOME when set; else, beside the binary (/proc/self/exe), <bindir>/../share/tsopt
 * when it holds rules/ (an installed tool), else <bindir>/.. (build/tsopt in the repository). Returns a
 * heap string, "." when the binary's folder cannot be found. */
char *ts_data_home(void);

/* <home>/<rel>, or rel itself when the data folder is the current directory (so that paths printed and
 * written into headers stay short and machine-independent). Returns a heap string. */
char *ts_data_path(const char *rel);

#endif
