/*
 * webui.h: the chat page `clover serve` answers at GET / (tools/server/webui:
 * index.html, app.css, app.js, embedded into the binary at build time by
 * embed.cmake), and the streaming event that feeds its live denoising view.
 * Kept apart from the connection layer: the server calls in through three
 * small hooks (the route, the API-key exemption of the page's files, the
 * pass callback of a request that asked for pass events).
 */
#ifndef CLOVER_SERVER_WEBUI_H
#define CLOVER_SERVER_WEBUI_H

#include <stddef.h>

#include "clover.h"

/* One embedded file. */
typedef struct webui_asset {
    const char *path;         /* the URL path: "/", "/app.js", ... */
    const char *content_type;
    const unsigned char *data;
    size_t len;
} webui_asset;

/* The embedded file served at url (the path, no query), or NULL. */
const webui_asset *webui_find(const char *url);

struct job;
/* Streams one denoising pass of the job's current block as an SSE chunk
 * with no choices and a "clover" object:
 *   {"pass": {"index": CHOICE, "block": B, "pass": P, "block_size": N,
 *             "position": POS, "n_fixed": K, "n_fixed_now": F,
 *             "rows": [TEXT or null per row]}}
 * rows: each fixed row's token text (invalid UTF-8 as U+FFFD), null while
 * masked. 0, or -1 out of memory (the request then fails). */
int webui_pass_event(struct job *j, const clover_model *m, const clover_pass_view *v);

#endif
