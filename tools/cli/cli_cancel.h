/*
 * cli_cancel.h: Ctrl-C as "stop this answer" rather than "kill clover".
 * The SIGINT handler only sets the flag that clover_generate checks before
 * every pass (an int store is all a handler may safely do); the command
 * then ends the answer normally, with its statistics.
 */
#ifndef CLOVER_CLI_CANCEL_H
#define CLOVER_CLI_CANCEL_H

/* Set by SIGINT; pass as clover_generate_params.cancel, clear with 0. */
extern volatile int cli_cancel_flag;

/* Installs the handler (without SA_RESTART, so a blocking read returns
 * EINTR). With second_kills, a Ctrl-C while the flag is still set restores
 * the default action and ends the process, so a stuck command can always be
 * interrupted. */
void cli_cancel_install(int second_kills);

/* For the commands that write a file (convert, quantize, synth): SIGINT,
 * SIGTERM and SIGHUP remove the temporary being written (the target is
 * never touched before the final rename), then end the process by that
 * signal as its default action would. */
void cli_cancel_install_writer(void);

#endif
