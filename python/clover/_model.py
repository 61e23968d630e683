"""_model: clover.Model and clover.Session, a thin layer over _lib.

A Model owns the loaded weights (clover_model) and one default Session; a
Session owns one clover_session: the committed ids and the backend state for
them, so a request whose prompt extends what the session holds commits only
the new tail (prefix reuse: a multi-turn chat pays only for the new turn).

generate() is one clover_generate call (ctypes drops the GIL for its length).
stream() steps a clover_request pass by pass and yields the text the engine
emitted in between, so a consumer that stops iterating cancels the request.
Both decode with the engine's own text rules (result text / incremental text
stream, the same skip_special), which is why "".join(stream()) ==
generate() for the same seed; test_python_api.py checks it.
"""
from __future__ import annotations

import ctypes
import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _lib as L

_MODES = {"auto": 0, "diffusion": 1, "ar": 2, "autoregressive": 2, "lossless": 1}
_FINISH = {0: "stop", 1: "length", 2: "cancelled"}
# Block diffusion's decoding rule (clover_rule): the names `clover run --rule` takes, and the record's
# spelling of the second ("causal_fallback", what Model.info shows) as the same rule.
_RULES = {"threshold": 1, "causal": 2, "causal_fallback": 2}


class Error(Exception):
    """An engine error: `code` is the status (negative), `status` its name, str() the engine's message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.status = (L.lib().clover_status_name(code) or b"").decode()


def _check(rc: int, err: L.clover_error) -> None:
    if rc != 0:
        raise Error(rc, err.message.decode("utf-8", "replace") or f"clover error {rc}")


@dataclass
class Stats:
    """What one request did (clover_generate_stats plus the result's shape)."""
    prompt_tokens: int = 0
    reused_tokens: int = 0
    generated_tokens: int = 0
    finish_reason: str = ""
    mode: str = ""
    passes: int = 0
    blocks: int = 0
    passes_per_block: List[int] = field(default_factory=list)
    prompt_s: float = 0.0
    total_s: float = 0.0
    prompt_tok_s: float = 0.0
    gen_tok_s: float = 0.0
    ids: List[int] = field(default_factory=list)
    confidences: List[float] = field(default_factory=list)
    causal_steps: int = 0  # the causal-fallback rule: rows fixed by the causal pick (not counted in passes)


def _stats_of(r: L.clover_generate_result, finish: Optional[str] = None) -> Stats:
    s = r.stats
    return Stats(prompt_tokens=s.prompt_tokens, reused_tokens=s.reused_tokens, generated_tokens=r.n_generated,
                 finish_reason=finish or _FINISH.get(r.finish, "?"),
                 mode={1: "diffusion", 2: "ar"}.get(r.mode, "?") + ("/lossless" if r.lossless else ""),
                 passes=s.passes, blocks=s.blocks,
                 passes_per_block=[r.passes_per_block[i] for i in range(r.n_blocks)],
                 prompt_s=s.prompt_s, total_s=s.total_s, prompt_tok_s=s.prompt_tok_s, gen_tok_s=s.gen_tok_s,
                 ids=[r.ids[i] for i in range(r.n_generated)],
                 confidences=[r.confidences[i] for i in range(r.n_generated)],
                 causal_steps=s.causal_steps)


def _ids_array(ids: Sequence[int]):
    return (ctypes.c_int32 * max(len(ids), 1))(*ids)


class _StopText:
    """Cuts the answer at the first stop string, holding back a tail that may still become one."""

    def __init__(self, stops: Sequence[str]):
        self.stops = [s for s in stops if s]
        self.buf = ""
        self.hit = False

    def push(self, piece: str) -> str:
        if not self.stops:
            return piece
        self.buf += piece
        cut = min((i for i in (self.buf.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.hit = True
            out, self.buf = self.buf[:cut], ""
            return out
        hold = 0  # the longest tail of buf that begins some stop string
        for s in self.stops:
            for k in range(min(len(s) - 1, len(self.buf)), 0, -1):
                if self.buf.endswith(s[:k]):
                    hold = max(hold, k)
                    break
        out = self.buf[:len(self.buf) - hold]
        self.buf = self.buf[len(self.buf) - hold:]
        return out

    def flush(self) -> str:
        out, self.buf = self.buf, ""
        return out


class Session:
    """One sequence over a model; reuses the committed prefix across requests (multi-turn chat).

    Use from one thread at a time (a lock enforces it). Made by Model.session();
    the Model's own methods use its default session."""

    def __init__(self, model: "Model", device: str = "auto", threads: Optional[int] = None,
                 context: Optional[int] = None):
        self.model = model
        lib = L.lib()
        p = L.clover_session_params()
        lib.clover_session_params_init(ctypes.byref(p))
        dev = lib.clover_device_from_name(device.encode())
        if dev < 0:
            raise Error(-1, f"unknown device '{device}' (expected auto, cpu or cuda)")
        p.device = dev
        if threads is not None:
            if threads < 1:
                raise Error(-1, f"threads must be >= 1, got {threads}")
            p.n_threads = threads
        if context is not None:
            p.max_context = context
        err = L.clover_error()
        h = ctypes.c_void_p()
        _check(lib.clover_session_create(ctypes.byref(h), model._h, ctypes.byref(p), ctypes.byref(err)), err)
        self._h = h
        self._lock = threading.Lock()
        self.last_stats: Optional[Stats] = None

    # -- lifetime --
    def close(self) -> None:
        """Frees the session (also done when it is garbage-collected)."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            L.lib().clover_session_free(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def backend(self) -> str:
        """Where this session runs: "cpu" or "cuda"."""
        return L.lib().clover_session_backend(self._h).decode()

    def __len__(self) -> int:
        """Tokens committed in the session."""
        return L.lib().clover_session_length(self._h)

    def reset(self) -> None:
        """Forgets the committed sequence."""
        with self._lock:
            L.lib().clover_session_reset(self._h)

    # -- requests --
    def _params(self, max_tokens: int, temperature: float, top_k: int, top_p: float, seed: int, mode: str,
                threshold: Optional[float], ignore_eos: bool, skip_special: bool,
                snapshot_at: int, json_schema: Any = None, rule: Optional[str] = None) -> L.clover_generate_params:
        if rule is not None and (not isinstance(rule, str) or rule not in _RULES):
            # a Python-side check: the engine would only see a number
            raise ValueError(f"unknown rule {rule!r} (expected threshold, causal or causal_fallback; "
                             "None: the model's)")
        if mode not in _MODES:
            raise Error(-1, f"unknown mode '{mode}' (expected diffusion, ar, lossless or auto)")
        if max_tokens < 0:
            raise Error(-1, f"max_tokens must be >= 0, got {max_tokens}")
        if seed < 0 or seed >= 1 << 64:
            raise Error(-1, f"seed must be in [0, 2^64), got {seed}")
        p = L.clover_generate_params()
        L.lib().clover_generate_params_init(ctypes.byref(p))
        p.mode = _MODES[mode]
        p.lossless = 1 if mode == "lossless" else 0
        p.max_tokens = max_tokens
        p.temperature = temperature
        p.top_k = top_k
        p.top_p = top_p
        p.seed = seed
        p.ignore_eos = 1 if ignore_eos else 0
        p.skip_special = 1 if skip_special else 0
        p.snapshot_at = snapshot_at
        if threshold is not None:
            p.threshold = threshold
        if rule is not None:
            p.rule = _RULES[rule]
        if json_schema is not None:
            # ctypes keeps the bytes alive as long as p (its _objects)
            text = json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
            p.json_schema = text.encode("utf-8")
        return p

    def _prompt_ids(self, prompt: Union[str, Sequence[int]]) -> List[int]:
        if isinstance(prompt, str):
            return self.model.tokenize(prompt, special=True)
        return [int(i) for i in prompt]

    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 256, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int = 0, mode: str = "auto",
                 threshold: Optional[float] = None, stop: Optional[Sequence[str]] = None,
                 ignore_eos: bool = False, skip_special: bool = False, json_schema: Any = None,
                 rule: Optional[str] = None, _snapshot_at: int = 0) -> str:
        """The answer to prompt (text, or token ids) (control tokens kept unless skip_special).

        mode: "diffusion" (block diffusion; the default "auto" picks it on a model
        with the Clover record), "ar" (next-token decoding) or "lossless" (block
        diffusion drafts, autoregressive answer). temperature 0 is greedy;
        top_k 0 and top_p 1 are off; threshold overrides the record's. rule: block
        diffusion's decoding rule, "threshold" (every row above the threshold,
        else the most confident one) or "causal" (alias "causal_fallback": the
        confident run from the first open row, else that row's autoregressive
        pick); None (default) the model's record (info["record"]["decode_rule"]);
        another value raises ValueError. stop:
        strings that end the answer (left out of it). skip_special: leave control
        tokens out of the text (the ids keep them). json_schema: a JSON schema
        (dict or its text) the answer must satisfy, one JSON document (see
        docs/STRUCTURED_OUTPUT.md); {"type": "object"} asks for any object.
        Statistics: last_stats (causal_steps: rows the causal rule took from the
        autoregressive pick)."""
        if stop:
            return "".join(self.stream(prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k,
                                       top_p=top_p, seed=seed, mode=mode, threshold=threshold, stop=stop,
                                       ignore_eos=ignore_eos, skip_special=skip_special, json_schema=json_schema,
                                       rule=rule, _snapshot_at=_snapshot_at))
        p = self._params(max_tokens, temperature, top_k, top_p, seed, mode, threshold, ignore_eos, skip_special,
                         _snapshot_at, json_schema, rule)
        ids = self._prompt_ids(prompt)
        arr = _ids_array(ids)
        r = L.clover_generate_result()
        err = L.clover_error()
        lib = L.lib()
        with self._lock:
            _check(lib.clover_generate(self._h, arr, len(ids), ctypes.byref(p), ctypes.byref(r), ctypes.byref(err)),
                   err)
        try:
            self.last_stats = _stats_of(r)
            text = ctypes.string_at(r.text, r.text_len).decode("utf-8", "replace") if r.text else ""
        finally:
            lib.clover_generate_result_free(ctypes.byref(r))
        return text

    def stream(self, prompt: Union[str, Sequence[int]], max_tokens: int = 256, temperature: float = 0.0,
               top_k: int = 0, top_p: float = 1.0, seed: int = 0, mode: str = "auto",
               threshold: Optional[float] = None, stop: Optional[Sequence[str]] = None,
               ignore_eos: bool = False, skip_special: bool = False, json_schema: Any = None,
               rule: Optional[str] = None, _snapshot_at: int = 0) -> Iterator[str]:
        """The answer of generate() with the same arguments, as pieces of text while the engine makes them.

        Leaving the loop early cancels the request (the session is then emptied)."""
        p = self._params(max_tokens, temperature, top_k, top_p, seed, mode, threshold, ignore_eos, skip_special,
                         _snapshot_at, json_schema, rule)
        ids = self._prompt_ids(prompt)
        lib = L.lib()
        err = L.clover_error()
        ts = ctypes.c_void_p()
        _check(lib.clover_text_stream_create(ctypes.byref(ts), self.model._h, 1 if skip_special else 0,
                                            ctypes.byref(err)), err)
        pieces: List[str] = []
        stops = _StopText(stop or [])
        failure: List[Error] = []
        pending = bytearray()  # the text stream hands out whole characters; this only guards decode

        def on_token(user, tid, conf):
            piece, n, e = ctypes.c_void_p(), ctypes.c_size_t(), L.clover_error()
            if lib.clover_text_stream_push(ts, tid, ctypes.byref(piece), ctypes.byref(n), ctypes.byref(e)):
                failure.append(Error(e.code, e.message.decode("utf-8", "replace")))
                return 1
            if n.value:
                pending.extend(ctypes.string_at(piece, n.value))
                text = pending.decode("utf-8", "replace")
                pending.clear()
                pieces.append(stops.push(text))
            return 1 if stops.hit else 0

        cb = L.TOKEN_FN(on_token)
        p.on_token = cb
        arr = _ids_array(ids)
        rq = ctypes.c_void_p()
        self._lock.acquire()
        try:
            _check(lib.clover_request_create(ctypes.byref(rq), self._h, arr, len(ids), ctypes.byref(p),
                                             ctypes.byref(err)), err)
            while not lib.clover_request_done(rq):
                if lib.clover_request_step(rq) != 0 and not lib.clover_request_done(rq):
                    break
                if pieces:
                    out = "".join(pieces)
                    pieces.clear()
                    if out:
                        yield out
            r = L.clover_generate_result()
            rc = lib.clover_request_result(rq, ctypes.byref(r), ctypes.byref(err))
            if failure:
                raise failure[0]
            _check(rc, err)
            try:
                self.last_stats = _stats_of(r, "stop" if stops.hit else None)
            finally:
                lib.clover_generate_result_free(ctypes.byref(r))
            if not stops.hit:
                piece, n = ctypes.c_void_p(), ctypes.c_size_t()
                _check(lib.clover_text_stream_flush(ts, ctypes.byref(piece), ctypes.byref(n), ctypes.byref(err)), err)
                if n.value:
                    pieces.append(stops.push(ctypes.string_at(piece, n.value).decode("utf-8", "replace")))
                if not stops.hit:
                    pieces.append(stops.flush())
            out = "".join(pieces)
            if out:
                yield out
        finally:
            if rq:
                lib.clover_request_free(rq)
            lib.clover_text_stream_free(ts)
            self._lock.release()
            del cb

    def chat(self, messages: Sequence[Dict[str, Any]], thinking: bool = True, **kw: Any) -> Dict[str, str]:
        """One assistant turn for messages ({"role", "content"[, "reasoning_content"]} dicts, roles system /
        user / assistant / tool), rendered with the model's chat template.

        Returns {"role": "assistant", "content": ..., "reasoning_content": ...}, ready to append to messages
        for the next turn; on the same session that turn reuses what this one committed. Keyword arguments
        are generate()'s."""
        prompt = self.model.render_chat(messages, thinking=thinking)
        # The prompt snapshot goes where the generation prompt starts: the next
        # turn renders this answer differently (no reasoning, no opening), so
        # the ids up to here are what it can reuse.
        base = len(self.model.tokenize(self.model.render_chat(messages, add_generation_prompt=False), special=True))
        kw.setdefault("skip_special", True)
        answer = self.generate(self.model.tokenize(prompt, special=True), _snapshot_at=base, **kw)
        parts = L.clover_answer_parts()
        raw = answer.encode()
        L.lib().clover_answer_split(raw, len(raw), 1 if thinking else 0, ctypes.byref(parts))
        reasoning = raw[parts.reasoning_off:parts.reasoning_off + parts.reasoning_len].decode("utf-8", "replace")
        content = raw[parts.content_off:parts.content_off + parts.content_len].decode("utf-8", "replace")
        return {"role": "assistant", "content": content, "reasoning_content": reasoning}

    def score(self, ids: Union[str, Sequence[int]]) -> float:
        """Mean negative log-likelihood (nats per token) of ids[1:] given what precedes each (n >= 2)."""
        ids = self._prompt_ids(ids)
        arr = _ids_array(ids)
        out = L.clover_score_result()
        err = L.clover_error()
        with self._lock:
            _check(L.lib().clover_score(self._h, arr, len(ids), ctypes.byref(out), ctypes.byref(err)), err)
        return out.mean_nll


class Model:
    """A loaded model (GGUF) and a default session.

    path None loads the default model the package carries (the one
    embedded in the `clover` command: the small trained demo model).
    device "auto" takes CUDA when the build has it and a device answers, else
    the CPU; threads None uses every CPU; context None the model's training
    context."""

    def __init__(self, path: Optional[Union[str, "os.PathLike[str]"]] = None, device: str = "auto",
                 threads: Optional[int] = None, context: Optional[int] = None):
        lib = L.lib()
        if path is None:
            path = default_model_path()
        err = L.clover_error()
        h = ctypes.c_void_p()
        _check(lib.clover_model_load(ctypes.byref(h), os.fsencode(path), ctypes.byref(err)), err)
        self._h = h
        self._device, self._threads, self._context = device, threads, context
        self._default: Optional[Session] = None
        self._default = Session(self, device, threads, context)

    def close(self) -> None:
        """Frees the default session and the model. Sessions made by session() must be closed first."""
        if getattr(self, "_default", None) is not None:
            self._default.close()
            self._default = None
        h, self._h = getattr(self, "_h", None), None
        if h:
            L.lib().clover_model_free(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def session(self, device: Optional[str] = None, threads: Optional[int] = None) -> Session:
        """A new session over this model (its own committed prefix), e.g. one per conversation."""
        return Session(self, device or self._device, threads or self._threads, self._context)

    # -- the default session's requests --
    def generate(self, prompt: Union[str, Sequence[int]], **kw: Any) -> str:
        """Session.generate on the default session."""
        return self._default.generate(prompt, **kw)

    def stream(self, prompt: Union[str, Sequence[int]], **kw: Any) -> Iterator[str]:
        """Session.stream on the default session."""
        return self._default.stream(prompt, **kw)

    def chat(self, messages: Sequence[Dict[str, Any]], **kw: Any) -> Dict[str, str]:
        """Session.chat on the default session."""
        return self._default.chat(messages, **kw)

    def score(self, ids: Union[str, Sequence[int]]) -> float:
        """Session.score on the default session."""
        return self._default.score(ids)

    @property
    def last_stats(self) -> Optional[Stats]:
        """Statistics of the default session's last request."""
        return self._default.last_stats

    # -- text --
    def tokenize(self, text: str, special: bool = False) -> List[int]:
        """The model tokenizer's ids for text; special: control tokens' text (<|im_start|>) becomes their ids."""
        raw = text.encode("utf-8", "surrogateescape")
        ids = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_size_t()
        err = L.clover_error()
        lib = L.lib()
        _check(lib.clover_tokenize(self._h, raw, len(raw), 1 if special else 0, ctypes.byref(ids), ctypes.byref(n),
                                   ctypes.byref(err)), err)
        try:
            return [ids[i] for i in range(n.value)]
        finally:
            lib.clover_free(ids)

    def detokenize(self, ids: Sequence[int], skip_special: bool = False) -> str:
        """The text of ids (invalid UTF-8 as U+FFFD); skip_special leaves control tokens out."""
        arr = _ids_array(ids)
        text = ctypes.c_void_p()
        n = ctypes.c_size_t()
        err = L.clover_error()
        lib = L.lib()
        _check(lib.clover_detokenize(self._h, arr, len(ids), 1 if skip_special else 0, ctypes.byref(text),
                                     ctypes.byref(n), ctypes.byref(err)), err)
        try:
            return ctypes.string_at(text, n.value).decode("utf-8", "replace")
        finally:
            lib.clover_free(text)

    def render_chat(self, messages: Sequence[Dict[str, Any]], thinking: bool = True,
                    add_generation_prompt: bool = True) -> str:
        """messages in the model's chat template (Qwen3.5 ChatML), as text."""
        n = len(messages)
        arr = (L.clover_chat_message * max(n, 1))()
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or "role" not in m:
                raise Error(-1, f"messages[{i}]: expected a dict with a 'role'")
            arr[i].role = str(m["role"]).encode()
            arr[i].content = (m.get("content") or "").encode()
            rc = m.get("reasoning_content")
            arr[i].reasoning_content = rc.encode() if rc else None
        o = L.clover_chat_options()
        lib = L.lib()
        lib.clover_chat_options_init(ctypes.byref(o))
        o.add_generation_prompt = 1 if add_generation_prompt else 0
        o.enable_thinking = 1 if thinking else 0
        text = ctypes.c_void_p()
        err = L.clover_error()
        _check(lib.clover_chat_render(self._h, arr, n, ctypes.byref(o), ctypes.byref(text), ctypes.byref(err)), err)
        try:
            return ctypes.string_at(text).decode("utf-8", "replace")
        finally:
            lib.clover_free(text)

    @property
    def info(self) -> Dict[str, Any]:
        """What `clover info` shows: geometry, the block-diffusion record (None: autoregressive), tokenizer."""
        i = L.clover_model_info()
        L.lib().clover_model_get_info(self._h, ctypes.byref(i))

        def s(b: Optional[bytes]) -> Optional[str]:
            return b.decode("utf-8", "replace") if b is not None else None

        out: Dict[str, Any] = {k: getattr(i, k) for k in (
            "file_bytes", "n_layer", "n_embd", "n_vocab", "n_ctx_train", "n_head", "n_head_kv", "head_dim",
            "n_expert", "n_expert_used", "n_tensors", "n_params", "n_bytes", "n_tokens", "bos_id", "eos_id")}
        out.update(source=s(i.source), architecture=s(i.architecture), name=s(i.name),
                   layer_kinds=s(i.layer_kinds), tokenizer=s(i.tokenizer_model),
                   types={s(i.types[k].type): i.types[k].n_tensors for k in range(i.n_types)})
        rec = None
        if i.record:
            r = i.record.contents
            rec = {"algorithm": s(r.algorithm), "block_size": r.block_size, "threshold": r.threshold,
                   "mask_token_id": r.mask_token_id,
                   "decode_rule": "causal_fallback" if r.decode_rule == 2 else "threshold",
                   "stop_token_ids": [r.stop_token_ids[k] for k in range(r.n_stop_token_ids)]}
        out["record"] = rec
        out["backend"] = self._default.backend if self._default is not None else None
        return out


def default_model_path() -> str:
    """The default model: $CLOVER_DEFAULT_MODEL, else the copy installed in the package (the model the
    package's `clover` command embeds: the trained demo model, or the tiny random one in a build whose
    source tree lacked models/clover-demo-q8_0.gguf)."""
    env = os.environ.get("CLOVER_DEFAULT_MODEL")
    if env:
        return env
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default-model.gguf")
    if not os.path.exists(p):
        raise Error(-2, f"the default model is not installed ({p}); pass a path or set CLOVER_DEFAULT_MODEL")
    return p
