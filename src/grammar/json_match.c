/*
 * json_match.c: the byte automaton (json_match.h). Each frame kind has a
 * small step function answering: consumed (as a structural byte or as
 * whitespace), rejected, or "complete: pop me and give the byte to my
 * parent" (a number or literal ends on the byte after it). Opening a value
 * pushes a frame; the parent sets its own next state before the push, so a
 * frame that pops leaves the parent ready for what follows the value.
 *
 * Integers with bounds are generated digit by digit: a digit is allowed only
 * if some completion of the digits so far (at most JS_INT_DIGITS of them)
 * lies in the range, so every state reached can still end inside it.
 */
#include "grammar/json_match.h"

#include <string.h>

enum { R_REJECT = 0, R_OK, R_WS, R_POP, R_POP_REFEED };

enum { ROOT_VALUE = 0, ROOT_DONE };
enum { O_OPEN = 0, O_KEY, O_COLON, O_VALUE, O_AFTER, O_COMMA };
enum { A_OPEN = 0, A_AFTER, A_COMMA };
enum { S_CHAR = 0, S_ESC, S_HEX, S_U8 };
enum { N_BEGIN = 0, N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

#define JM_ROOT UINT32_MAX
#define FALLTHROUGH __attribute__((fallthrough))
#define JM_FRAC_DIGITS 18
#define JM_EXP_DIGITS 2 /* |exponent| < 100: every number stays a finite double */

static bool is_ws(int c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static int ws_step(jm_state *s, int c) {
    if (!is_ws(c) || s->ws >= JM_WS_MAX) return R_REJECT;
    s->ws++;
    return R_WS;
}

static jm_frame *push(jm_state *s, uint32_t node, uint8_t st) {
    if (s->depth >= JM_MAX_FRAMES) return NULL;
    jm_frame *f = &s->f[s->depth++];
    memset(f, 0, sizeof *f);
    f->node = node;
    f->st = st;
    return f;
}

static const int64_t pow10_tab[19] = {1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL,
                                      100000000LL, 1000000000LL, 10000000000LL, 100000000000LL,
                                      1000000000000LL, 10000000000000LL, 100000000000000LL,
                                      1000000000000000LL, 10000000000000000LL, 100000000000000000LL,
                                      1000000000000000000LL};

/* Whether an integer whose digits so far are nd digits of value m (sign neg)
 * can be completed inside [lo, hi] with at most JS_INT_DIGITS digits. */
static bool int_feasible(const js_node *n, bool neg, int64_t m, uint32_t nd) {
    if (nd == 0) { /* only the sign so far: any 1..18 digit value of that sign */
        int64_t a = neg ? -(pow10_tab[JS_INT_DIGITS] - 1) : 0, b = neg ? 0 : pow10_tab[JS_INT_DIGITS] - 1;
        return a <= n->hi && b >= n->lo;
    }
    for (uint32_t k = 0; nd + k <= JS_INT_DIGITS; k++) {
        if (m == 0 && k > 0) break; /* "0" takes no more digits */
        int64_t a = m * pow10_tab[k], b = a + pow10_tab[k] - 1;
        int64_t lo = neg ? -b : a, hi = neg ? -a : b;
        if (lo <= n->hi && hi >= n->lo) return true;
    }
    return false;
}

static bool int_in_range(const js_node *n, const jm_frame *f) {
    int64_t v = f->aux ? -(int64_t)f->m : (int64_t)f->m;
    return v >= n->lo && v <= n->hi;
}

static int begin_value(const js_schema *sc, jm_state *s, uint32_t node, int c);

static int number_step(const js_node *n, jm_frame *f, int c) {
    const bool d = is_digit(c);
    switch (f->st) {
    case N_BEGIN:
        if (c == '-') {
            if (n->integer && !int_feasible(n, true, 0, 0)) return R_REJECT;
            f->aux = 1;
            f->st = N_SIGN;
            return R_OK;
        }
        FALLTHROUGH; /* the next case takes it */
    case N_SIGN:
        if (!d) return R_REJECT;
        if (n->integer && !int_feasible(n, f->aux, c - '0', 1)) return R_REJECT;
        f->m = n->integer ? (uint64_t)(c - '0') : 0;
        f->n = 1;
        f->st = c == '0' ? N_ZERO : N_INT;
        return R_OK;
    case N_INT:
        if (d) {
            if (f->n >= JS_INT_DIGITS) return R_REJECT;
            int64_t m2 = (int64_t)f->m * 10 + (c - '0');
            if (n->integer && !int_feasible(n, f->aux, m2, f->n + 1)) return R_REJECT;
            f->m = n->integer ? (uint64_t)m2 : 0; /* a float's value is not needed: fewer distinct states */
            f->n++;
            return R_OK;
        }
        FALLTHROUGH; /* the next case takes it */
    case N_ZERO:
        if (!n->integer && c == '.') {
            f->st = N_DOT;
            return R_OK;
        }
        if (!n->integer && (c == 'e' || c == 'E')) {
            f->st = N_E;
            return R_OK;
        }
        if (n->integer && !int_in_range(n, f)) return R_REJECT;
        return R_POP_REFEED;
    case N_DOT:
        if (!d) return R_REJECT;
        f->st = N_FRAC;
        f->n = 1;
        return R_OK;
    case N_FRAC:
        if (d) {
            if (f->n >= JM_FRAC_DIGITS) return R_REJECT;
            f->n++;
            return R_OK;
        }
        if (c == 'e' || c == 'E') {
            f->st = N_E;
            return R_OK;
        }
        return R_POP_REFEED;
    case N_E:
        if (c == '+' || c == '-') {
            f->st = N_ESIGN;
            return R_OK;
        }
        FALLTHROUGH; /* the next case takes it */
    case N_ESIGN:
        if (!d) return R_REJECT;
        f->st = N_EXP;
        f->n = 1;
        return R_OK;
    case N_EXP:
        if (d) {
            if (f->n >= JM_EXP_DIGITS) return R_REJECT;
            f->n++;
            return R_OK;
        }
        return R_POP_REFEED;
    default: return R_REJECT;
    }
}

static int literal_step(const js_node *n, jm_frame *f, int c) {
    uint64_t keep = 0;
    bool complete = false;
    for (uint32_t i = 0; i < n->n_lits; i++) {
        if (!((f->m >> i) & 1)) continue;
        if (f->k == n->lit_len[i]) complete = true;
        else if (c < 256 && (unsigned char)n->lits[i][f->k] == c) keep |= 1ull << i;
    }
    if (keep) {
        f->m = keep;
        f->k++;
        return R_OK;
    }
    return complete ? R_POP_REFEED : R_REJECT;
}

static int string_step(const js_node *n, jm_frame *f, int c) {
    if (c == JM_END) return R_REJECT;
    switch (f->st) {
    case S_CHAR:
        if (c == '"') return f->n >= n->min_len ? R_POP : R_REJECT;
        if (c < 0x20) return R_REJECT;
        if (f->n >= n->max_len) return R_REJECT; /* a character starts */
        if (c == '\\') {
            f->st = S_ESC;
        } else if (c >= 0x80) {
            uint32_t lo = 0x80, hi = 0xBF, more;
            if (c >= 0xC2 && c <= 0xDF) more = 1;
            else if (c >= 0xE0 && c <= 0xEF) {
                more = 2;
                if (c == 0xE0) lo = 0xA0;
                if (c == 0xED) hi = 0x9F; /* no surrogates */
            } else if (c >= 0xF0 && c <= 0xF4) {
                more = 3;
                if (c == 0xF0) lo = 0x90;
                if (c == 0xF4) hi = 0x8F;
            } else {
                return R_REJECT;
            }
            f->st = S_U8;
            f->aux = (uint8_t)more;
            f->k = lo | hi << 8;
        }
        f->n++;
        return R_OK;
    case S_ESC:
        if (c == 'u') {
            f->st = S_HEX;
            f->aux = 0;
            return R_OK;
        }
        if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
            f->st = S_CHAR;
            return R_OK;
        }
        return R_REJECT;
    case S_HEX: {
        const bool hex = is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (!hex) return R_REJECT;
        if (f->aux == 0 && (c == 'd' || c == 'D')) return R_REJECT; /* \uD...: surrogates would count as 2 */
        if (++f->aux == 4) f->st = S_CHAR;
        return R_OK;
    }
    case S_U8:
        if ((uint32_t)c < (f->k & 0xFF) || (uint32_t)c > (f->k >> 8)) return R_REJECT;
        f->k = 0x80 | 0xBF << 8;
        if (--f->aux == 0) {
            f->st = S_CHAR;
            f->k = 0;
        }
        return R_OK;
    default: return R_REJECT;
    }
}

/* Candidate properties for the next key: from n up to the next required one. */
static uint64_t key_candidates(const js_node *n, uint32_t from) {
    uint64_t m = 0;
    for (uint32_t i = from; i < n->n_props; i++) {
        m |= 1ull << i;
        if (n->props[i].required) break;
    }
    return m;
}

static bool required_left(const js_node *n, uint32_t from) { return n->last_required >= (int32_t)from; }

static int object_step(const js_schema *sc, jm_state *s, uint32_t fi, int c) {
    const js_node *n = &sc->nodes[s->f[fi].node];
    jm_frame *f = &s->f[fi];
    if (c == JM_END) return R_REJECT;
    switch (f->st) {
    case O_OPEN:
    case O_COMMA:
        if (is_ws(c)) return ws_step(s, c);
        if (c == '}' && f->st == O_OPEN) return n->open || !required_left(n, f->n) ? R_POP : R_REJECT;
        if (c != '"') return R_REJECT;
        if (n->open) {
            f->st = O_COLON;
            return begin_value(sc, s, sc->string_node, c) ? R_OK : R_REJECT;
        }
        f->m = key_candidates(n, f->n);
        if (!f->m) return R_REJECT;
        f->k = 0;
        f->st = O_KEY;
        return R_OK;
    case O_KEY: {
        if (c == '"') {
            for (uint32_t i = 0; i < n->n_props; i++)
                if (((f->m >> i) & 1) && n->props[i].key_len == f->k) {
                    f->k = i;
                    f->n = i + 1;
                    f->m = 0;
                    f->st = O_COLON;
                    return R_OK;
                }
            /* else an escaped quote inside a name (canonical names never end in a lone backslash) */
        }
        uint64_t keep = 0;
        for (uint32_t i = 0; i < n->n_props; i++)
            if (((f->m >> i) & 1) && f->k < n->props[i].key_len && (unsigned char)n->props[i].key[f->k] == c)
                keep |= 1ull << i;
        if (!keep) return R_REJECT;
        f->m = keep;
        f->k++;
        return R_OK;
    }
    case O_COLON:
        if (c != ':') return R_REJECT;
        f->st = O_VALUE;
        return R_OK;
    case O_VALUE: {
        if (is_ws(c)) return ws_step(s, c);
        uint32_t child = n->open ? n->value_node : n->props[f->k].node;
        f->st = O_AFTER;
        if (!n->open) f->k = 0;
        return begin_value(sc, s, child, c) ? R_OK : R_REJECT;
    }
    case O_AFTER:
        if (is_ws(c)) return ws_step(s, c);
        if (c == ',') {
            if (!n->open && f->n >= n->n_props) return R_REJECT;
            f->st = O_COMMA;
            return R_OK;
        }
        if (c == '}') return n->open || !required_left(n, f->n) ? R_POP : R_REJECT;
        return R_REJECT;
    default: return R_REJECT;
    }
}

static int array_step(const js_schema *sc, jm_state *s, uint32_t fi, int c) {
    const js_node *n = &sc->nodes[s->f[fi].node];
    jm_frame *f = &s->f[fi];
    if (c == JM_END) return R_REJECT;
    switch (f->st) {
    case A_OPEN:
    case A_COMMA:
        if (is_ws(c)) return ws_step(s, c);
        if (c == ']' && f->st == A_OPEN) return n->min_items == 0 ? R_POP : R_REJECT;
        if (f->n >= n->max_items) return R_REJECT;
        f->n++;
        f->st = A_AFTER;
        return begin_value(sc, s, n->item, c) ? R_OK : R_REJECT;
    case A_AFTER:
        if (is_ws(c)) return ws_step(s, c);
        if (c == ',') {
            if (f->n >= n->max_items) return R_REJECT;
            f->st = A_COMMA;
            return R_OK;
        }
        if (c == ']') return f->n >= n->min_items ? R_POP : R_REJECT;
        return R_REJECT;
    default: return R_REJECT;
    }
}

/* Opens a value of node with its first byte c (consumed on success). */
static int begin_value(const js_schema *sc, jm_state *s, uint32_t node, int c) {
    const js_node *n = &sc->nodes[node];
    if (!js_first_has(n, c)) return 0;
    if (n->kind == JS_UNION) {
        for (uint32_t i = 0; i < n->n_alts; i++)
            if (js_first_has(&sc->nodes[n->alts[i]], c)) return begin_value(sc, s, n->alts[i], c);
        return 0;
    }
    jm_frame *f = push(s, node, 0);
    if (!f) return 0; /* too deep: the value cannot open here */
    switch (n->kind) {
    case JS_OBJECT:
    case JS_ARRAY:
    case JS_STRING: return 1; /* '{', '[' or '"' (the first set says so) */
    case JS_NUMBER: return number_step(n, f, c) == R_OK;
    case JS_LITERAL:
        for (uint32_t i = 0; i < n->n_lits; i++)
            if ((unsigned char)n->lits[i][0] == c) f->m |= 1ull << i;
        f->k = 1;
        return f->m != 0;
    default: return 0;
    }
}

void jm_init(jm_state *s) {
    memset(s, 0, sizeof *s);
    s->depth = 1;
    s->f[0].node = JM_ROOT;
    s->f[0].st = ROOT_VALUE;
}

bool jm_feed(const js_schema *sc, jm_state *s, int c) {
    for (;;) {
        if (s->depth == 0) return false;
        const uint32_t fi = s->depth - 1;
        jm_frame *f = &s->f[fi];
        int r;
        if (f->node == JM_ROOT) {
            if (f->st == ROOT_DONE) return c == JM_END;
            if (is_ws(c)) {
                r = ws_step(s, c);
            } else {
                f->st = ROOT_DONE;
                r = c != JM_END && begin_value(sc, s, sc->root, c) ? R_OK : R_REJECT;
            }
        } else {
            const js_node *n = &sc->nodes[f->node];
            switch (n->kind) {
            case JS_OBJECT: r = object_step(sc, s, fi, c); break;
            case JS_ARRAY: r = array_step(sc, s, fi, c); break;
            case JS_STRING: r = string_step(n, f, c); break;
            case JS_NUMBER: r = number_step(n, f, c); break;
            case JS_LITERAL: r = literal_step(n, f, c); break;
            default: r = R_REJECT;
            }
        }
        switch (r) {
        case R_WS: return true;
        case R_OK: s->ws = 0; return true;
        case R_POP:
            s->depth = fi;
            s->ws = 0;
            return true;
        case R_POP_REFEED: s->depth = fi; continue;
        default: return false;
        }
    }
}

bool jm_feed_bytes(const js_schema *sc, jm_state *s, const void *bytes, size_t n) {
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++)
        if (!jm_feed(sc, s, b[i])) return false;
    return true;
}

bool jm_accepts(const js_schema *sc, const jm_state *s) {
    jm_state t;
    jm_copy(&t, s);
    return jm_feed(sc, &t, JM_END);
}

bool jm_string_content(const js_schema *sc, const jm_state *s, uint32_t *room) {
    if (s->depth == 0) return false;
    const jm_frame *f = &s->f[s->depth - 1];
    if (f->node == JM_ROOT || sc->nodes[f->node].kind != JS_STRING || f->st != S_CHAR) return false;
    const js_node *n = &sc->nodes[f->node];
    *room = n->max_len == UINT32_MAX ? UINT32_MAX : n->max_len - f->n;
    return true;
}

uint32_t jm_string_chars(const void *bytes, size_t n) {
    /* the string frame's own rules, fed from a fresh frame without bounds */
    static const js_node unbounded = {.kind = JS_STRING, .max_len = UINT32_MAX};
    jm_frame f = {0};
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++)
        if (b[i] == '"' || string_step(&unbounded, &f, b[i]) != R_OK) return 0;
    return f.st == S_CHAR ? f.n : 0;
}
