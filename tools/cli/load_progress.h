/*
 * load_progress.h: what a user sees while a large model file loads. The
 * library maps the file and pages weights in on first use, so a big model
 * would otherwise sit silent for seconds on its first pass; reading the
 * file once up front, with a progress bar on the terminal, moves that wait
 * to where the user expects it and shows how far along it is.
 */
#ifndef CLOVER_CLI_LOAD_PROGRESS_H
#define CLOVER_CLI_LOAD_PROGRESS_H

/* When stderr is a terminal and path is at least CLI_PREFETCH_MIN_BYTES,
 * reads the file into the page cache with a progress bar on stderr (erased
 * when done). Anything that goes wrong is left for the loader to report. */
#define CLI_PREFETCH_MIN_BYTES (64ull << 20)
void cli_prefetch_model(const char *path);

#endif
