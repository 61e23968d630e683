/*
 * cli_cancel.c: the SIGINT handler of cli_cancel.h. Async-signal-safe: it
 * stores to a volatile int, and at most calls signal() and raise().
 */
#include "cli_cancel.h"

#include <signal.h>
#include <string.h>

volatile int cli_cancel_flag;
static volatile sig_atomic_t second_kills_flag;

static void on_sigint(int sig) {
    if (second_kills_flag && cli_cancel_flag) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    cli_cancel_flag = 1;
}

void cli_cancel_install(int second_kills) {
    second_kills_flag = second_kills != 0;
    cli_cancel_flag = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a read at the chat prompt returns EINTR */
    sigaction(SIGINT, &sa, NULL);
}
