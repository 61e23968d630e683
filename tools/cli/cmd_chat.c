/*
 * cmd_chat.c: `clover chat`: a conversation, one line per user turn, on
 * one session, so each turn commits only what is new (chat_conv.h says
 * how the prompt is kept an extension of the committed ids). Lines that
 * start with '/' are commands. Ctrl-C stops the answer being generated and
 * returns to the prompt; Ctrl-D (end of input) or /quit leaves.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "answer_out.h"
#include "chat_conv.h"
#include "chat_input.h"
#include "cli_args.h"
#include "cli_cancel.h"
#include "commands.h"
#include "gen_opts.h"
#include "run_report.h"

static const cli_opt chat_table[] = {
    {"--model", "-m", CLI_STR, 0, 0, "FILE", "GGUF model (default: the model built into this binary)"},
    {"--system", NULL, CLI_STR, 0, 0, "TEXT", "a system message at the start of the conversation"},
    {"--think", NULL, CLI_FLAG, 0, 0, NULL, "thinking on at the start (default)"},
    {"--no-think", NULL, CLI_FLAG, 0, 0, NULL, "thinking off at the start"},
    {"--no-visual", NULL, CLI_FLAG, 0, 0, NULL, "no block display, only the text"},
};
static const cli_opt_table chat_tables[] = {{chat_table, sizeof chat_table / sizeof chat_table[0]}};

static void chat_usage(FILE *out) {
    fprintf(out, "usage: clover chat [-m MODEL] [options]\n"
                 "\n"
                 "An interactive conversation in the model's chat template. Each line is a user\n"
                 "turn; the answer is printed as it is generated (on a terminal with the block\n"
                 "display of clover run). The session keeps what it has committed, so a turn only\n"
                 "commits the end of the last answer and the new message (see /stats).\n"
                 "\n"
                 "commands:\n"
                 "  /reset                      forget the conversation\n"
                 "  /think on|off               open answers with a think block, or an empty one\n"
                 "  /stats                      the last turn's statistics: prompt tokens reused from\n"
                 "                              the session and committed, passes per block, speed\n"
                 "  /help                       the commands\n"
                 "  /quit                       leave (so does Ctrl-D)\n"
                 "Ctrl-C stops an answer and returns to the prompt.\n"
                 "\n"
                 "options:\n");
    cli_opts_print(out, &chat_tables[0]);
    cli_opts_print(out, &GEN_OPTS_TABLE);
    fprintf(out, "  -h, --help                  this text\n"
                 "\n"
                 "Exit codes: 0 done, 1 the model failed to load (one error line), 2 usage.\n");
}

typedef struct chat_options {
    const char *model, *system;
    int no_think, no_visual;
    gen_opts g;
} chat_options;

/* 0 ok, 1 --help shown, -1 usage error (reported). */
static int chat_parse(int argc, char **argv, chat_options *o) {
    gen_opts_init(&o->g);
    cli_opt_table tables[] = {chat_tables[0], GEN_OPTS_TABLE};
    int nrc = cli_opts_normalize("chat", tables, 2, &argc, &argv);
    if (nrc > 0) chat_usage(stdout);
    if (nrc) return nrc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--think") || !strcmp(a, "--no-think")) {
            o->no_think = !strcmp(a, "--no-think");
            continue;
        }
        if (!strcmp(a, "--no-visual")) {
            o->no_visual = 1;
            continue;
        }
        if (gen_opts_flag(&o->g, a)) continue;
        if (a[0] != '-') {
            fprintf(stderr, "clover chat: unexpected argument '%s' (clover chat --help)\n", a);
            return -1;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "clover chat: %s needs a value (clover chat --help)\n", a);
            return -1;
        }
        i++;
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--system")) o->system = v;
        else rc = gen_opts_valued(&o->g, "chat", a, v);
        if (rc == 1) fprintf(stderr, "clover chat: unknown option '%s' (clover chat --help)\n", a);
        if (rc) return -1;
    }
    gen_opts_finish(&o->g);
    return gen_opts_check_outputs(&o->g, "chat", o->model, NULL);
}

/* The conversation and what /stats reports. */
typedef struct chat {
    const clover_model *m;
    clover_session *s;
    chat_conv conv;
    gen_opts *g;
    int thinking, terminal, visual;
    /* the last turn */
    int have_last;
    clover_generate_result last;
    size_t committed_before; /* the session's committed length when it started */
    /* the conversation's totals */
    size_t answers, prompt_tokens, reused_tokens, generated_tokens;
} chat;

static void chat_print_stats(const chat *c) {
    if (!c->have_last) {
        printf("no answer yet\n");
        return;
    }
    const clover_generate_result *r = &c->last;
    const clover_generate_stats *s = &r->stats;
    printf("last turn    prompt %zu tokens: %zu reused from the session (it held %zu), %zu committed now\n",
           r->n_prompt, s->reused_tokens, c->committed_before, r->n_prompt - s->reused_tokens);
    printf("             answer %zu tokens (%s), mode %s", r->n_generated, clover_finish_name(r->finish),
           run_mode_name(r->mode));
    if (r->mode == CLOVER_MODE_DIFFUSION) {
        printf(", %zu block%s, passes per block", r->n_blocks, r->n_blocks == 1 ? "" : "s");
        for (size_t i = 0; i < r->n_blocks; i++) printf(" %u", r->passes_per_block[i]);
    }
    printf("\n             %.1f tok/s (prompt %.3f s, total %.3f s)\n", s->gen_tok_s, s->prompt_s, s->total_s);
    printf("session      %zu tokens committed; the conversation is %zu tokens over %zu turn%s\n",
           clover_session_length(c->s), c->conv.n, c->conv.turns, c->conv.turns == 1 ? "" : "s");
    printf("totals       %zu answer%s, %zu tokens generated; prompts %zu tokens, %zu of them reused\n", c->answers,
           c->answers == 1 ? "" : "s", c->generated_tokens, c->prompt_tokens, c->reused_tokens);
}

/* One user turn: the prompt, the streamed answer, the conversation grown. */
static void chat_turn(chat *c, const char *line) {
    clover_error err = {0};
    size_t before = c->conv.n, turns = c->conv.turns;
    if (chat_conv_add_user(&c->conv, line, c->thinking, &err)) {
        fprintf(stderr, "clover chat: %s\n", err.message);
        c->conv.n = before;
        c->conv.turns = turns;
        return;
    }
    answer_out out;
    if (answer_out_init(&out, c->m, stdout, c->terminal, c->visual, c->thinking, c->g->p.skip_special, &err)) {
        fprintf(stderr, "clover chat: %s\n", err.message);
        c->conv.n = before;
        c->conv.turns = turns;
        return;
    }
    clover_generate_params p = c->g->p;
    answer_out_attach(&out, &p);
    cli_cancel_flag = 0;
    p.cancel = &cli_cancel_flag;
    size_t committed = clover_session_length(c->s);
    clover_generate_result r;
    int rc = clover_generate(c->s, c->conv.ids, c->conv.n, &p, &r, &err);
    answer_out_finish(&out);
    answer_out_free(&out);
    if (rc) {
        run_print_error("chat", &err, "the conversation fills the context: /reset starts a new one");
        c->conv.n = before; /* as if the turn had not been asked */
        c->conv.turns = turns;
        return;
    }
    if (r.finish == CLOVER_FINISH_CANCELLED) fprintf(stderr, "[cancelled]\n");
    run_note_context_full("chat", &r, p.max_tokens, "/reset starts a new conversation");
    if (chat_conv_add_answer(&c->conv, r.ids, r.n_generated, r.finish == CLOVER_FINISH_STOP, &err))
        fprintf(stderr, "clover chat: %s\n", err.message);
    cli_cancel_flag = 0;
    clover_generate_result_free(&c->last);
    c->last = r;
    c->have_last = 1;
    c->committed_before = committed;
    c->answers++;
    c->prompt_tokens += r.n_prompt;
    c->reused_tokens += r.stats.reused_tokens;
    c->generated_tokens += r.n_generated;
}

/* A '/' command; 1 when it asks to leave. */
static int chat_command(chat *c, const char *line) {
    char word[32] = "", arg[32] = "";
    sscanf(line, "%31s %31s", word, arg);
    if (!strcmp(word, "/quit") || !strcmp(word, "/exit")) return 1;
    if (!strcmp(word, "/reset")) {
        chat_conv_reset(&c->conv);
        clover_session_reset(c->s);
        printf("conversation cleared\n");
    } else if (!strcmp(word, "/think")) {
        if (!strcmp(arg, "on")) c->thinking = 1;
        else if (!strcmp(arg, "off")) c->thinking = 0;
        else if (arg[0]) printf("/think on or /think off\n");
        printf("thinking %s\n", c->thinking ? "on" : "off");
    } else if (!strcmp(word, "/stats")) {
        chat_print_stats(c);
    } else if (!strcmp(word, "/help")) {
        printf("/reset  /think on|off  /stats  /help  /quit   (Ctrl-C stops an answer, Ctrl-D leaves)\n");
    } else {
        printf("unknown command %s (/help lists them)\n", word);
    }
    fflush(stdout);
    return 0;
}

/* The conversation loop; returns when the input ends or /quit. */
static void chat_loop(chat *c) {
    chat_input *in = chat_input_open(isatty(STDIN_FILENO), c->terminal && !cli_term_plain());
    if (!in) {
        fprintf(stderr, "clover chat: out of memory\n");
        return;
    }
    for (;;) {
        const char *line = NULL;
        int rc = chat_input_read(in, &line);
        if (rc < 0) continue; /* Ctrl-C at the prompt */
        if (rc == 0) break;
        if (!line[0]) continue;
        chat_input_remember(in, line);
        if (line[0] == '/') {
            if (chat_command(c, line)) break;
            continue;
        }
        chat_turn(c, line);
    }
    chat_input_close(in);
}

int cmd_chat(int argc, char **argv) {
    chat_options o;
    memset(&o, 0, sizeof o);
    int prc = chat_parse(argc, argv, &o);
    if (prc) {
        gen_opts_free(&o.g);
        return prc > 0 ? 0 : 2;
    }
    clover_model *m = NULL;
    chat c;
    memset(&c, 0, sizeof c);
    clover_error err = {0};
    int code = 1;
    if (cli_load_model("chat", o.model, &m)) goto done;
    if ((code = gen_opts_bind(&o.g, "chat", m)) != 0) goto done;
    code = 1;
    int32_t *probe = NULL;
    size_t n_probe = 0;
    if (clover_tokenize(m, "", 0, 0, &probe, &n_probe, &err)) { /* chat needs the model's tokenizer */
        fprintf(stderr, "clover chat: %s\n", err.message);
        goto done;
    }
    clover_free(probe);
    clover_session_params sp;
    clover_session_params_init(&sp);
    sp.n_threads = (size_t)o.g.threads;
    sp.device = o.g.device;
    sp.gpu_mem = o.g.gpu_mem;
    sp.max_context = (size_t)o.g.max_context;
    sp.max_rows = (size_t)o.g.batch_size;
    if (clover_session_create(&c.s, m, &sp, &err)) {
        fprintf(stderr, "clover chat: %s\n", err.message);
        goto done;
    }
    c.m = m;
    c.g = &o.g;
    c.thinking = !o.no_think;
    c.terminal = isatty(STDOUT_FILENO);
    c.visual = !o.no_visual;
    chat_conv_init(&c.conv, m, o.system);
    if (isatty(STDIN_FILENO)) {
        clover_model_info info;
        clover_model_get_info(m, &info);
        printf("clover chat: %s (%s), thinking %s. /help for commands; Ctrl-C stops an answer, Ctrl-D leaves.\n",
               info.name ? info.name : info.source, info.record ? "block diffusion" : "autoregressive",
               c.thinking ? "on" : "off");
    }
    cli_cancel_install(0);
    chat_loop(&c);
    code = 0;
done:
    chat_conv_free(&c.conv);
    clover_generate_result_free(&c.last);
    clover_session_free(c.s);
    clover_model_free(m);
    gen_opts_free(&o.g);
    return code;
}
