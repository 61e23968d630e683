/*
 * webui.c: the lookup of the embedded page files (webui.h). The bytes and
 * the table live in webui_assets.c, which embed.cmake writes in the build
 * tree from the files beside this one, so the page is edited as plain
 * HTML/CSS/JS and needs no build step of its own.
 */
#include <string.h>

#include "webui.h"

extern const webui_asset webui_assets[];
extern const size_t webui_n_assets;

const webui_asset *webui_find(const char *url) {
    if (!url) return NULL;
    if (!strcmp(url, "/index.html")) url = "/";
    for (size_t i = 0; i < webui_n_assets; i++)
        if (!strcmp(url, webui_assets[i].path)) return &webui_assets[i];
    return NULL;
}
