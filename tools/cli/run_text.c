/*
 * run_text.c: see run_text.h. Ctrl-C stops the answer (the engine checks
 * the flag before every pass) and still prints what was generated and the
 * summary; a second Ctrl-C ends clover.
 */
#include "run_text.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "answer_out.h"
#include "cli_cancel.h"
#include "prefill.h"
#include "prompt_text.h"
#include "run_report.h"

static int prompt_ids(const clover_model *m, const run_text_request *t, int32_t **ids, size_t *n, clover_error *err) {
    if (!t->chat) return clover_tokenize(m, t->prompt, t->prompt_len, 1, ids, n, err);
    if (memchr(t->prompt, '\0', t->prompt_len)) {
        /* the template works on C strings */
        *ids = NULL;
        *n = 0;
        snprintf(err->message, sizeof err->message, "the prompt holds a NUL byte; use --raw for such text");
        return err->code = CLOVER_E_INVALID;
    }
    clover_chat_message msgs[2];
    size_t k = 0;
    if (t->system) msgs[k++] = (clover_chat_message){"system", t->system, NULL};
    msgs[k++] = (clover_chat_message){"user", t->prompt, NULL};
    return cli_chat_prompt(m, msgs, k, t->thinking, ids, n, err);
}

int run_text(const clover_model *m, clover_session *s, const run_text_request *t, clover_generate_params *p) {
    clover_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    if (prompt_ids(m, t, &ids, &n, &err)) {
        fprintf(stderr, "clover run: %s\n", err.message);
        return 1;
    }
    answer_out out;
    memset(&out, 0, sizeof out);
    int terminal = isatty(STDOUT_FILENO);
    if (!t->json) {
        int reasoning = t->chat && t->thinking;
        if (answer_out_init(&out, m, stdout, terminal, t->visual, reasoning, p->skip_special, &err)) {
            fprintf(stderr, "clover run: %s\n", err.message);
            clover_free(ids);
            return 1;
        }
        answer_out_attach(&out, p);
    }
    cli_cancel_install(1);
    p->cancel = &cli_cancel_flag;
    clover_generate_result r;
    int rc = cli_generate(s, ids, n, p, t->chunk, &r, &err);
    int code = 0;
    if (!t->json) answer_out_finish(&out);
    if (rc) {
        run_print_error("run", &err, "shorten the prompt, or raise -c/--ctx-size");
        code = 1;
    } else if (t->json) {
        run_text_info info = {.prompt_ids = ids, .n_prompt = n, .chat = t->chat, .thinking = t->chat && t->thinking};
        code = run_print_json(&r, &info);
        run_note_context_full("run", &r, p->max_tokens, "-c/--ctx-size gives a longer one");
    } else {
        run_print_summary(stderr, &r);
        run_note_context_full("run", &r, p->max_tokens, "-c/--ctx-size gives a longer one");
    }
    if (!rc && r.finish == CLOVER_FINISH_CANCELLED) code = 130; /* Ctrl-C, as a shell counts it */
    clover_generate_result_free(&r); /* also after a failure (then empty) */
    answer_out_free(&out);
    clover_free(ids);
    return code;
}
