/* cmd_bench.h: the `pasada bench` sub-command (argument parsing; the work
 * is in src/tools/bench.c). */
#ifndef PASADA_CMD_BENCH_H
#define PASADA_CMD_BENCH_H

/* argv[0] is the sub-command's name ("bench"). Returns the exit status:
 * 0 done, 1 runtime failure (model missing, out of memory...), 2 usage. */
int cmd_bench(int argc, char **argv);

#endif
