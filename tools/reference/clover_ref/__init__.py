"""clover_ref: the PyTorch reference of SPEC.md.

The causal trunk is Hugging Face transformers' own Qwen3_5MoeForCausalLM
(float32, eager attention, eager experts, torch fallbacks of the Gated
DeltaNet); this package adds only what transformers does not have: the
read-only preview pass of SPEC 2 built from the model's own modules, the
expert coreset, the penalties, the SplitMix64 sampler, and the generation
loops of SPEC 3 / 5. Everything runs on the CPU by default so that results do
not depend on the machine's accelerator.
"""
