/*
 * chat_input.c: see chat_input.h. libedit reads characters through our own
 * function (EL_GETCFN), which waits with poll() and watches the SIGINT
 * flag: a read() interrupted by Ctrl-C may be restarted by a runtime that
 * installed SA_RESTART handlers, so the flag, not EINTR, is what ends the
 * wait. libedit installs no signal handlers of its own (EL_SIGNAL off):
 * cli_cancel.c owns SIGINT.
 */
#include "chat_input.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli_cancel.h"

#ifdef CLOVER_HAVE_LIBEDIT
#include <histedit.h>
#include <wchar.h>
#endif

struct chat_input {
    int interactive, styled;
    char *line; /* getline's buffer */
    size_t cap;
#ifdef CLOVER_HAVE_LIBEDIT
    EditLine *el;
    History *hist;
    char *copy; /* el_gets' line without its newline */
#endif
};

/* 1 a byte is ready on stdin, 0 Ctrl-C was pressed, -1 an error. */
static int wait_for_input(void) {
    for (;;) {
        if (cli_cancel_flag) return 0;
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int r = poll(&p, 1, 100);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -1;
    }
}

#ifdef CLOVER_HAVE_LIBEDIT
/* 1 when a Ctrl-D typed while an answer ran is waiting. Between prompts the
 * terminal is in cooked mode, where Ctrl-D on an empty line is queued as an
 * end-of-file mark: stdin is readable but holds no byte. libedit would read
 * that mark, after switching to raw mode, as a NUL byte and the Ctrl-D
 * would be lost; a read() now returns 0 for it instead. A byte that arrived
 * meanwhile goes back to libedit through el_push. */
static int pending_eof(EditLine *el) {
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    int queued = 0;
    if (poll(&p, 1, 0) != 1 || !(p.revents & POLLIN)) return 0;
    if (ioctl(STDIN_FILENO, FIONREAD, &queued) != 0 || queued != 0) return 0;
    char b[2] = {0, 0};
    ssize_t n = read(STDIN_FILENO, b, 1);
    if (n == 0) return 1;
    if (n == 1) el_push(el, b);
    return 0;
}

/* One character for libedit: bytes read until they make a whole one. */
static int read_char(EditLine *el, wchar_t *c) {
    (void)el;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (;;) {
        int w = wait_for_input();
        if (w <= 0) return -1; /* Ctrl-C or an error: el_gets returns NULL */
        char b;
        ssize_t n = read(STDIN_FILENO, &b, 1);
        if (n == 0) return 0;
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -1;
        }
        size_t k = mbrtowc(c, &b, 1, &st);
        if (k == (size_t)-2) continue; /* more bytes to come */
        if (k == (size_t)-1) {         /* not in the locale's encoding: the byte itself */
            *c = (wchar_t)(unsigned char)b;
            memset(&st, 0, sizeof st);
        }
        return 1;
    }
}

static const char *prompt_styled(EditLine *el) {
    (void)el;
    return "\1\033[1m\1>\1\033[0m\1 "; /* \1 ... \1: no printed width; libedit drops a trailing one */
}

static const char *prompt_plain(EditLine *el) {
    (void)el;
    return "> ";
}
#endif

chat_input *chat_input_open(int interactive, int styled) {
    chat_input *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    in->interactive = interactive;
    in->styled = styled;
#ifdef CLOVER_HAVE_LIBEDIT
    if (interactive) {
        in->el = el_init("clover", stdin, stdout, stderr);
        in->hist = history_init();
        if (in->el && in->hist) {
            HistEvent ev;
            history(in->hist, &ev, H_SETSIZE, 500);
            el_set(in->el, EL_EDITOR, "emacs");
            el_set(in->el, EL_SIGNAL, 0);
            el_set(in->el, EL_HIST, history, in->hist);
            el_set(in->el, EL_GETCFN, read_char);
            if (styled) el_set(in->el, EL_PROMPT_ESC, prompt_styled, '\1');
            else el_set(in->el, EL_PROMPT, prompt_plain);
            el_source(in->el, NULL); /* ~/.editrc, as other libedit programs do */
        } else {                     /* libedit could not start: plain reading */
            if (in->el) el_end(in->el);
            if (in->hist) history_end(in->hist);
            in->el = NULL;
            in->hist = NULL;
        }
    }
#endif
    return in;
}

void chat_input_close(chat_input *in) {
    if (!in) return;
#ifdef CLOVER_HAVE_LIBEDIT
    if (in->el) el_end(in->el);
    if (in->hist) history_end(in->hist);
    free(in->copy);
#endif
    free(in->line);
    free(in);
}

void chat_input_remember(chat_input *in, const char *line) {
#ifdef CLOVER_HAVE_LIBEDIT
    if (in->hist && line[0]) {
        HistEvent ev;
        history(in->hist, &ev, H_ENTER, line);
    }
#else
    (void)in, (void)line;
#endif
}

int chat_input_read(chat_input *in, const char **line) {
#ifdef CLOVER_HAVE_LIBEDIT
    if (in->el) {
        if (pending_eof(in->el)) {
            fputc('\n', stdout); /* as for Ctrl-D at the prompt */
            return 0;
        }
        /* The terminal into libedit's mode before el_gets draws the prompt:
         * el_gets itself prints the prompt first and switches the mode at
         * its first read, so a key pressed as soon as the prompt shows could
         * meet the cooked terminal (a Ctrl-D there becomes a NUL). */
        el_set(in->el, EL_PREP_TERM, 1);
        int n = 0;
        const char *s = el_gets(in->el, &n);
        if (!s) {
            if (cli_cancel_flag) { /* Ctrl-C at the prompt: a fresh prompt */
                cli_cancel_flag = 0;
                fputc('\n', stdout);
                fflush(stdout);
                return -1;
            }
            if (n == 0) fputc('\n', stdout); /* Ctrl-D: end the prompt's line */
            return 0;
        }
        size_t len = strlen(s);
        while (len && (s[len - 1] == '\n' || s[len - 1] == '\r')) len--;
        char *copy = realloc(in->copy, len + 1);
        if (!copy) return 0;
        memcpy(copy, s, len);
        copy[len] = '\0';
        in->copy = copy;
        *line = copy;
        return 1;
    }
#endif
    if (in->interactive) {
        fputs(in->styled ? "\033[1m>\033[0m " : "> ", stdout); /* the bytes libedit's prompt gives */
        fflush(stdout);
        int ready = wait_for_input();
        if (ready == 0) { /* Ctrl-C at the prompt: a fresh prompt */
            cli_cancel_flag = 0;
            fputc('\n', stdout);
            return -1;
        }
        if (ready < 0) return 0;
    }
    errno = 0;
    ssize_t n = getline(&in->line, &in->cap, stdin);
    if (n < 0) {
        if (errno == EINTR && cli_cancel_flag) {
            clearerr(stdin);
            cli_cancel_flag = 0;
            if (in->interactive) fputc('\n', stdout);
            return -1;
        }
        if (in->interactive) fputc('\n', stdout);
        return 0;
    }
    while (n > 0 && (in->line[n - 1] == '\n' || in->line[n - 1] == '\r')) in->line[--n] = '\0';
    *line = in->line;
    return 1;
}
