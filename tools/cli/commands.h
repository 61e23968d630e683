/*
 * commands.h: the subcommands of `clover`. Each lives in its own cmd_*.c,
 * takes the arguments after its name (argv[0] is the subcommand) and returns
 * the process exit code: 0 on success, 1 on a failure it has already
 * reported as one line on stderr, 2 on a usage error.
 */
#ifndef CLOVER_CLI_COMMANDS_H
#define CLOVER_CLI_COMMANDS_H

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

int cmd_synth(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_convert(int, char **);
int cmd_quantize(int, char **);
int cmd_run(int argc, char **argv);
int cmd_ppl(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
