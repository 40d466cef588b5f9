/* cmd_profile.h: the `pasada profile` sub-command (argument parsing; the
 * work is in src/tools/profile.c). */
#ifndef PASADA_CMD_PROFILE_H
#define PASADA_CMD_PROFILE_H

/* argv[0] is the sub-command's name ("profile"). Returns the exit status:
 * 0 done, 1 runtime failure (model missing, unwritable output...), 2 usage. */
int cmd_profile(int argc, char **argv);

#endif
