/*
 * visual.c: the terminal display of visual.h.
 *
 * Cursor model: `col` is where the next character goes, 0..width; col ==
 * width is the terminal's pending wrap (the next printable character goes
 * to the next row). A preview starts at (the cursor's row, col), or at the
 * start of the next row when a wrap is pending, and is erased by moving up
 * the rows it took, back to its first column, and clearing to the end of
 * the screen. Widths are simulated character by character as the terminal
 * lays them out (a wide character that does not fit wraps early).
 */
#include "visual.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <utf8proc.h>

#define TOKEN_MAX_COLS 16

struct visual {
    const clover_model *m;
    FILE *out;
    int show_blocks;
    int width; /* columns, re-read before each preview */
    int col;   /* see the cursor model above */
    /* the preview on screen */
    int shown;
    int start_col; /* its first column */
    int rows;      /* rows below its first row where it ended */
    /* the preview being built: bytes, and the simulated cursor */
    char *buf;
    size_t n, cap;
    int sim_col, sim_rows;
};

static int term_width(FILE *out) {
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 10) return ws.ws_col;
    return 80;
}

visual *visual_create(const clover_model *m, FILE *out, int show_blocks) {
    visual *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->m = m;
    v->out = out;
    v->show_blocks = show_blocks;
    v->width = term_width(out);
    return v;
}

void visual_free(visual *v) {
    if (!v) return;
    free(v->buf);
    free(v);
}

/* ---- one character as the terminal shows it ---- */

/* The UTF-8 of what is drawn for cp (a symbol for a control character) and
 * its width in columns. */
static int glyph_of(int32_t cp, char out[8], size_t *len) {
    if (cp == '\t') cp = 0x2192;                          /* → */
    else if (cp == '\n') cp = 0x21B5;                     /* ↵ (in a preview; text handles newlines itself) */
    else if (cp < 0x20) cp = 0x2400 + cp;                 /* control pictures: ␀ .. ␟ */
    else if (cp == 0x7F) cp = 0x2421;                     /* ␡ */
    else if ((cp >= 0x80 && cp < 0xA0) || cp < 0) cp = 0xFFFD; /* C1 controls, bytes that are not UTF-8 */
    *len = (size_t)utf8proc_encode_char(cp, (utf8proc_uint8_t *)out);
    int w = utf8proc_charwidth(cp);
    return w < 0 ? 1 : w;
}

/* Advances a simulated cursor over a character of width w. */
static void advance(int width, int *col, int *rows, int w) {
    if (w == 0) return;
    if (*col + w > width) { /* wraps before the character (pending wrap, or too wide to fit) */
        (*rows)++;
        *col = 0;
    }
    *col += w;
}

/* ---- the answer text ---- */

static void erase_preview(visual *v) {
    if (!v->shown) return;
    fputc('\r', v->out);
    if (v->rows > 0) fprintf(v->out, "\033[%dA", v->rows);
    if (v->start_col > 0) fprintf(v->out, "\033[%dG", v->start_col + 1);
    fputs("\033[J", v->out);
    v->shown = 0;
    v->col = v->start_col;
}

void visual_write(visual *v, const char *s, size_t n, int dim) {
    erase_preview(v);
    if (dim) fputs("\033[2m", v->out);
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) { /* not UTF-8 (the engine's text never is): one byte as U+FFFD */
            k = 1;
            cp = -1;
        }
        i += (size_t)k;
        if (cp == '\n') {
            fputc('\n', v->out);
            v->col = 0;
            continue;
        }
        if (cp == '\r') continue; /* a CR LF pair is one line end */
        if (cp == '\t') {
            int next = (v->col >= v->width ? 0 : v->col) / 8 * 8 + 8;
            fputc('\t', v->out);
            v->col = next < v->width ? next : v->width;
            continue;
        }
        char g[8];
        size_t len;
        int w = glyph_of(cp, g, &len);
        fwrite(g, 1, len, v->out);
        int rows = 0;
        advance(v->width, &v->col, &rows, w);
    }
    if (dim) fputs("\033[22m", v->out);
    fflush(v->out);
}

void visual_finish(visual *v) {
    erase_preview(v);
    if (v->col != 0) fputc('\n', v->out);
    v->col = 0;
    fflush(v->out);
}

/* ---- the block preview ---- */

static void put(visual *v, const char *s, size_t n) {
    if (v->n + n + 1 > v->cap) {
        size_t cap = v->cap ? v->cap : 1024;
        while (cap < v->n + n + 1) cap *= 2;
        char *b = realloc(v->buf, cap);
        if (!b) return; /* a display only: drop what does not fit */
        v->buf = b;
        v->cap = cap;
    }
    memcpy(v->buf + v->n, s, n);
    v->n += n;
}

static void put_str(visual *v, const char *s) { put(v, s, strlen(s)); }

/* A visible character of the preview: drawn and counted. */
static void put_glyph(visual *v, int32_t cp) {
    char g[8];
    size_t len;
    int w = glyph_of(cp, g, &len);
    put(v, g, len);
    advance(v->width, &v->sim_col, &v->sim_rows, w);
}

/* A 256-colour foreground from red (unsure) through yellow to green (sure). */
static const char *confidence_colour(float c) {
    if (c >= 0.9f) return "\033[38;5;46m";
    if (c >= 0.7f) return "\033[38;5;118m";
    if (c >= 0.5f) return "\033[38;5;226m";
    if (c >= 0.3f) return "\033[38;5;214m";
    return "\033[38;5;196m";
}

/* A fixed row: its token's text, at most TOKEN_MAX_COLS columns. */
static void put_token(visual *v, int32_t id, float conf) {
    char *text = NULL;
    size_t len = 0;
    put_str(v, confidence_colour(conf));
    if (clover_detokenize(v->m, &id, 1, 0, &text, &len, NULL) != CLOVER_OK || len == 0) {
        put_glyph(v, 0x2205); /* ∅: an id without text */
    } else {
        const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)text;
        int cols = 0;
        for (size_t i = 0; i < len;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &cp);
            if (k <= 0) { /* a byte of a character split across tokens */
                k = 1;
                cp = 0xB7; /* · */
            }
            i += (size_t)k;
            if (cols >= TOKEN_MAX_COLS) {
                put_glyph(v, 0x2026); /* … */
                break;
            }
            int w = utf8proc_charwidth(cp);
            cols += w > 0 ? w : 1;
            put_glyph(v, cp);
        }
    }
    clover_free(text);
    put_str(v, "\033[0m");
}

void visual_show_pass(visual *v, const clover_pass_view *pv) {
    if (!v->show_blocks) return;
    erase_preview(v);
    v->width = term_width(v->out);
    if (v->col > v->width) v->col = v->width;
    v->n = 0;
    /* where the preview starts: a pending wrap puts it at the next row's start */
    int pre = v->col >= v->width;
    v->start_col = pre ? 0 : v->col;
    v->sim_col = v->start_col;
    v->sim_rows = 0;
    for (size_t r = 0; r < pv->block_size; r++) {
        if (pv->fixed[r]) {
            put_token(v, pv->ids[r], pv->confidences[r]);
        } else {
            put_str(v, "\033[2m");
            put_glyph(v, 0x2591); /* ░ */
            put_str(v, "\033[0m");
        }
    }
    if (pre) fputs("\r\n", v->out); /* move to where the preview starts (the wrap the terminal had pending) */
    if (v->n) fwrite(v->buf, 1, v->n, v->out);
    fflush(v->out);
    v->shown = 1;
    v->rows = v->sim_rows;
    if (pre) v->col = 0; /* erasing leaves the cursor at the start of the new row */
}

int cli_term_plain(void) {
    const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
    return (nc && *nc) || (term && !strcmp(term, "dumb"));
}
