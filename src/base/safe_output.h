/*
 * safe_output.h: how every file clover writes reaches its name. A model
 * file is gigabytes written over minutes; writing it in place means a crash,
 * a kill or a full disk leaves a truncated file under the name the user
 * asked for, and an output that is also the input (quantize IN IN, or a
 * symlink to it) is truncated while it is still mapped for reading (a bus
 * error). So: the output is refused when it is (or resolves to) an input,
 * before anything is opened for writing; the bytes go to a temporary file
 * in the target's directory; on success the temporary is fsynced and
 * renamed over the target (atomic: the target is the old file or the whole
 * new one, never a part). Every temporary is listed in a table that a
 * signal handler can walk (safe_output_unlink_all is async-signal-safe), so
 * a Ctrl-C or SIGTERM leaves nothing behind either.
 *
 * A target that exists and is not a regular file (/dev/null, a FIFO) is
 * written directly: there is nothing to rename over.
 *
 * Besides the inputs a command names (safe_output_check_inputs), every file
 * the library maps for reading (a GGUF model and its shards, a checkpoint's
 * safetensors) is noted here while it is mapped, and safe_output_open
 * refuses a target that is one of them: so a writer that knows nothing of
 * the model (the first-preview dump, the routing trace, a library user's
 * output path) cannot replace the file being read either.
 */
#ifndef CLOVER_BASE_SAFE_OUTPUT_H
#define CLOVER_BASE_SAFE_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "clover.h"

typedef struct safe_output {
    char *target; /* the path written at commit (a symlink's target, resolved) */
    char *tmp;    /* the temporary, NULL when written directly */
    int fd;       /* open for writing; -1 once closed */
    int slot;     /* in the signal table; -1 when none */
} safe_output;

/* Refuses (CLOVER_E_INVALID, "... is also an input ...") when out names the
 * same file as one of inputs[n] (same device and inode, or the same real
 * path), or, for an input that is a directory, one of the files directly in
 * it. Opens nothing for writing. */
int safe_output_check_inputs(const char *out, const char *const *inputs, size_t n, clover_error *err);

/* Creates the temporary next to path (or opens path itself, see above) and
 * fills so; so->fd is open for writing. */
int safe_output_open(safe_output *so, const char *path, clover_error *err);

/* The path the bytes are being written to now (the temporary, or the target). */
const char *safe_output_writing_path(const safe_output *so);

/* fsyncs and closes so->fd (unless the caller closed it: pass so->fd = -1
 * after fsync), renames the temporary over the target and fsyncs the
 * directory. On failure the temporary is removed. */
int safe_output_commit(safe_output *so, clover_error *err);

/* Closes so->fd (if open) and removes the temporary. Safe on a zeroed or
 * already committed/aborted so. */
void safe_output_abort(safe_output *so);

/* A file mapped for reading (its st_dev, st_ino): noted while it is mapped,
 * forgotten when it is unmapped (counted: the same file mapped twice stays
 * noted until both are gone). Thread-safe. */
void safe_output_note_input(unsigned long long dev, unsigned long long ino);
void safe_output_forget_input(unsigned long long dev, unsigned long long ino);

/* Async-signal-safe: unlinks every temporary still open in this process
 * (for a SIGINT/SIGTERM handler, which then re-raises the signal). */
void safe_output_unlink_all(void);

#endif
