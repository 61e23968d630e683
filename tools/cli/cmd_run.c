/*
 * cmd_run.c: `clover run`: one generation request. With text (-p, or
 * stdin) the prompt goes through the chat template (or --raw) and the
 * model's tokenizer, and the answer is streamed (run_text.c); with --ids
 * the prompt is token ids and the generated ids and every statistic are
 * printed (run_report.c). Both take every option the engine has, and
 * --json for one object holding every field of the result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clover.h"
#include "cli_args.h"
#include "commands.h"
#include "cli_cancel.h"
#include "gen_opts.h"
#include "prefill.h"
#include "prompt_text.h"
#include "run_report.h"
#include "run_text.h"

static const cli_opt run_table[] = {
    {"--model", "-m", CLI_STR, 0, 0, "FILE", "GGUF model (default: the model built into this binary)"},
    {"--prompt", "-p", CLI_STR, 0, 0, "TEXT", "the prompt text"},
    {"--file", "-f", CLI_STR, 0, 0, "FILE", "the prompt text from a file"},
    {"--chat", NULL, CLI_FLAG, 0, 0, NULL, "the prompt is a user message in the chat template (default)"},
    {"--raw", NULL, CLI_FLAG, 0, 0, NULL, "the prompt is plain text, tokenized as it is (special tokens matched)"},
    {"--system", NULL, CLI_STR, 0, 0, "TEXT", "chat: a system message before the prompt"},
    {"--think", NULL, CLI_FLAG, 0, 0, NULL, "chat: the answer opens a think block (default)"},
    {"--no-think", NULL, CLI_FLAG, 0, 0, NULL, "chat: an empty think block (no reasoning)"},
    {"--ids", NULL, CLI_STR, 0, 0, "LIST", "the prompt as comma-separated token ids"},
    {"--json", NULL, CLI_FLAG, 0, 0, NULL, "print one JSON object with every field of the result"},
    {"--no-visual", NULL, CLI_FLAG, 0, 0, NULL, "no block display on a terminal, only the text"},
};
static const cli_opt_table run_tables[] = {{run_table, sizeof run_table / sizeof run_table[0]}, {0}};

static void run_usage(FILE *out) {
    fprintf(out, "usage: clover run [-m MODEL] [-p PROMPT | -f FILE | --ids 1,2,3] [options]\n"
                 "\n"
                 "Generates an answer. A Clover model runs block diffusion (the record's\n"
                 "LowConfidence loop); a model without the record, or --ar, decodes token by token.\n"
                 "The prompt is text (-p, -f, or stdin when neither is given and stdin is not a\n"
                 "terminal), by default one user message in the model's chat template; the answer\n"
                 "is printed as it is generated and a summary follows on stderr. On a terminal each\n"
                 "block is drawn while it is denoised: masked rows as a dim shade, fixed rows\n"
                 "coloured by confidence (green sure, red unsure; NO_COLOR or TERM=dumb: no colour).\n"
                 "With --ids the prompt is token ids, and the generated ids and every statistic are\n"
                 "printed instead. llama.cpp's names work too (-n, -c, -t, -s, --temp, -ngl, -b).\n"
                 "\n"
                 "prompt and output:\n");
    cli_opts_print(out, &run_tables[0]);
    fprintf(out, "generation:\n");
    cli_opts_print(out, &GEN_OPTS_TABLE);
    fprintf(out, "  -h, --help                  this text\n"
                 "\n"
                 "An answer that fills the context ends with finish \"length\" (exit 0).\n"
                 "Ctrl-C stops the answer and prints its summary (exit 130; a second Ctrl-C ends clover).\n"
                 "Exit codes: 0 done, 1 the model or the request failed (one error line), 2 usage,\n"
                 "130 interrupted.\n");
}

typedef struct run_options {
    const char *model, *prompt, *system, *file;
    int32_t *ids;
    size_t n_ids;
    int json, raw, no_think, no_visual;
    gen_opts g;
} run_options;

static void run_options_free(run_options *o) {
    free(o->ids);
    gen_opts_free(&o->g);
}

/* The options of this command without a value; 1 when a was one. */
static int run_flag(const char *a, run_options *o) {
    if (!strcmp(a, "--json")) o->json = 1;
    else if (!strcmp(a, "--chat")) o->raw = 0;
    else if (!strcmp(a, "--raw")) o->raw = 1;
    else if (!strcmp(a, "--think")) o->no_think = 0;
    else if (!strcmp(a, "--no-think")) o->no_think = 1;
    else if (!strcmp(a, "--no-visual")) o->no_visual = 1;
    else return gen_opts_flag(&o->g, a);
    return 1;
}

/* An option with a value; 0, -1 after a usage error, 1 when unknown. */
static int run_valued(const char *a, const char *v, run_options *o) {
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        o->model = v;
    } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
        o->prompt = v;
    } else if (!strcmp(a, "--file")) {
        o->file = v;
    } else if (!strcmp(a, "--system")) {
        o->system = v;
    } else if (!strcmp(a, "--ids")) {
        free(o->ids);
        return cli_parse_ids("run", a, v, &o->ids, &o->n_ids) ? -1 : 0;
    } else {
        return gen_opts_valued(&o->g, "run", a, v);
    }
    return 0;
}

/* 0 ok, 1 --help shown, -1 usage error (already reported). */
static int run_parse(int argc, char **argv, run_options *o) {
    gen_opts_init(&o->g);
    cli_opt_table tables[] = {run_tables[0], GEN_OPTS_TABLE};
    int nrc = cli_opts_normalize("run", tables, 2, &argc, &argv);
    if (nrc > 0) run_usage(stdout);
    if (nrc) return nrc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage(stdout);
            return 1;
        }
        if (run_flag(a, o)) continue;
        if (a[0] != '-') {
            fprintf(stderr, "clover run: unexpected argument '%s' (clover run --help)\n", a);
            return -1;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "clover run: %s needs a value (clover run --help)\n", a);
            return -1;
        }
        i++;
        int rc = run_valued(a, v, o);
        if (rc == 1) fprintf(stderr, "clover run: unknown option '%s' (clover run --help)\n", a);
        if (rc) return -1;
    }
    if ((o->ids != NULL) + (o->prompt != NULL) + (o->file != NULL) > 1) {
        fprintf(stderr, "clover run: give the prompt once: -p TEXT, -f FILE or --ids LIST\n");
        return -1;
    }
    if (o->prompt && !o->prompt[0]) {
        fprintf(stderr, "clover run: the prompt is empty (-p \"\")\n");
        return -1;
    }
    if (o->system && o->raw) {
        fprintf(stderr, "clover run: --system needs the chat template (not --raw)\n");
        return -1;
    }
    gen_opts_finish(&o->g);
    return gen_opts_check_outputs(&o->g, "run", o->model, o->file);
}

/* The prompt text: -p, or stdin when it is not a terminal. 0, 1 when there
 * is none, -1 after an error. */
static int run_prompt_text(const run_options *o, char **owned, const char **text, size_t *len) {
    *owned = NULL;
    if (o->prompt) {
        *text = o->prompt;
        *len = strlen(o->prompt);
        return 0;
    }
    if (o->file) {
        if (cli_read_file("run", o->file, owned, len)) return -1;
        *text = *owned;
        if (!*len) fprintf(stderr, "clover run: %s is empty\n", o->file);
        return *len ? 0 : -2;
    }
    if (isatty(STDIN_FILENO)) return 1;
    if (cli_read_stdin("run", owned, len)) return -1;
    *text = *owned;
    return *len ? 0 : 1;
}

int cmd_run(int argc, char **argv) {
    run_options o;
    memset(&o, 0, sizeof o);
    int prc = run_parse(argc, argv, &o);
    if (prc) {
        run_options_free(&o);
        return prc > 0 ? 0 : 2;
    }
    char *stdin_text = NULL;
    run_text_request t = {.system = o.system, .chat = !o.raw, .thinking = !o.no_think, .json = o.json,
                          .visual = !o.no_visual, .chunk = (size_t)o.g.batch_size};
    if (!o.ids) {
        int trc = run_prompt_text(&o, &stdin_text, &t.prompt, &t.prompt_len);
        if (trc) {
            if (trc > 0) fprintf(stderr, "clover run: no prompt (-p TEXT, text on stdin, or --ids 1,2,3)\n");
            run_options_free(&o);
            free(stdin_text);
            return trc > 0 ? 2 : 1;
        }
    }
    clover_model *m = NULL;
    clover_session *s = NULL;
    clover_generate_result r;
    memset(&r, 0, sizeof r);
    clover_error err = {0};
    int code = 1;
    if (cli_load_model("run", o.model, &m)) goto done;
    if ((code = gen_opts_bind(&o.g, "run", m)) != 0) goto done;
    code = 1;
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = (size_t)o.g.threads;
    sp.device = o.g.device;
    sp.gpu_layers = (uint32_t)o.g.gpu_layers;
    sp.gpu_mem = o.g.gpu_mem;
    sp.max_context = (size_t)o.g.max_context;
    sp.max_rows = (size_t)o.g.batch_size;
    sp.no_snapshot = 1; /* one request per process: a prompt snapshot would never be reused */
    if (clover_session_create(&s, m, &sp, &err)) {
        fprintf(stderr, "clover run: %s\n", err.message);
        goto done;
    }
    if (!o.ids) {
        code = run_text(m, s, &t, &o.g.p);
        goto done;
    }
    cli_cancel_install(1);
    o.g.p.cancel = &cli_cancel_flag;
    if (cli_generate(s, o.ids, o.n_ids, &o.g.p, (size_t)o.g.batch_size, &r, &err)) {
        run_print_error("run", &err, "shorten the prompt, or raise -c/--ctx-size");
        goto done;
    }
    code = o.json ? run_print_json(&r, NULL) : (run_print_ids_and_stats(&r), 0);
    run_note_context_full("run", &r, o.g.p.max_tokens, "-c/--ctx-size gives a longer one");
    if (!code && r.finish == CLOVER_FINISH_CANCELLED) code = 130; /* Ctrl-C, as a shell counts it */
done:
    clover_generate_result_free(&r);
    clover_session_free(s);
    clover_model_free(m);
    run_options_free(&o);
    free(stdin_text);
    return code;
}
