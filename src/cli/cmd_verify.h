/* cmd_verify.h: `pasada verify`. */
#ifndef PASADA_CMD_VERIFY_H
#define PASADA_CMD_VERIFY_H

int cmd_verify(int argc, char **argv);

#endif
