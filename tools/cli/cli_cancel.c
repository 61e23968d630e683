/*
 * cli_cancel.c: the SIGINT handler of cli_cancel.h. Async-signal-safe: it
 * stores to a volatile int, and at most calls signal() and raise() (the
 * writer's handler also unlink()s, through safe_output_unlink_all).
 */
#include "cli_cancel.h"

#include <signal.h>
#include <string.h>

#include "base/safe_output.h"

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

static void on_writer_signal(int sig) {
    safe_output_unlink_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_cancel_install_writer(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_writer_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}
