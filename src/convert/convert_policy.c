/*
 * convert_policy.c: the output type of each tensor for each --type.
 *
 * Small tensors (norms, conv taps, per-head vectors) and the routers stay
 * F32 in every mode, as llama.cpp's converter keeps them: they are a
 * negligible share of the bytes and the most sensitive to rounding.
 *
 * q4_k_m: the routed experts are over 90% of Qwen3.5-35B-A3B's parameters, so
 * they take Q4_K; everything else that is a matrix (attention, the GDN
 * projections, the shared expert) takes Q8_0 rather than Q6_K: together
 * they are a few percent of the file, Q8_0 is near-lossless where it is
 * cheap (these run for every token, unlike any one expert), its blocks of
 * 32 fit every row length, and it dequantises faster. token_embd is Q4_K
 * and output Q6_K, as llama.cpp's own Q4_K_M makes them.
 *
 * A row length the chosen block does not divide falls back to Q8_0, then
 * to F16, as llama.cpp does (the tiny test models have 64-wide rows).
 */
#include "convert/convert_internal.h"

#include <ctype.h>
#include <string.h>

#include "quant/quant.h"

int convert_name_index(const char *name, const char *const *names, int count) {
    char low[16];
    size_t n = strlen(name);
    if (n >= sizeof low) return -1;
    for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)name[i]);
    for (int i = 0; i < count; i++)
        if (!strcmp(low, names[i])) return i;
    return -1;
}

int convert_type_from_name(const char *name) {
    static const char *const names[] = {"f32", "bf16", "q8_0", "q4_k_m"};
    return convert_name_index(name, names, 4);
}

const char *convert_type_name(convert_type t) {
    switch (t) {
    case CONVERT_F32: return "f32";
    case CONVERT_BF16: return "bf16";
    case CONVERT_Q8_0: return "q8_0";
    case CONVERT_Q4_K_M: return "q4_k_m";
    }
    return "?";
}

uint32_t convert_file_type(convert_type t) {
    switch (t) {
    case CONVERT_F32: return 0;     /* LLAMA_FTYPE_ALL_F32 */
    case CONVERT_BF16: return 32;   /* MOSTLY_BF16 */
    case CONVERT_Q8_0: return 7;    /* MOSTLY_Q8_0 */
    case CONVERT_Q4_K_M: return 15; /* MOSTLY_Q4_K_M */
    }
    return 0;
}

static uint32_t fit(uint32_t type, uint64_t ne0) {
    if (quant_row_bytes(type, (size_t)ne0)) return type;
    if (quant_row_bytes(QUANT_Q8_0, (size_t)ne0)) return QUANT_Q8_0;
    return QUANT_F16;
}

uint32_t convert_pick_type(convert_type want, conv_role role, uint64_t ne0) {
    if (role == CONV_ROLE_SMALL || role == CONV_ROLE_ROUTER || want == CONVERT_F32) return QUANT_F32;
    switch (want) {
    case CONVERT_BF16: return QUANT_BF16;
    case CONVERT_Q8_0: return fit(QUANT_Q8_0, ne0);
    case CONVERT_Q4_K_M:
        switch (role) {
        case CONV_ROLE_EXPERTS:
        case CONV_ROLE_EMBED: return fit(QUANT_Q4_K, ne0);
        case CONV_ROLE_HEAD: return fit(QUANT_Q6_K, ne0);
        default: return fit(QUANT_Q8_0, ne0);
        }
    default: return QUANT_F32;
    }
}
