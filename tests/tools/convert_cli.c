/*
 * convert_cli.c: `clover convert` as a stand-alone program, for the Python
 * tests when the full `clover` binary (which embeds a synthesised default
 * model) cannot be built yet. It compiles the very same command source.
 */
#include "../../tools/cli/cmd_convert.c"
#include "../../tools/cli/tensor_progress.c"
#include "../../tools/cli/cli_cancel.c"
#include "../../tools/cli/cli_opts.c"

int main(int argc, char **argv) { return cmd_convert(argc, argv); }
