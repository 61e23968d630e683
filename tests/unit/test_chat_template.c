/*
 * test_chat_template.c: Qwen3.5's ChatML as clover_chat_render writes it,
 * against strings written by hand from TRUNK.md section 6 and the Qwen3.5
 * template's rules (trimmed contents, reasoning only after the last real
 * user query, tool results grouped into one user turn), and against the
 * "chat" cases of tests/fixtures/tokenizer/manifest.json, which transformers'
 * apply_chat_template rendered. Also the answer split at </think> and the
 * errors. The token ids of those renderings are checked in test_text_api.c
 * (they need the model's tokenizer).
 */
#include <jansson.h>
#include <string.h>

#include "clover.h"
#include "test.h"
#include "text/chat_template.h"

typedef clover_chat_message msg;

/* Renders and compares with the expected text; 0 when equal. */
static int render_is(const msg *m, size_t n, int gen, int think, const char *expected) {
    clover_chat_options o;
    clover_chat_options_init(&o);
    o.add_generation_prompt = gen;
    o.enable_thinking = think;
    char *text = NULL;
    clover_error err = {0};
    int rc = clover_chat_render(NULL, m, n, &o, &text, &err);
    CHECK_MSG(rc == CLOVER_OK, "%s", err.message);
    int same = text && !strcmp(text, expected);
    CHECK_MSG(same, "rendered:\n[%s]\nexpected:\n[%s]", text ? text : "(null)", expected);
    clover_free(text);
    return same ? 0 : 1;
}

static void test_defaults(void) {
    clover_chat_options o;
    memset(&o, 0x55, sizeof o);
    clover_chat_options_init(&o);
    CHECK_EQ_INT(o.add_generation_prompt, 1);
    CHECK_EQ_INT(o.enable_thinking, 1);
    /* NULL options are the defaults: thinking on */
    msg m[] = {{"user", "Hi", NULL}};
    char *text = NULL;
    CHECK(clover_chat_render(NULL, m, 1, NULL, &text, NULL) == CLOVER_OK);
    CHECK(text && !strcmp(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"));
    clover_free(text);
}

static void test_system_user_thinking_on_and_off(void) {
    msg m[] = {{"system", "Be brief.", NULL}, {"user", "2+2?", NULL}};
    render_is(m, 2, 1, 1,
              "<|im_start|>system\nBe brief.<|im_end|>\n"
              "<|im_start|>user\n2+2?<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n");
    render_is(m, 2, 1, 0,
              "<|im_start|>system\nBe brief.<|im_end|>\n"
              "<|im_start|>user\n2+2?<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    render_is(m, 2, 0, 1, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n");
}

static void test_earlier_assistant_turns_lose_their_reasoning(void) {
    msg m[] = {{"user", "Name a fruit.", NULL},
               {"assistant", "<think>\neasy\n</think>\n\nA pear.", NULL},
               {"user", "Another?", NULL},
               {"assistant", "Fine.", "thinking about apples"},
               {"user", "Thanks", NULL}};
    render_is(m, 5, 1, 1,
              "<|im_start|>user\nName a fruit.<|im_end|>\n"
              "<|im_start|>assistant\nA pear.<|im_end|>\n"
              "<|im_start|>user\nAnother?<|im_end|>\n"
              "<|im_start|>assistant\nFine.<|im_end|>\n"
              "<|im_start|>user\nThanks<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n");
}

static void test_turns_after_the_last_query_keep_it(void) {
    /* reasoning split from the content */
    msg a[] = {{"user", "Q", NULL}, {"assistant", "<think>\n\nstep one\nstep two\n\n</think>\n\n\nThe answer.", NULL}};
    render_is(a, 2, 0, 1,
              "<|im_start|>user\nQ<|im_end|>\n"
              "<|im_start|>assistant\n<think>\nstep one\nstep two\n</think>\n\nThe answer.<|im_end|>\n");
    /* reasoning_content given: the content is not split */
    msg b[] = {{"user", "Q", NULL}, {"assistant", "x</think>y", " R "}};
    render_is(b, 2, 0, 1,
              "<|im_start|>user\nQ<|im_end|>\n"
              "<|im_start|>assistant\n<think>\nR\n</think>\n\nx</think>y<|im_end|>\n");
    /* no reasoning at all: an empty think block */
    msg c[] = {{"user", "Q", NULL}, {"assistant", "Plain.", NULL}};
    render_is(c, 2, 0, 1,
              "<|im_start|>user\nQ<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n\nPlain.<|im_end|>\n");
    /* several </think>: reasoning before the first, content after the last */
    msg d[] = {{"user", "Q", NULL}, {"assistant", "r1</think>mid</think>\nend", NULL}};
    render_is(d, 2, 0, 1,
              "<|im_start|>user\nQ<|im_end|>\n"
              "<|im_start|>assistant\n<think>\nr1\n</think>\n\nend<|im_end|>\n");
}

static void test_tool_results_are_one_user_turn(void) {
    msg m[] = {{"user", "Weather in Paris?", NULL},
               {"assistant", "Let me check.", NULL},
               {"tool", "sunny", NULL},
               {"tool", " 20C\n", NULL},
               {"assistant", "<think>\nok\n</think>\n\nSunny, 20C.", NULL},
               {"tool", "late", NULL}};
    render_is(m, 6, 1, 1,
              "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n\nLet me check.<|im_end|>\n"
              "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n20C\n</tool_response>"
              "<|im_end|>\n"
              "<|im_start|>assistant\n<think>\nok\n</think>\n\nSunny, 20C.<|im_end|>\n"
              "<|im_start|>user\n<tool_response>\nlate\n</tool_response><|im_end|>\n"
              "<|im_start|>assistant\n<think>\n");
}

static void test_a_tool_response_user_turn_is_not_a_query(void) {
    /* the last real query is message 0, so the assistant turn at 1 keeps its reasoning */
    msg m[] = {{"user", "Q", NULL},
               {"assistant", "<think>r</think>A", NULL},
               {"user", "<tool_response>\nx\n</tool_response>", NULL}};
    render_is(m, 3, 1, 0,
              "<|im_start|>user\nQ<|im_end|>\n"
              "<|im_start|>assistant\n<think>\nr\n</think>\n\nA<|im_end|>\n"
              "<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

static void test_contents_are_trimmed(void) {
    /* Python's str.strip(): ASCII white space, U+001C..U+001F, NBSP, ideographic space, ... */
    msg m[] = {{"system", "\n\t sys \r\n", NULL}, {"user", "\x1f\xc2\xa0\xe3\x80\x80hi there\xe2\x80\xa8 \x0b", NULL}};
    render_is(m, 2, 1, 1,
              "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi there<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n");
    /* not white space: U+200B ZERO WIDTH SPACE, and bytes that are not UTF-8 */
    msg z[] = {{"user", "\xe2\x80\x8bx\xff", NULL}};
    render_is(z, 1, 0, 1, "<|im_start|>user\n\xe2\x80\x8bx\xff<|im_end|>\n");
    /* NULL content is empty */
    msg e[] = {{"user", NULL, NULL}};
    render_is(e, 1, 0, 1, "<|im_start|>user\n<|im_end|>\n");
    size_t off, n;
    chat_template_trim("   ", 3, &off, &n);
    CHECK_EQ_INT(n, 0);
    chat_template_trim("a \xe3\x80\x80", 5, &off, &n);
    CHECK(off == 0 && n == 1);
}

static void expect_error(const msg *m, size_t n, const char *words) {
    char *text = (char *)"unchanged";
    clover_error err = {0};
    int rc = clover_chat_render(NULL, m, n, NULL, &text, &err);
    CHECK_EQ_INT(rc, CLOVER_E_INVALID);
    CHECK(text == NULL);
    CHECK_MSG(strstr(err.message, words) != NULL, "'%s' lacks '%s'", err.message, words);
    CHECK(strchr(err.message, '\n') == NULL);
}

static void test_errors(void) {
    msg ok[] = {{"user", "x", NULL}};
    expect_error(ok, 0, "no messages");
    msg late_system[] = {{"user", "x", NULL}, {"system", "s", NULL}};
    expect_error(late_system, 2, "message 1 is a system message");
    msg bad_role[] = {{"user", "x", NULL}, {"robot", "s", NULL}};
    expect_error(bad_role, 2, "role 'robot'");
    msg null_role[] = {{NULL, "x", NULL}};
    expect_error(null_role, 1, "(null)");
    msg no_user[] = {{"system", "s", NULL}, {"assistant", "a", NULL}};
    expect_error(no_user, 2, "no user message");
    msg only_tool_results[] = {{"user", "<tool_response>\nx\n</tool_response>", NULL}};
    expect_error(only_tool_results, 1, "no user message");
    clover_error err = {0};
    CHECK_EQ_INT(clover_chat_render(NULL, ok, 1, NULL, NULL, &err), CLOVER_E_INVALID);
}

/* ---- the fixture's chat cases (transformers' apply_chat_template) ---- */

static void test_manifest_chat_cases(void) {
    char path[1024];
    const char *rel = "tests/fixtures/tokenizer/manifest.json";
    const char *p = test_source_path(rel, path, sizeof path);
    json_error_t jerr;
    json_t *root = json_load_file(p ? p : rel, 0, &jerr);
    CHECK_MSG(root != NULL, "%s: %s (set CLOVER_SOURCE_DIR)", p ? p : rel, jerr.text);
    if (!root) return;
    json_t *cases = json_object_get(root, "chat");
    CHECK(json_array_size(cases) >= 3);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        json_t *jm = json_object_get(c, "messages");
        size_t n = json_array_size(jm);
        msg m[16];
        CHECK(n <= 16);
        if (n > 16) continue;
        for (size_t k = 0; k < n; k++) {
            json_t *e = json_array_get(jm, k);
            m[k].role = json_string_value(json_object_get(e, "role"));
            m[k].content = json_string_value(json_object_get(e, "content"));
            m[k].reasoning_content = json_string_value(json_object_get(e, "reasoning_content"));
        }
        json_t *think = json_object_get(c, "enable_thinking");
        int gen = json_is_true(json_object_get(c, "add_generation_prompt"));
        int thinking = think ? json_is_true(think) : 1;
        CHECK_MSG(render_is(m, n, gen, thinking, json_string_value(json_object_get(c, "text"))) == 0,
                  "manifest chat case %zu", i);
    }
    json_decref(root);
}

/* ---- the answer split ---- */

static void split_is(const char *answer, int thinking, const char *reasoning, const char *content, int closed) {
    clover_answer_parts parts;
    size_t len = strlen(answer);
    clover_answer_split(answer, len, thinking, &parts);
    CHECK(parts.reasoning_off + parts.reasoning_len <= len && parts.content_off + parts.content_len <= len);
    CHECK_MSG(parts.reasoning_len == strlen(reasoning) && !memcmp(answer + parts.reasoning_off, reasoning,
                                                                  parts.reasoning_len),
              "answer [%s]: reasoning [%.*s], expected [%s]", answer, (int)parts.reasoning_len,
              answer + parts.reasoning_off, reasoning);
    CHECK_MSG(parts.content_len == strlen(content) && !memcmp(answer + parts.content_off, content, parts.content_len),
              "answer [%s]: content [%.*s], expected [%s]", answer, (int)parts.content_len,
              answer + parts.content_off, content);
    CHECK_EQ_INT(parts.think_closed, closed);
}

static void test_answer_split(void) {
    split_is("I should add.\n</think>\n\n4", 1, "I should add.", "4", 1);
    split_is("\n\nr\n\n</think>c\n", 1, "r", "c\n", 1);
    split_is("a</think>b</think>c", 1, "a", "b</think>c", 1); /* at the first */
    split_is("<think>\nagain\n</think>\n\nx", 1, "again", "x", 1);
    split_is("still thinking\n", 1, "still thinking", "", 0);
    split_is("all content\n", 0, "", "all content\n", 0);
    split_is("r</think>c", 0, "r", "c", 1); /* a closed think block splits either way */
    split_is("", 1, "", "", 0);
    split_is("</think>", 1, "", "", 1);
    clover_answer_parts parts;
    clover_answer_split(NULL, 5, 1, &parts);
    CHECK(parts.reasoning_len == 0 && parts.content_len == 0 && !parts.think_closed);
    clover_answer_split("x", 1, 1, NULL); /* no crash */
}

int main(void) {
    RUN(test_defaults);
    RUN(test_system_user_thinking_on_and_off);
    RUN(test_earlier_assistant_turns_lose_their_reasoning);
    RUN(test_turns_after_the_last_query_keep_it);
    RUN(test_tool_results_are_one_user_turn);
    RUN(test_a_tool_response_user_turn_is_not_a_query);
    RUN(test_contents_are_trimmed);
    RUN(test_errors);
    RUN(test_manifest_chat_cases);
    RUN(test_answer_split);
    return TEST_EXIT();
}
