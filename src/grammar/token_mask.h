/*
 * token_mask.h: which tokens the automaton (json_match.h) allows next.
 *
 * A vocabulary is indexed once as a byte trie of its tokens (special tokens
 * and empty ones left out: they are never part of a document; the stop ids
 * are added by the mask's caller, allowed exactly where the document may
 * end). A mask walks the trie depth first from the automaton's state,
 * copying the state once per edge and cutting every subtree whose prefix is
 * rejected, so inside a closed context (after '{' of a schema object) it
 * visits a handful of nodes, and inside free string content the whole trie.
 *
 * Inside a string (the top frame at a character boundary) a token made only
 * of whole string characters is allowed exactly when its length fits, so
 * only the other tokens (quotes, escapes or UTF-8 sequences cut by the
 * token's end) are walked, in a second trie of just those.
 *
 * Masks are cached per state: a generation revisits few distinct states,
 * and states that differ only in counts too far from their bounds to matter
 * for one token (a string's length against its maxLength, say) share a key.
 * A cached mask costs n_vocab/8 bytes; the cache is emptied when full.
 */
#ifndef CLOVER_GRAMMAR_TOKEN_MASK_H
#define CLOVER_GRAMMAR_TOKEN_MASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"
#include "grammar/json_match.h"
#include "text/tokenizer.h"

typedef struct tm_vocab tm_vocab;
typedef struct tm_cache tm_cache;

/* Indexes the tokens 0..n_vocab-1 of t (ids past the tokenizer's: none). */
int tm_vocab_build(const tokenizer *t, size_t n_vocab, tm_vocab **out, clover_error *err);
void tm_vocab_free(tm_vocab *v);
size_t tm_vocab_n(const tm_vocab *v);
/* The longest token in bytes. */
size_t tm_vocab_max_len(const tm_vocab *v);
/* Whether the token is in the trie (not special, not empty). */
bool tm_vocab_has(const tm_vocab *v, int32_t id);

/* A cache for one schema over one vocabulary; max_entries masks at most. */
int tm_cache_create(const js_schema *sc, const tm_vocab *v, size_t max_entries, tm_cache **out, clover_error *err);
void tm_cache_free(tm_cache *c);

/* The allowed tokens in state s as a bitset [(n_vocab + 63) / 64] (owned by
 * the cache, valid until the next call) and whether the document may end
 * here (*accepts). Stop ids are not in the bitset. NULL: no memory. */
const uint64_t *tm_mask(tm_cache *c, const jm_state *s, bool *accepts);

/* Statistics: masks computed, cache hits, trie nodes visited. */
void tm_cache_stats(const tm_cache *c, uint64_t *computed, uint64_t *hits, uint64_t *visited);

#endif
