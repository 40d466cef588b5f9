/* main.c: the pasada command line: sub-command dispatch and argument parsing. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: pasada <command> [options]\n");
    return 2;
  }
  fprintf(stderr, "pasada: unknown command '%s'\n", argv[1]);
  return 2;
}
