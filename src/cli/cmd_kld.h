/* cmd_kld.h: the `pasada kld` sub-command (argument parsing and output;
 * the comparison is src/tools/kld.c). */
#ifndef PASADA_CMD_KLD_H
#define PASADA_CMD_KLD_H

/* argv[0] is the sub-command's name. Returns the exit status: 0 done,
 * 1 runtime failure, 2 usage. */
int cmd_kld(int argc, char **argv);

#endif
