/* cmd_quantize.h: the `pasada quantize` sub-command (argument parsing,
 * progress and output; the rules and the conversion are in
 * src/tools/quantize.c). */
#ifndef PASADA_CMD_QUANTIZE_H
#define PASADA_CMD_QUANTIZE_H

/* argv[0] is the sub-command's name. Returns the exit status: 0 done,
 * 1 runtime failure (unreadable input, write error...), 2 usage. */
int cmd_quantize(int argc, char **argv);

#endif
