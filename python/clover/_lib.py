"""_lib: the ctypes mirror of include/clover.h and the loading of libclover.

Why ctypes: it ships with Python (no compiler at install time, nothing
generated to keep in step) and it releases the GIL around every foreign call,
so a generation on one thread leaves the others running. The price is that the
structures below must match the header field for field; tests/python/
test_python_layout.py compiles the header and compares every size and offset,
so a header change that is not mirrored here fails a test instead of
corrupting memory.

The library is found, in order: $CLOVER_LIBRARY, then the libclover.so*
installed beside this file by the wheel.
"""
from __future__ import annotations

import ctypes
import glob
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_size_t,
                    c_uint8, c_uint32, c_uint64, c_void_p)

CLOVER_MAX_TYPE_STATS = 40
CLOVER_MAX_TOP_LOGPROBS = 20


class clover_error(Structure):
    _fields_ = [("code", c_int), ("message", c_char * 1024)]


class clover_record(Structure):
    _fields_ = [
        ("algorithm", c_char_p), ("block_size", c_uint32), ("threshold", c_float), ("mask_token_id", c_uint32),
        ("coreset_enabled", c_int), ("coreset_top_p", c_float), ("presence_penalty", c_float),
        ("frequency_penalty", c_float), ("repetition_penalty", c_float), ("length_penalty", c_float),
        ("length_penalty_start", c_uint32), ("length_penalty_window", c_uint32), ("think_end_bias", c_float),
        ("think_end_start", c_uint32), ("think_end_window", c_uint32), ("think_end_token_id", c_int32),
        ("stop_token_ids", POINTER(c_uint32)), ("n_stop_token_ids", c_size_t), ("decode_rule", c_int),
    ]


class clover_type_stats(Structure):
    _fields_ = [("type", c_char_p), ("n_tensors", c_size_t), ("n_params", c_uint64), ("n_bytes", c_uint64)]


class clover_model_info(Structure):
    _fields_ = [
        ("source", c_char_p), ("architecture", c_char_p), ("name", c_char_p), ("file_bytes", c_uint64),
        ("n_layer", c_uint32), ("n_embd", c_uint32), ("n_vocab", c_uint32), ("n_ctx_train", c_uint32),
        ("rms_eps", c_float), ("n_head", c_uint32), ("n_head_kv", c_uint32), ("head_dim", c_uint32),
        ("n_rot", c_uint32), ("rope_freq_base", c_float),
        ("gdn_key_heads", c_uint32), ("gdn_value_heads", c_uint32), ("gdn_key_dim", c_uint32),
        ("gdn_value_dim", c_uint32), ("gdn_conv_kernel", c_uint32),
        ("n_expert", c_uint32), ("n_expert_used", c_uint32), ("expert_ff", c_uint32), ("shared_expert_ff", c_uint32),
        ("full_attention_interval", c_uint32), ("layer_kinds", c_char_p),
        ("record", POINTER(clover_record)),
        ("n_tensors", c_size_t), ("n_params", c_uint64), ("n_bytes", c_uint64), ("n_types", c_size_t),
        ("types", clover_type_stats * CLOVER_MAX_TYPE_STATS),
        ("tokenizer_model", c_char_p), ("tokenizer_pre", c_char_p), ("n_tokens", c_uint64), ("n_merges", c_uint64),
        ("bos_id", c_int32), ("eos_id", c_int32), ("eot_id", c_int32), ("pad_id", c_int32), ("add_bos", c_int),
    ]


class clover_session_params(Structure):
    _fields_ = [
        ("n_threads", c_size_t), ("max_rows", c_size_t), ("max_context", c_size_t), ("no_snapshot", c_int),
        ("snapshot_max_bytes", c_size_t), ("device", c_int), ("gpu_layers", c_uint32), ("gpu_mem", c_uint64),
    ]


class clover_penalties(Structure):
    _fields_ = [
        ("presence_penalty", c_float), ("frequency_penalty", c_float), ("repetition_penalty", c_float),
        ("length_penalty", c_float), ("length_penalty_start", c_uint32), ("length_penalty_window", c_uint32),
        ("think_end_bias", c_float), ("think_end_start", c_uint32), ("think_end_window", c_uint32),
    ]


class clover_token_info(Structure):
    _fields_ = [
        ("index", c_size_t), ("id", c_int32), ("confidence", c_float), ("logprob", c_float), ("n_top", c_size_t),
        ("top_ids", POINTER(c_int32)), ("top_logprobs", POINTER(c_float)),
    ]


class clover_pass_view(Structure):
    _fields_ = [
        ("block_index", c_size_t), ("pass_", c_size_t), ("block_size", c_size_t), ("position", c_size_t),
        ("emitted", c_size_t), ("ids", POINTER(c_int32)), ("fixed", POINTER(c_uint8)),
        ("guesses", POINTER(c_int32)), ("confidences", POINTER(c_float)), ("n_fixed", c_size_t),
        ("n_fixed_now", c_size_t),
    ]


TOKEN_FN = CFUNCTYPE(c_int, c_void_p, c_int32, c_float)
TOKEN_INFO_FN = CFUNCTYPE(c_int, c_void_p, POINTER(clover_token_info))
PASS_FN = CFUNCTYPE(c_int, c_void_p, POINTER(clover_pass_view))


class clover_generate_params(Structure):
    _fields_ = [
        ("mode", c_int), ("max_tokens", c_size_t), ("temperature", c_float), ("top_k", c_int32),
        ("top_p", c_float), ("seed", c_uint64), ("ignore_eos", c_int), ("threshold", c_float),
        ("block_size", c_uint32), ("penalties", POINTER(clover_penalties)),
        ("stop_ids", POINTER(c_int32)), ("n_stop_ids", c_size_t),
        ("suppress_ids", POINTER(c_int32)), ("n_suppress_ids", c_size_t),
        ("on_token", TOKEN_FN), ("on_pass", PASS_FN), ("user", c_void_p), ("skip_special", c_int),
        ("cancel", POINTER(c_int)), ("dump_first_preview", c_char_p), ("snapshot_at", c_size_t),
        ("no_snapshot", c_int), ("lossless", c_int), ("logprobs", c_int), ("top_logprobs", c_size_t),
        ("on_token_info", TOKEN_INFO_FN), ("json_schema", c_char_p), ("rule", c_int),
    ]


class clover_op_seconds(Structure):
    _fields_ = [("gdn_s", c_double), ("attn_s", c_double), ("moe_s", c_double), ("head_s", c_double),
                ("expert_hits", c_uint64), ("expert_misses", c_uint64), ("expert_copy_bytes", c_uint64),
                ("expert_copy_s", c_double), ("expert_host", c_uint64), ("expert_host_s", c_double)]


class clover_generate_stats(Structure):
    _fields_ = [
        ("prompt_tokens", c_size_t), ("reused_tokens", c_size_t), ("snapshot_reused", c_size_t),
        ("snapshot_s", c_double), ("passes", c_size_t), ("blocks", c_size_t), ("prompt_s", c_double),
        ("preview_s", c_double), ("pick_s", c_double), ("commit_s", c_double), ("total_s", c_double),
        ("preview_ops", clover_op_seconds), ("commit_ops", clover_op_seconds),
        ("coreset_kept", c_uint64), ("coreset_layers", c_uint64), ("coreset_mean", c_double),
        ("prompt_tok_s", c_double), ("gen_tok_s", c_double), ("denoise_tok_s", c_double),
        ("accepted_drafts", c_size_t), ("recommits", c_size_t), ("causal_steps", c_size_t),
    ]


class clover_generate_result(Structure):
    _fields_ = [
        ("ids", POINTER(c_int32)), ("text", c_void_p), ("text_len", c_size_t), ("confidences", POINTER(c_float)),
        ("n_generated", c_size_t), ("n_prompt", c_size_t), ("finish", c_int), ("mode", c_int),
        ("passes_per_block", POINTER(c_uint32)), ("n_blocks", c_size_t), ("lossless", c_int),
        ("accepted_per_block", POINTER(c_uint32)), ("commits_per_block", POINTER(c_uint32)),
        ("logprobs", POINTER(c_float)), ("n_top_logprobs", c_size_t), ("top_ids", POINTER(c_int32)),
        ("top_logprobs", POINTER(c_float)), ("committed_after", c_size_t), ("stats", clover_generate_stats),
    ]


class clover_score_result(Structure):
    _fields_ = [("mean_nll", c_double), ("perplexity", c_double), ("n_scored", c_size_t), ("seconds", c_double)]


class clover_chat_message(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p), ("reasoning_content", c_char_p)]


class clover_chat_tool_call(Structure):
    _fields_ = [("message", c_size_t), ("name", c_char_p), ("arguments", c_char_p)]


class clover_chat_options(Structure):
    _fields_ = [
        ("add_generation_prompt", c_int), ("enable_thinking", c_int), ("tools", POINTER(c_char_p)),
        ("n_tools", c_size_t), ("tool_calls", POINTER(clover_chat_tool_call)), ("n_tool_calls", c_size_t),
    ]


class clover_answer_parts(Structure):
    _fields_ = [("reasoning_off", c_size_t), ("reasoning_len", c_size_t), ("content_off", c_size_t),
                ("content_len", c_size_t), ("think_closed", c_int)]


# The structures tests/python/test_python_layout.py checks against the C compiler.
STRUCTS = [clover_error, clover_record, clover_type_stats, clover_model_info, clover_session_params,
           clover_penalties, clover_token_info, clover_pass_view, clover_generate_params, clover_op_seconds,
           clover_generate_stats, clover_generate_result, clover_score_result, clover_chat_message,
           clover_chat_tool_call, clover_chat_options, clover_answer_parts]

_P = POINTER
_SIGS = {
    "clover_version": (c_char_p, []),
    "clover_status_name": (c_char_p, [c_int]),
    "clover_finish_name": (c_char_p, [c_int]),
    "clover_model_load": (c_int, [_P(c_void_p), c_char_p, _P(clover_error)]),
    "clover_model_free": (None, [c_void_p]),
    "clover_model_get_info": (None, [c_void_p, _P(clover_model_info)]),
    "clover_device_from_name": (c_int, [c_char_p]),
    "clover_session_params_init": (None, [_P(clover_session_params)]),
    "clover_session_create": (c_int, [_P(c_void_p), c_void_p, _P(clover_session_params), _P(clover_error)]),
    "clover_session_free": (None, [c_void_p]),
    "clover_session_reset": (None, [c_void_p]),
    "clover_session_length": (c_size_t, [c_void_p]),
    "clover_session_backend": (c_char_p, [c_void_p]),
    "clover_generate_params_init": (None, [_P(clover_generate_params)]),
    "clover_generate": (c_int, [c_void_p, _P(c_int32), c_size_t, _P(clover_generate_params),
                                _P(clover_generate_result), _P(clover_error)]),
    "clover_generate_result_free": (None, [_P(clover_generate_result)]),
    "clover_request_create": (c_int, [_P(c_void_p), c_void_p, _P(c_int32), c_size_t, _P(clover_generate_params),
                                      _P(clover_error)]),
    "clover_request_step": (c_int, [c_void_p]),
    "clover_request_done": (c_int, [c_void_p]),
    "clover_request_result": (c_int, [c_void_p, _P(clover_generate_result), _P(clover_error)]),
    "clover_request_free": (None, [c_void_p]),
    "clover_score": (c_int, [c_void_p, _P(c_int32), c_size_t, _P(clover_score_result), _P(clover_error)]),
    "clover_free": (None, [c_void_p]),
    "clover_tokenize": (c_int, [c_void_p, c_char_p, c_size_t, c_int, _P(_P(c_int32)), _P(c_size_t),
                                _P(clover_error)]),
    "clover_detokenize": (c_int, [c_void_p, _P(c_int32), c_size_t, c_int, _P(c_void_p), _P(c_size_t),
                                  _P(clover_error)]),
    "clover_text_stream_create": (c_int, [_P(c_void_p), c_void_p, c_int, _P(clover_error)]),
    "clover_text_stream_push": (c_int, [c_void_p, c_int32, _P(c_void_p), _P(c_size_t), _P(clover_error)]),
    "clover_text_stream_flush": (c_int, [c_void_p, _P(c_void_p), _P(c_size_t), _P(clover_error)]),
    "clover_text_stream_free": (None, [c_void_p]),
    "clover_chat_options_init": (None, [_P(clover_chat_options)]),
    "clover_chat_render": (c_int, [c_void_p, _P(clover_chat_message), c_size_t, _P(clover_chat_options),
                                   _P(c_void_p), _P(clover_error)]),
    "clover_answer_split": (None, [c_char_p, c_size_t, c_int, _P(clover_answer_parts)]),
}

_lib = None


def library_path() -> str:
    """Where libclover is loaded from ($CLOVER_LIBRARY, else the copy installed beside this package)."""
    env = os.environ.get("CLOVER_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libclover.so*")), key=len)
    if not found:
        raise OSError(f"libclover is not installed beside {here} and CLOVER_LIBRARY is not set "
                      "(install the package with `pip install .` from the clover checkout)")
    return found[0]


def lib() -> ctypes.CDLL:
    """The loaded library, with every function's signature declared."""
    global _lib
    if _lib is None:
        dll = ctypes.CDLL(library_path())
        for name, (res, args) in _SIGS.items():
            f = getattr(dll, name)
            f.restype = res
            f.argtypes = args
        _lib = dll
    return _lib
