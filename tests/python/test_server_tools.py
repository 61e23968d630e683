"""Tool calls through `clover serve` with the official `openai` client, on the
tiny Clover fixture model (random weights: it was never trained on tools).

The well-formed round trips (call -> tool result -> answer, plain and
streamed) need a model that writes a call, so that server runs with
--test-script: the engine runs as always, but each emitted id is replaced
by the next id of a scripted answer, so the whole text path (think split,
tool-call parser, streaming deltas, finish reason) runs on known text. The
forced tool_choice test runs on the real model without a script. Expected
values: the calls and contents are written here by hand; the prompts the
server renders are checked through their token counts, against Qwen3.5's
XML-function template written out here by hand from TRUNK.md 6 (the exact
Qwen3.5 chat_template.jinja was not available; the instruction text is that
of third-party copies of Qwen3.5's / 3.6's) and Hugging Face `tokenizers` on
the fixture's tokenizer.json (the template is checked byte for byte in
test_server_tools.c against hand-written prompts)."""

import json

import openai
import pytest
from tokenizers import Tokenizer

import test_server_process as ss

MODEL_ID = "tiny_clover"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
BROKEN = "See: <tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>"
SCRIPT = [
    "I should ask.\n</think>\n\n" + CALL,            # 1: the call (plain)
    "Done.\n</think>\n\nIt is sunny in Paris.",        # 2: the answer (plain)
    "I should ask.\n</think>\n\n" + CALL,            # 3: the call (streamed)
    "Done.\n</think>\n\nIt is sunny in Paris.",        # 4: the answer (streamed)
    "Hm.\n</think>\n\n" + BROKEN,                   # 5: no </parameter> (plain)
    "Hm.\n</think>\n\n" + BROKEN,                   # 6: the same, streamed
]
MALFORMED_CONTENT = BROKEN


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture("tiny_clover", tmp_path_factory.mktemp("model") / f"{MODEL_ID}.gguf")


def client_of(srv):
    return openai.OpenAI(base_url=srv.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def scripted(model, tmp_path_factory):
    d = tmp_path_factory.mktemp("scripted")
    (d / "script.txt").write_text("\x1e".join(SCRIPT))
    srv = ss.start_server(model, d / "serve.log", "--test-script", d / "script.txt", "--max-batch", 1)
    try:
        yield srv
    finally:
        ss.stop_server(srv)


@pytest.fixture(scope="module")
def plain(model, tmp_path_factory):
    d = tmp_path_factory.mktemp("plain")
    srv = ss.start_server(model, d / "serve.log")
    try:
        yield srv
    finally:
        ss.stop_server(srv)


@pytest.fixture(scope="module")
def hf_tok():
    return Tokenizer.from_file(str(ss.FIXTURES / "tiny_clover" / "hf" / "tokenizer.json"))


INSTRUCTIONS = (
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested "
    "within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function call, "
    "but NOT after\n"
    "- If there is no function call available, answer the question like normal with your current knowledge and "
    "do not tell the user about function calls\n</IMPORTANT>")


def tools_block(tools):
    """Qwen3.5's tools system block, no system message (TRUNK.md 6; tojson is Python's json.dumps)."""
    return ("<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>"
            + "".join("\n" + json.dumps(t) for t in tools) + "\n</tools>" + INSTRUCTIONS + "<|im_end|>\n")


def count(tok, text):
    return len(tok.encode(text, add_special_tokens=False).ids)


def clover(obj):
    return (obj.model_extra or {}).get("clover")


def stream_answer(client, **kw):
    """Concatenated content / reasoning deltas, the tool calls assembled from their deltas, the finish reason."""
    content, reasoning, calls, finish = "", "", {}, None
    for ch in client.chat.completions.create(stream=True, **kw):
        if not ch.choices:
            continue
        c = ch.choices[0]
        d = c.delta
        content += d.content or ""
        reasoning += (d.model_extra or {}).get("reasoning_content") or ""
        for tc in d.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] += tc.id or ""
            slot["name"] += (tc.function.name or "") if tc.function else ""
            slot["arguments"] += (tc.function.arguments or "") if tc.function else ""
        finish = c.finish_reason or finish
    return content, reasoning, [calls[k] for k in sorted(calls)], finish


def test_round_trip_plain_and_streamed(scripted, hf_tok):
    client = client_of(scripted)
    user = [{"role": "user", "content": "Weather in Paris?"}]
    # 1: the call
    r1 = client.chat.completions.create(model=MODEL_ID, messages=user, tools=[WEATHER])
    ch = r1.choices[0]
    assert ch.finish_reason == "tool_calls"
    assert ch.message.content is None
    assert (ch.message.model_extra or {}).get("reasoning_content") == "I should ask."
    assert len(ch.message.tool_calls) == 1
    tc = ch.message.tool_calls[0]
    assert tc.type == "function" and tc.function.name == "get_weather" and tc.id.startswith("call_")
    assert json.loads(tc.function.arguments) == {"city": "Paris"}
    assert tc.function.arguments == '{"city": "Paris"}'  # the parameters as a JSON object (json.dumps' form)
    assert r1.usage.prompt_tokens == count(hf_tok, tools_block([WEATHER]) + "<|im_start|>user\nWeather in Paris?"
                                           "<|im_end|>\n<|im_start|>assistant\n<think>\n")
    # 2: the tool's result, then the answer
    history = user + [{"role": "assistant", "content": None, "tool_calls": [tc.model_dump(exclude_none=True)]},
                      {"role": "tool", "tool_call_id": tc.id, "content": "sunny, 21 C"}]
    r2 = client.chat.completions.create(model=MODEL_ID, messages=history, tools=[WEATHER])
    assert r2.choices[0].finish_reason == "stop"
    assert r2.choices[0].message.content == "It is sunny in Paris."
    assert not r2.choices[0].message.tool_calls
    expected_prompt = (tools_block([WEATHER]) + "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                       "<|im_start|>assistant\n<think>\n\n</think>\n\n" + CALL + "<|im_end|>\n"
                       "<|im_start|>user\n<tool_response>\nsunny, 21 C\n</tool_response><|im_end|>\n"
                       "<|im_start|>assistant\n<think>\n")
    assert r2.usage.prompt_tokens == count(hf_tok, expected_prompt)
    # 3, 4: the same round trip streamed gives the same answers
    content, reasoning, calls, finish = stream_answer(client, model=MODEL_ID, messages=user, tools=[WEATHER])
    assert finish == "tool_calls" and content == "" and reasoning == "I should ask."
    assert [(c["name"], c["arguments"]) for c in calls] == [("get_weather", '{"city": "Paris"}')]
    assert calls[0]["id"].startswith("call_")
    history[1]["tool_calls"][0]["id"] = calls[0]["id"]
    history[2]["tool_call_id"] = calls[0]["id"]
    content, reasoning, calls, finish = stream_answer(client, model=MODEL_ID, messages=history, tools=[WEATHER])
    assert (content, finish, calls) == ("It is sunny in Paris.", "stop", [])


def test_malformed_call_is_content(scripted):
    client = client_of(scripted)
    kw = dict(model=MODEL_ID, messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER])
    r = client.chat.completions.create(**kw)
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == MALFORMED_CONTENT
    assert not r.choices[0].message.tool_calls
    content, _, calls, finish = stream_answer(client, **kw)
    assert (content, calls, finish) == (MALFORMED_CONTENT, [], "stop")


@pytest.mark.parametrize("choice, opening", [
    ({"type": "function", "function": {"name": "get_weather"}}, "<tool_call>\n<function=get_weather>\n"),
    ("required", "<tool_call>\n<function="),
])
def test_forced_call_opening(plain, hf_tok, choice, opening):
    """The real (random) model continues a forced opening: the prompt ends with it (thinking closed), and the
    answer is either a well-formed call of a declared tool or content that starts with the opening."""
    client = client_of(plain)
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    for stream in (False, True):
        kw = dict(model=MODEL_ID, messages=msgs, tools=[WEATHER], tool_choice=choice, max_tokens=8)
        if stream:
            content, reasoning, calls, finish = stream_answer(client, **kw)
        else:
            r = client.chat.completions.create(**kw)
            m = r.choices[0].message
            content, finish = m.content, r.choices[0].finish_reason
            calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in m.tool_calls or []]
            assert "reasoning_content" not in (m.model_extra or {})
            assert r.usage.prompt_tokens == count(hf_tok, tools_block([WEATHER]) + "<|im_start|>user\nWeather in "
                                                  "Paris?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                                                  + opening)
        if finish == "tool_calls":
            assert [c["name"] for c in calls] == ["get_weather"]
        else:
            assert content.startswith(opening) and not calls


def test_tool_choice_none_renders_tools(plain, hf_tok):
    client = client_of(plain)
    r = client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}], tools=[WEATHER],
                                       tool_choice="none", max_tokens=4)
    assert r.choices[0].finish_reason in ("stop", "length") and not r.choices[0].message.tool_calls
    assert r.usage.prompt_tokens == count(hf_tok, tools_block([WEATHER]) + "<|im_start|>user\nHi<|im_end|>\n"
                                          "<|im_start|>assistant\n<think>\n")


def test_bad_tools_schema_is_400(plain):
    client = client_of(plain)
    bad = {"type": "function", "function": {"name": "has space", "parameters": {}}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Hi"}], tools=[bad])
    assert e.value.status_code == 400
    assert e.value.body["param"] == "tools[0].function.name"
