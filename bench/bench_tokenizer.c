/*
 * bench_tokenizer.c: encoding and decoding speed of clover's tokenizer on
 * one core, on a mixed text generated here from a fixed seed (English
 * prose with common and rare words, code, Chinese, Russian, numbers,
 * emoji, whitespace runs), so the figure is reproducible anywhere.
 *
 *   bench_tokenizer [tokenizer.json] [megabytes] [text-out]
 *
 * text-out, if given, receives the generated text (to time other
 * tokenizers on the very same bytes).
 * Default tokenizer: $CLOVER_SOURCE_DIR/../shared/data/qwen3-tokenizer/tokenizer.json,
 * else ../shared/data/qwen3-tokenizer/tokenizer.json from the working directory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/rng.h"
#include "base/timer.h"
#include "text/tokenizer.h"

static const char *const ENGLISH[] = {
    "the",        "of",        "and",       "to",        "in",          "is",     "was",        "that",    "for",
    "it",         "with",      "as",        "on",        "be",          "at",     "by",         "this",    "had",
    "not",        "are",       "but",       "from",      "or",          "have",   "an",         "they",    "which",
    "one",        "you",       "were",      "her",       "all",         "she",    "there",      "would",   "their",
    "we",         "him",       "been",      "has",       "when",        "who",    "will",       "more",    "no",
    "if",         "out",       "so",        "said",      "what",        "up",     "its",        "about",   "into",
    "than",       "them",      "can",       "only",      "other",       "new",    "some",       "could",   "time",
    "these",      "two",       "may",       "then",      "do",          "first",  "any",        "my",      "now",
    "such",       "like",      "our",       "over",      "man",         "me",     "even",       "most",    "made",
    "after",      "also",      "did",       "many",      "before",      "must",   "through",    "years",   "where",
    "much",       "your",      "way",       "well",      "down",        "should", "because",    "each",    "just",
    "those",      "people",    "Mr",        "how",       "too",         "little", "state",      "good",    "very",
    "make",       "world",     "still",     "own",       "see",         "men",    "work",       "long",    "get",
    "here",       "between",   "both",      "life",      "being",       "under",  "never",      "day",     "same",
    "another",    "know",      "while",     "last",      "might",       "us",     "great",      "old",     "year",
    "off",        "come",      "since",     "against",   "go",          "came",   "right",      "used",    "take",
    "three",      "model",     "inference", "tokenizer", "diffusion",   "engine", "throughput", "latency", "benchmark",
    "parameters", "attention", "experts",   "gradient",  "Transformer", "It's",   "don't",      "we'll",   "they're",
    "I've",       "isn't",     "couldn't",  "O'Brien",
};
static const char *const CODE[] = {
    "def forward(self, x):\n        h = self.norm(x)\n        return x + self.mlp(h)\n",
    "for (size_t i = 0; i < n; i++) {\n    acc += a[i] * b[i];\n}\n",
    "if (rc != CLOVER_OK) return error_prefix(err, \"layer %d\", l);\n",
    "import numpy as np\nx = np.zeros((4, 8), dtype=np.float32)\n",
    "    # TODO: handle the empty case\n    if not items:\n        return []\n",
    "const auto it = std::find_if(v.begin(), v.end(), [&](int y) { return y > 3; });\n",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id;\n",
    "{\"model\": \"qwen\", \"temperature\": 0.7, \"max_tokens\": 256}\n",
};
static const char *const CHINESE =
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后"
    "多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还"
    "因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结"
    "解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级"
    "少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领"
    "七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每"
    "目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影";
static const char *const RUSSIAN[] = {
    "и",   "в",   "не",   "на",   "я",       "быть",  "он",  "с",       "что",    "а",     "по",
    "это", "она", "этот", "к",    "но",      "они",   "мы",  "как",     "из",     "у",     "который",
    "то",  "за",  "свой", "весь", "год",     "от",    "так", "о",       "для",    "ты",    "же",
    "все", "тот", "мочь", "вы",   "человек", "такой", "его", "сказать", "только", "модель"};
static const char *const EMOJI[] = {"🎉", "👍", "🚀", "😀", "❤️", "👨‍💻", "🇫🇷", "✅"};

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static size_t pick(rng_state *r, size_t n) { return (size_t)(rng_next(r) % n); }

/* One paragraph of a randomly chosen kind. */
static void paragraph(buf *b, rng_state *r) {
    size_t kind = pick(r, 100);
    char tmp[64];
    if (kind < 55) { /* English, with some rare made-up words */
        size_t words = 20 + pick(r, 80);
        for (size_t i = 0; i < words; i++) {
            if (i) puts_(b, " ");
            if (pick(r, 25) == 0) {
                size_t len = 4 + pick(r, 9);
                for (size_t k = 0; k < len; k++) tmp[k] = (char)('a' + pick(r, 26));
                put(b, tmp, len);
            } else {
                const char *w = ENGLISH[pick(r, sizeof ENGLISH / sizeof ENGLISH[0])];
                if (i == 0 && w[0] >= 'a' && w[0] <= 'z') {
                    tmp[0] = (char)(w[0] - 32);
                    put(b, tmp, 1);
                    puts_(b, w + 1);
                } else {
                    puts_(b, w);
                }
            }
            size_t p = pick(r, 20);
            if (p == 0) puts_(b, ",");
            if (p == 1) puts_(b, ".");
            if (p == 2) puts_(b, ";");
        }
        puts_(b, ".\n\n");
    } else if (kind < 70) { /* code */
        size_t n = 1 + pick(r, 4);
        for (size_t i = 0; i < n; i++) puts_(b, CODE[pick(r, sizeof CODE / sizeof CODE[0])]);
        puts_(b, "\n");
    } else if (kind < 82) { /* Chinese: 3-byte characters from a frequency list */
        size_t n_chars = strlen(CHINESE) / 3, len = 30 + pick(r, 120);
        for (size_t i = 0; i < len; i++) {
            put(b, CHINESE + 3 * pick(r, n_chars), 3);
            if (pick(r, 15) == 0) puts_(b, pick(r, 2) ? "，" : "。");
        }
        puts_(b, "\n");
    } else if (kind < 90) { /* Russian */
        size_t words = 15 + pick(r, 40);
        for (size_t i = 0; i < words; i++) {
            if (i) puts_(b, " ");
            puts_(b, RUSSIAN[pick(r, sizeof RUSSIAN / sizeof RUSSIAN[0])]);
        }
        puts_(b, ".\n");
    } else if (kind < 96) { /* numbers, dates, tables */
        size_t n = 5 + pick(r, 20);
        for (size_t i = 0; i < n; i++) {
            int len = snprintf(tmp, sizeof tmp, "| %u | %u.%02u | 2026-%02u-%02u |\n", (unsigned)pick(r, 100000),
                               (unsigned)pick(r, 1000), (unsigned)pick(r, 100), 1 + (unsigned)pick(r, 12),
                               1 + (unsigned)pick(r, 28));
            put(b, tmp, (size_t)len);
        }
    } else { /* chat-like with emoji and whitespace runs */
        puts_(b, "<|im_start|>user\n");
        size_t n = 3 + pick(r, 10);
        for (size_t i = 0; i < n; i++) {
            puts_(b, ENGLISH[pick(r, sizeof ENGLISH / sizeof ENGLISH[0])]);
            puts_(b, pick(r, 3) ? " " : "   ");
            if (pick(r, 3) == 0) puts_(b, EMOJI[pick(r, sizeof EMOJI / sizeof EMOJI[0])]);
        }
        puts_(b, "<|im_end|>\n");
    }
}

/* CPU time of this thread: the machine may be shared, and wall time then
 * counts other people's work too. Both are printed. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    char def[4096];
    const char *path = argc > 1 ? argv[1] : NULL;
    if (!path) {
        const char *src = getenv("CLOVER_SOURCE_DIR");
        snprintf(def, sizeof def, "%s%s../shared/data/qwen3-tokenizer/tokenizer.json", src ? src : "", src ? "/" : "");
        path = def;
    }
    double mb = argc > 2 ? atof(argv[2]) : 8.0;
    if (mb <= 0) mb = 8.0;

    clover_error err = {0};
    tokenizer *t;
    double t0 = timer_now();
    if (tokenizer_load_json(&t, path, &err)) {
        fprintf(stderr, "bench_tokenizer: %s\n", err.message);
        return 1;
    }
    double load_s = timer_now() - t0;

    buf text = {0};
    rng_state r;
    rng_seed(&r, 20261130);
    while (text.n < (size_t)(mb * 1e6)) paragraph(&text, &r);
    if (argc > 3) {
        FILE *f = fopen(argv[3], "wb");
        if (!f || fwrite(text.p, 1, text.n, f) != text.n || fclose(f)) {
            fprintf(stderr, "bench_tokenizer: cannot write %s\n", argv[3]);
            return 1;
        }
    }

    enum { REPS = 5 };
    double enc_s[REPS], enc_cpu[REPS], cold_s, dec_s[REPS], stream_s;
    token_ids ids = {0};
    tokenizer_encoder *e;
    if (tokenizer_encoder_create(&e, t, &err)) return 1;
    /* cold: a fresh encoder, its word cache empty */
    t0 = timer_now();
    if (tokenizer_encoder_run(e, text.p, text.n, TOKENIZER_ALLOW_SPECIAL, &ids, &err)) {
        fprintf(stderr, "bench_tokenizer: %s\n", err.message);
        return 1;
    }
    cold_s = timer_now() - t0;
    size_t n_tokens = ids.n;
    for (int i = 0; i < REPS; i++) {
        ids.n = 0;
        t0 = timer_now();
        double c0 = cpu_now();
        tokenizer_encoder_run(e, text.p, text.n, TOKENIZER_ALLOW_SPECIAL, &ids, &err);
        enc_cpu[i] = cpu_now() - c0;
        enc_s[i] = timer_now() - t0;
    }
    text_bytes out = {0};
    for (int i = 0; i < REPS; i++) {
        out.n = 0;
        t0 = timer_now();
        tokenizer_decode(t, ids.v, ids.n, 0, &out, &err);
        dec_s[i] = timer_now() - t0;
    }
    /* the text is already NFC, so decoding gives it back byte for byte */
    int round_trip = out.n == text.n && memcmp(out.v, text.p, text.n) == 0;
    tokenizer_stream s;
    tokenizer_stream_init(&s, t, 0);
    out.n = 0;
    t0 = timer_now();
    for (size_t i = 0; i < ids.n; i++) tokenizer_stream_push(&s, ids.v[i], &out, &err);
    tokenizer_stream_flush(&s, &out, &err);
    stream_s = timer_now() - t0;

    qsort(enc_s, REPS, sizeof enc_s[0], cmp_double);
    qsort(enc_cpu, REPS, sizeof enc_cpu[0], cmp_double);
    qsort(dec_s, REPS, sizeof dec_s[0], cmp_double);
    double mbytes = (double)text.n / 1e6;
    printf("tokenizer: %s (%d tokens), loaded in %.3f s\n", path, (int)tokenizer_n_tokens(t), load_s);
    printf("text: %.2f MB mixed (seed 20261130), %zu tokens, %.2f bytes/token, round trip %s\n", mbytes, n_tokens,
           (double)text.n / (double)n_tokens, round_trip ? "exact" : "DIFFERS");
    printf("encode, one thread: %.2f MB/s of CPU time (median of %d; best %.2f), %.2f MB/s of wall time; "
           "%.2f M tokens/s (CPU); first pass, cold word cache: %.2f MB/s wall\n",
           mbytes / enc_cpu[REPS / 2], REPS, mbytes / enc_cpu[0], mbytes / enc_s[REPS / 2],
           (double)n_tokens / enc_cpu[REPS / 2] / 1e6, mbytes / cold_s);
    printf("decode: %.1f MB/s median; stream decode: %.1f MB/s (%.0f ns per token)\n", mbytes / dec_s[REPS / 2],
           mbytes / stream_s, stream_s / (double)n_tokens * 1e9);
    text_bytes_free(&out);
    token_ids_free(&ids);
    tokenizer_encoder_free(e);
    tokenizer_free(t);
    free(text.p);
    return round_trip ? 0 : 1;
}
