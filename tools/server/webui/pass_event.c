/*
 * pass_event.c: the "clover.pass" SSE chunk of a streaming request that set
 * stream_options.clover_passes (webui.h). It runs inside the engine's pass
 * callback on the scheduler thread; the chunk is queued on the job's stream
 * like any delta, so it reaches the client in order with the text.
 *
 * Why the text of each row and not only ids: the page (and any client) can
 * draw the block without the tokenizer. A row's token may be part of a UTF-8
 * character (byte-level BPE); JSON needs valid UTF-8, so invalid bytes are
 * replaced with U+FFFD here.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "webui.h"

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || len > n || (len == 2 && s[0] < 0xC2)) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    if (len == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (len == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || s[0] > 0xF4 || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return len;
}

/* The token's text as a JSON string (invalid bytes as U+FFFD), or NULL out of memory. */
static json_t *token_text(const clover_model *m, int32_t id) {
    char *text = NULL;
    size_t len = 0;
    clover_error err;
    if (clover_detokenize(m, &id, 1, 0, &text, &len, &err)) return json_string("\xEF\xBF\xBD");
    char *clean = malloc(3 * len + 1);
    json_t *out = NULL;
    if (clean) {
        size_t o = 0;
        for (size_t i = 0; i < len;) {
            size_t k = utf8_seq((const unsigned char *)text + i, len - i);
            if (k) {
                memcpy(clean + o, text + i, k);
                o += k;
                i += k;
            } else {
                memcpy(clean + o, "\xEF\xBF\xBD", 3);
                o += 3;
                i++;
            }
        }
        out = json_stringn(clean, o);
    }
    free(clean);
    clover_free(text);
    return out;
}

int webui_pass_event(struct job *j, const clover_model *m, const clover_pass_view *v) {
    json_t *rows = json_array();
    for (size_t r = 0; rows && r < v->block_size; r++) {
        json_t *cell = v->fixed[r] ? token_text(m, v->ids[r]) : json_null();
        if (!cell || json_array_append_new(rows, cell)) {
            json_decref(rows);
            rows = NULL;
        }
    }
    if (!rows) return -1;
    const char *object = j->endpoint == SERVER_ENDPOINT_CHAT ? "chat.completion.chunk" : "text_completion";
    json_t *pass = json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "index", (int)j->choice, "block",
                             (json_int_t)v->block_index, "pass", (json_int_t)v->pass, "block_size",
                             (json_int_t)v->block_size, "position", (json_int_t)v->position, "n_fixed",
                             (json_int_t)v->n_fixed, "n_fixed_now", (json_int_t)v->n_fixed_now, "rows", rows);
    json_t *obj = pass ? json_pack("{s:s,s:s,s:I,s:s,s:[],s:{s:o}}", "id", j->id, "object", object, "created",
                                   (json_int_t)j->created, "model", j->model_id, "choices", "clover", "pass", pass)
                       : NULL;
    char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!s) return -1;
    size_t n = strlen(s);
    char *ev = malloc(n + 9);
    int rc = -1;
    if (ev) {
        memcpy(ev, "data: ", 6);
        memcpy(ev + 6, s, n);
        memcpy(ev + 6 + n, "\n\n", 2);
        rc = job_append_sse(j, ev, n + 8);
    }
    free(ev);
    free(s);
    return rc;
}
