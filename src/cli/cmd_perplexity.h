/* cmd_perplexity.h: the `pasada perplexity` sub-command (argument parsing
 * and output; the evaluation is src/tools/perplexity.c). */
#ifndef PASADA_CMD_PERPLEXITY_H
#define PASADA_CMD_PERPLEXITY_H

/* argv[0] is the sub-command's name. Returns the exit status: 0 done,
 * 1 runtime failure, 2 usage. */
int cmd_perplexity(int argc, char **argv);

#endif
