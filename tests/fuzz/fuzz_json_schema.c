/*
 * fuzz_json_schema.c: libFuzzer target of the structured-output schema
 * compiler and its byte automaton (src/grammar). The input is a schema, then
 * optionally a NUL and choice bytes. A schema either compiles or fails with
 * CLOVER_E_INVALID and one line starting "json schema:". A compiled one is
 * walked: at each step the choice byte picks one of the bytes (or the end)
 * the automaton allows; a walk that ends must be a document jansson parses
 * (an independent JSON parser), and the automaton never allows nothing
 * before the end. A broken promise traps.
 *
 * Seeds: tests/fuzz/corpus/fuzz_json_schema/ holds schemas of every
 * construct the compiler honours and a few it refuses.
 */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "grammar/json_match.h"
#include "grammar/json_schema.h"

#define REQUIRE(cond)                  \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t slen = nul ? (size_t)(nul - data) : size;
    const uint8_t *choice = nul ? nul + 1 : NULL;
    const size_t n_choice = nul ? size - slen - 1 : 0;
    js_schema *sc = NULL;
    clover_error err = {0};
    int rc = js_schema_compile((const char *)data, slen, &sc, &err);
    if (rc != CLOVER_OK) {
        REQUIRE(!sc && (rc == CLOVER_E_INVALID || rc == CLOVER_E_NOMEM));
        REQUIRE(!strncmp(err.message, "json schema:", 12) && !strchr(err.message, '\n'));
        return 0;
    }
    REQUIRE(sc && sc->root < sc->n_nodes);
    static char doc[512];
    size_t n = 0;
    jm_state s, t;
    jm_init(&s);
    for (size_t i = 0; i < n_choice && i < 512; i++) { /* 257 probes a step: bounded walks keep it fast */
        int allowed[257], k = 0;
        for (int c = 0; c <= JM_END; c++) {
            jm_copy(&t, &s);
            if (jm_feed(sc, &t, c)) allowed[k++] = c;
        }
        REQUIRE(k > 0); /* every reachable state can go on or end */
        const int c = allowed[choice[i] % k];
        if (c == JM_END) {
            json_error_t je;
            json_t *v = json_loadb(doc, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            REQUIRE(v != NULL);
            json_decref(v);
            break;
        }
        REQUIRE(jm_feed(sc, &s, c));
        doc[n++] = (char)c;
    }
    js_schema_free(sc);
    return 0;
}
