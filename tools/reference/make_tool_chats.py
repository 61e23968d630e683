"""make_tool_chats.py: the expected renderings of conversations with tools,
written by transformers' apply_chat_template with Qwen3's real chat template
(/work/shared/data/qwen3-tokenizer/tokenizer_config.json: the <tool_call>
JSON convention), into tests/fixtures/tool_chat/cases.json.

clover's template is Qwen3.5's for everything else (trimmed contents, a
think block on every assistant turn after the last query, "<think>\\n" as the
thinking generation prompt), so the cases keep to conversations on which the
two templates agree: contents without surrounding white space, thinking off
in the generation prompt, reasoning given on assistant turns after the last
query. Numbers in the tools are integers (Python and jansson print reals
differently). Run with the system python3 (transformers):

    python3 tools/reference/make_tool_chats.py [SHARED_DIR]
"""
import json
import os
import sys

from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city, now.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "a city's name, as \"Paris\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
CLOCK = {"type": "function", "function": {
    "name": "local_time", "description": "L'heure locale — 24 h, « hh:mm »",
    "parameters": {"type": "object", "properties": {
        "zone": {"type": "string"}, "offset": {"type": "integer", "minimum": -12, "maximum": 14},
        "dst": {"type": "boolean"}}, "required": []}}}


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


CASES = [
    {"name": "tools_with_system", "tools": [WEATHER, CLOCK],
     "messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Weather in Paris?"}]},
    {"name": "tools_without_system", "tools": [WEATHER],
     "messages": [{"role": "user", "content": "Weather in Paris?"}]},
    {"name": "round_trip", "tools": [WEATHER],
     "messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "", "reasoning_content": "I should ask the tool.",
                   "tool_calls": [call("call_1", "get_weather", "{\"city\": \"Paris\"}")]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "{\"sky\": \"sunny\", \"c\": 21}"}]},
    {"name": "two_calls_earlier_turn", "tools": [WEATHER, CLOCK],
     "messages": [{"role": "system", "content": "You help."},
                  {"role": "user", "content": "Weather and time in Oslo?"},
                  {"role": "assistant", "content": "Checking both.",
                   "tool_calls": [call("a", "get_weather", "{\"city\": \"Oslo\", \"unit\": \"celsius\"}"),
                                  call("b", "local_time", "{\"zone\": \"Europe/Oslo\"}")]},
                  {"role": "tool", "tool_call_id": "a", "content": "rain, 9 C"},
                  {"role": "tool", "tool_call_id": "b", "content": "14:05"},
                  {"role": "assistant", "content": "Rain, 9 C; it is 14:05."},
                  {"role": "user", "content": "Thanks! And Rome?"}]},
    {"name": "call_after_reasoning_with_content", "tools": [CLOCK],
     "messages": [{"role": "user", "content": "Time?"},
                  {"role": "assistant", "content": "One moment.", "reasoning_content": "Use local_time.",
                   "tool_calls": [call("c", "local_time", "{}")]},
                  {"role": "tool", "tool_call_id": "c", "content": "09:00"}]},
]


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "..", "shared")
    tok = AutoTokenizer.from_pretrained(os.path.join(shared, "data", "qwen3-tokenizer"))
    out = []
    for c in CASES:
        text = tok.apply_chat_template(c["messages"], tools=c["tools"], tokenize=False, add_generation_prompt=True,
                                       enable_thinking=False)
        out.append({**c, "text": text})
    path = os.path.join(REPO, "tests", "fixtures", "tool_chat", "cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"format": 1, "description": "Qwen3's chat template (transformers' apply_chat_template, "
                   "enable_thinking=False) on conversations with tools: tools/reference/make_tool_chats.py",
                   "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(out)} cases -> {path}")


if __name__ == "__main__":
    main()
