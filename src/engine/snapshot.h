/*
 * snapshot.h: the prompt snapshot of a session (internal). A chat's next
 * request re-renders the conversation: earlier answers lose their reasoning
 * and the generation prompt becomes the assistant's turn, so the ids a
 * request leaves committed rarely prefix the next prompt, and a GDN state
 * cannot be rewound to the point where they part. So the session keeps a
 * host copy of the backend's state at one point of the last prompt (the
 * caller picks it: for a chat, where the generation prompt starts) with the
 * ids up to there; a later prompt that extends those ids imports it and
 * commits only its tail. state_import restores the exact bytes, so a
 * request through the snapshot runs as it would on the committed prefix.
 *
 * Cost: backend.h's state layout for n ids: 8 + n x (attention layers x
 * 2 x n_head_kv x head_dim x 4) + GDN layers x ((K-1) x conv_dim + n_v_heads
 * x dk x dv) x 4 bytes, plus 4 n for the ids. For the 35B geometry (30 GDN
 * layers with 32 value heads of 128 x 128, conv ring 3 x 8192; 10 attention
 * layers with 2 KV heads of 256) that is ~66 MB (63 MiB) of GDN state plus
 * 40 KiB per token. One buffer per session, grown when a longer state comes.
 * A backend that keeps state copies itself (backend_ops.state_save) holds
 * the snapshot there instead (the same bytes, on the device: a CUDA
 * export and import of 63 MiB cross the host link between passes).
 */
#ifndef CLOVER_ENGINE_SNAPSHOT_H
#define CLOVER_ENGINE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "clover.h"

typedef struct engine_snapshot {
    unsigned char *state; /* [bytes] backend.h's state layout */
    size_t bytes, cap_bytes;
    /* where the backend keeps state copies itself (backend_ops.state_save: a device's memory, serve25), the
     * snapshot is that copy and state is not used: no host transfer between the passes */
    backend_state_copy *copy;
    const backend_ops *copy_be; /* whose copy (freed through it) */
    bool in_copy;               /* the valid snapshot is in copy */
    int32_t *ids; /* [n_ids] the ids the state holds */
    size_t n_ids, cap_ids;
    bool valid;
} engine_snapshot;

void engine_snapshot_free(engine_snapshot *sn);

/* Forgets the snapshot (keeps the buffers for the next one). */
void engine_snapshot_drop(engine_snapshot *sn);

/* The length of the snapshot's ids when they are a whole prefix of
 * prompt[0..n), else 0. */
size_t engine_snapshot_match(const engine_snapshot *sn, const int32_t *prompt, size_t n);

/* True when the snapshot already holds exactly ids[0..n). */
bool engine_snapshot_holds(const engine_snapshot *sn, const int32_t *ids, size_t n);

/* Copies the backend session's state (which holds ids[0..n)) into the
 * snapshot. A state over max_bytes is not kept (the snapshot is dropped and
 * CLOVER_OK returned); on failure the snapshot is dropped too. */
int engine_snapshot_take(engine_snapshot *sn, const backend_ops *be, const backend_session *bs, const int32_t *ids,
                         size_t n, size_t max_bytes, clover_error *err);

/* Puts the snapshot's state back into the backend session. */
int engine_snapshot_restore(const engine_snapshot *sn, const backend_ops *be, backend_session *bs,
                            clover_error *err);

#endif
