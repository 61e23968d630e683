/*
 * test_json_schema.c: the structured-output compiler and automaton
 * (src/grammar) against hand-computed expectations: constructs it cannot
 * honour are refused by name (and where), documents are accepted or
 * rejected as the schema says (integers exhaustively against arithmetic),
 * and every token mask equals feeding each token's bytes one by one (an
 * oracle that shares nothing with the trie walk or the cache), on the tiny
 * fixture's tokenizer.
 */
#include <stdio.h>
#include <string.h>

#include "grammar/json_match.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "test.h"
#include "text/tokenizer.h"

static js_schema *compile(const char *text) {
    js_schema *sc = NULL;
    clover_error err = {0};
    int rc = js_schema_compile(text, strlen(text), &sc, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s: %s", text, err.message);
    return sc;
}

/* Whether the whole document is accepted (every byte, then the end). */
static bool doc_ok(const js_schema *sc, const char *doc) {
    jm_state s;
    jm_init(&s);
    return jm_feed_bytes(sc, &s, doc, strlen(doc)) && jm_accepts(sc, &s);
}

static void test_refusals(void) {
    static const struct {
        const char *schema, *want;
    } cases[] = {
        {"{\"type\":\"string\",\"pattern\":\"^a\"}", "'pattern'"},
        {"{\"type\":\"string\",\"format\":\"date\"}", "'format'"},
        {"{\"$ref\":\"#/$defs/x\"}", "'$ref'"},
        {"{\"allOf\":[{\"type\":\"string\"}]}", "'allOf'"},
        {"{\"not\":{\"type\":\"string\"}}", "'not'"},
        {"{\"type\":\"number\",\"minimum\":0}", "'minimum' on a number"},
        {"{\"type\":\"integer\",\"multipleOf\":3}", "'multipleOf'"},
        {"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"string\",\"maxLength\":2}]}", "'anyOf'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}}", "/properties/a"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "'b'"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "empty"},
        {"{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", "minLength"},
        {"{\"type\":\"frob\"}", "'frob'"},
        {"{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", "items"},
        {"{\"type\": \"string\"", "not valid JSON"},
        {"false", "false"},
        {"{\"enum\":[1,2],\"minimum\":1}", "'minimum' beside 'enum'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        js_schema *sc = NULL;
        clover_error err = {0};
        int rc = js_schema_compile(cases[i].schema, strlen(cases[i].schema), &sc, &err);
        CHECK_MSG(rc == CLOVER_E_INVALID && !sc, "%s: rc %d", cases[i].schema, rc);
        CHECK_MSG(strstr(err.message, cases[i].want) != NULL, "%s: message '%s' does not name %s", cases[i].schema,
                  err.message, cases[i].want);
        CHECK_MSG(strchr(err.message, '\n') == NULL, "%s: one line", cases[i].schema);
    }
}

/* Every integer in [-300, 300] and a few malformed ones, against the range by arithmetic. */
static void test_integer_bounds(void) {
    static const struct {
        const char *schema;
        long lo, hi;
    } cases[] = {{"{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120}", -5, 120},
                 {"{\"type\":\"integer\",\"exclusiveMinimum\":10,\"exclusiveMaximum\":13}", 11, 12},
                 {"{\"type\":\"integer\",\"minimum\":-250,\"maximum\":-7}", -250, -7},
                 {"{\"type\":\"integer\",\"minimum\":0.5,\"maximum\":99.5}", 1, 99},
                 {"{\"type\":\"integer\",\"minimum\":100}", 100, 1000000}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        js_schema *sc = compile(cases[c].schema);
        if (!sc) continue;
        int bad = 0;
        for (long v = -300; v <= 300; v++) {
            char doc[32];
            snprintf(doc, sizeof doc, "%ld", v);
            const bool want = v >= cases[c].lo && v <= cases[c].hi;
            if (doc_ok(sc, doc) != want && bad++ < 5) CHECK_MSG(0, "%s: %s should be %s", cases[c].schema, doc, want ? "accepted" : "rejected");
        }
        CHECK(!doc_ok(sc, "0105"));
        CHECK(!doc_ok(sc, "12.0"));
        CHECK(!doc_ok(sc, "1e2"));
        CHECK(!doc_ok(sc, "-"));
        js_schema_free(sc);
    }
}

static void test_documents(void) {
    static const struct {
        const char *schema, *doc;
        bool ok;
    } cases[] = {
        {"{\"type\":\"string\",\"maxLength\":2}", "\"ab\"", true},
        {"{\"type\":\"string\",\"maxLength\":2}", "\"abc\"", false},
        {"{\"type\":\"string\",\"maxLength\":1}", "\"\xc3\xa9\"", true}, /* one character, two bytes */
        {"{\"type\":\"string\",\"maxLength\":1}", "\"\\u00e9\"", true},
        {"{\"type\":\"string\",\"maxLength\":1}", "\"\\n\"", true},
        {"{\"type\":\"string\",\"minLength\":2}", "\"a\"", false},
        {"{\"type\":\"string\"}", "\"\xff\"", false},          /* not UTF-8 */
        {"{\"type\":\"string\"}", "\"\xed\xa0\x80\"", false},  /* a surrogate in UTF-8 */
        {"{\"type\":\"string\"}", "\"a\tb\"", false},          /* a raw control character */
        {"{\"type\":\"string\"}", "\"\\x\"", false},
        {"{\"type\":\"number\"}", "-12.5e+3", true},
        {"{\"type\":\"number\"}", "1.", false},
        {"{\"type\":\"number\"}", "01", false},
        {"{\"type\":\"boolean\"}", "true", true},
        {"{\"type\":\"boolean\"}", "tru", false},
        {"{\"type\":\"null\"}", "null", true},
        {"{\"enum\":[\"red\",\"green\",7]}", "\"red\"", true},
        {"{\"enum\":[\"red\",\"green\",7]}", "\"re\"", false},
        {"{\"enum\":[\"red\",\"green\",7]}", "7", true},
        {"{\"enum\":[\"red\",\"green\",7]}", "77", false},
        {"{\"type\":\"string\",\"enum\":[\"red\",7]}", "7", false}, /* the type filters the enum */
        {"{\"const\":{\"a\":[1,2]}}", "{\"a\":[1,2]}", true},
        {"{\"type\":[\"string\",\"null\"]}", "null", true},
        {"{\"type\":[\"string\",\"null\"]}", "\"x\"", true},
        {"{\"type\":[\"string\",\"null\"]}", "1", false},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[]", false},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[1, 2]", true},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[1,2,3]", false},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"],\"additionalProperties\":false}",
         "{\"a\": 1, \"b\": true}", true},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"]}",
         "{\"b\":false}", true},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"b\"]}",
         "{\"a\":1}", false}, /* b is required */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"c\":1}", false},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{}", true},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"a\":1,}", false},
        {"{\"type\":\"object\"}", "{\"x\":[1,{\"y\":null}],\"z\":\"w\"}", true},
        {"{\"type\":\"object\"}", "[1]", false},
        {"{\"type\":\"object\"}", "{} ", false},                        /* nothing after the document */
        {"{\"type\":\"object\"}", "{        }", true},                  /* 8 whitespace bytes */
        {"{\"type\":\"object\"}", "{         }", false},                /* 9 */
        {"{\"type\":\"object\"}", "{\"a\" :1}", false},                 /* none before a colon */
        {"{\"type\":\"object\",\"additionalProperties\":false}", "{}", true},
        {"{\"type\":\"object\",\"additionalProperties\":false}", "{\"a\":1}", false},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":1,\"b\":2}", true},
        {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":\"x\"}", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        js_schema *sc = compile(cases[i].schema);
        if (!sc) continue;
        CHECK_MSG(doc_ok(sc, cases[i].doc) == cases[i].ok, "%s on %s: expected %s", cases[i].schema, cases[i].doc,
                  cases[i].ok ? "accepted" : "rejected");
        js_schema_free(sc);
    }
}

/* Each mask against feeding every token's bytes alone, along a document. */
static void test_masks(const tokenizer *t) {
    const char *schema = "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\"]},"
                         "\"n\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":120},"
                         "\"s\":{\"type\":\"string\",\"maxLength\":3},\"t\":{\"type\":\"array\",\"maxItems\":2}},"
                         "\"required\":[\"color\",\"n\"],\"additionalProperties\":false}";
    const char *doc = "{ \"color\":\"green\",\"n\":-4,\"s\":\"a\xc3\xa9\",\"t\":[1,{\"x\":[true]}]}";
    js_schema *sc = compile(schema);
    if (!sc) return;
    const size_t V = (size_t)tokenizer_n_tokens(t);
    tm_vocab *v = NULL;
    tm_cache *c = NULL;
    clover_error err = {0};
    CHECK(tm_vocab_build(t, V, &v, &err) == CLOVER_OK);
    CHECK(v && tm_cache_create(sc, v, 8, &c, &err) == CLOVER_OK); /* small: the clearing path runs too */
    if (!v || !c) goto out;
    jm_state s;
    jm_init(&s);
    size_t mismatches = 0, allowed_total = 0;
    for (size_t at = 0; at <= strlen(doc); at++) {
        for (int rep = 0; rep < 2; rep++) { /* computed, then (maybe) from the cache */
            bool acc;
            const uint64_t *m = tm_mask(c, &s, &acc);
            CHECK(m != NULL);
            if (!m) goto out;
            CHECK(acc == (at == strlen(doc)));
            for (size_t id = 0; id < V; id++) {
                bool want = false;
                size_t len = 0;
                const char *b = tokenizer_token_bytes(t, (int32_t)id, &len);
                const tokenizer_kind k = tokenizer_token_kind(t, (int32_t)id);
                if (b && len && (k == TOKENIZER_KIND_NORMAL || k == TOKENIZER_KIND_ADDED)) {
                    jm_state x;
                    jm_copy(&x, &s);
                    want = jm_feed_bytes(sc, &x, b, len);
                }
                const bool got = (m[id >> 6] >> (id & 63)) & 1;
                allowed_total += got;
                if (got != want && mismatches++ < 5)
                    CHECK_MSG(0, "at byte %zu, token %zu ('%.*s'): mask %d, oracle %d", at, id, (int)len, b, got, want);
            }
        }
        if (at < strlen(doc)) CHECK(jm_feed(sc, &s, (unsigned char)doc[at]));
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(allowed_total > 0);
    uint64_t computed, hits, visited;
    tm_cache_stats(c, &computed, &hits, &visited);
    CHECK(hits > 0);
out:
    tm_cache_free(c);
    tm_vocab_free(v);
    js_schema_free(sc);
}

static const tokenizer *g_tok;
static void test_masks_tiny(void) { test_masks(g_tok); }

int main(void) {
    RUN(test_refusals);
    RUN(test_integer_bounds);
    RUN(test_documents);
    char path[4096];
    tokenizer *t = NULL;
    clover_error err = {0};
    if (test_source_path("tests/fixtures/tiny_clover/hf/tokenizer.json", path, sizeof path)) {
        int rc = tokenizer_load_json(&t, path, &err);
        CHECK_MSG(rc == CLOVER_OK, "%s: %s", path, err.message);
    }
    if (t) {
        g_tok = t;
        RUN(test_masks_tiny);
        tokenizer_free(t);
    }
    return TEST_EXIT();
}
