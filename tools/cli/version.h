/*
 * version.h: the text of `clover --version` (version.c).
 */
#ifndef CLOVER_CLI_VERSION_H
#define CLOVER_CLI_VERSION_H

#include <stdio.h>

void cli_print_version(FILE *out);

#endif
