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
#include "gen_opts.h"
#include "prompt_text.h"
#include "run_report.h"
#include "run_text.h"

static void run_usage(FILE *out) {
    fprintf(out, "usage: clover run [-m MODEL] [-p PROMPT | --ids 1,2,3] [options]\n"
                 "\n"
                 "Generates an answer. A Clover model runs block diffusion (the record's\n"
                 "LowConfidence loop); a model without the record, or --ar, decodes token by token.\n"
                 "The prompt is text (-p, or stdin when -p is absent and stdin is not a terminal),\n"
                 "by default one user message in the model's chat template; the answer is printed\n"
                 "as it is generated and a summary follows on stderr. On a terminal each block is\n"
                 "drawn while it is denoised: masked rows as a dim shade, fixed rows coloured by\n"
                 "confidence (green sure, red unsure). With --ids the prompt is token ids, and the\n"
                 "generated ids and every statistic are printed instead.\n"
                 "\n"
                 "prompt:\n"
                 "  -m, --model FILE            GGUF model (default: the model built into this binary)\n"
                 "  -p, --prompt TEXT           the prompt text\n"
                 "  --chat                      the prompt is a user message in the chat template (default)\n"
                 "  --raw                       the prompt is plain text, tokenized as it is (special\n"
                 "                              tokens written in it, like <|im_start|>, are matched)\n"
                 "  --system TEXT               chat: a system message before the prompt\n"
                 "  --think, --no-think         chat: the answer opens a think block (default), or an\n"
                 "                              empty one (no reasoning)\n"
                 "  --ids LIST                  the prompt as comma-separated token ids\n"
                 "generation:\n"
                 "%s"
                 "output:\n"
                 "  --json                      print one JSON object with every field (with text: also\n"
                 "                              the text, the prompt ids, and in chat mode the answer\n"
                 "                              split into reasoning and content)\n"
                 "  --no-visual                 no block display on a terminal, only the text\n"
                 "  -h, --help                  this text\n"
                 "\n"
                 "Ctrl-C stops the answer (a second one ends clover).\n"
                 "Exit codes: 0 done, 1 the model or the request failed (one error line), 2 usage.\n",
            GEN_OPTS_HELP);
}

typedef struct run_options {
    const char *model, *prompt, *system;
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
    if (o->ids && o->prompt) {
        fprintf(stderr, "clover run: give the prompt once: -p TEXT or --ids LIST\n");
        return -1;
    }
    if (o->system && o->raw) {
        fprintf(stderr, "clover run: --system needs the chat template (not --raw)\n");
        return -1;
    }
    gen_opts_finish(&o->g);
    return 0;
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
                          .visual = !o.no_visual};
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
    gen_opts_bind(&o.g, m);
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = (size_t)o.g.threads;
    sp.device = o.g.device;
    sp.gpu_layers = (uint32_t)o.g.gpu_layers;
    sp.max_context = (size_t)o.g.max_context;
    sp.no_snapshot = 1; /* one request per process: a prompt snapshot would never be reused */
    if (clover_session_create(&s, m, &sp, &err)) {
        fprintf(stderr, "clover run: %s\n", err.message);
        goto done;
    }
    if (!o.ids) {
        code = run_text(m, s, &t, &o.g.p);
        goto done;
    }
    if (clover_generate(s, o.ids, o.n_ids, &o.g.p, &r, &err)) {
        fprintf(stderr, "clover run: %s\n", err.message);
        goto done;
    }
    code = o.json ? run_print_json(&r, NULL) : (run_print_ids_and_stats(&r), 0);
done:
    clover_generate_result_free(&r);
    clover_session_free(s);
    clover_model_free(m);
    run_options_free(&o);
    free(stdin_text);
    return code;
}
