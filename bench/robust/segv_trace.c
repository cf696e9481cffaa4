/* segv_trace.c — a native backtrace on SIGSEGV/SIGABRT/SIGBUS for a process run with LD_PRELOAD, for the GPU
 * machine, which has no gdb: `gcc -shared -fPIC -O1 -o segv_trace.so bench/robust/segv_trace.c` then
 * `LD_PRELOAD=$PWD/segv_trace.so python3 bench/torch_op.py`. Prints the frames (with the shared object and the
 * nearest exported symbol) on stderr and re-raises the signal with its default action. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_fatal_signal(int sig)
{
    void *frames[64];
    const char *name = strsignal(sig);
    if (write(2, "segv_trace: ", 12) < 0 || write(2, name, strlen(name)) < 0 || write(2, "\n", 1) < 0) {
        /* nothing more can be said */
    }
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
}
