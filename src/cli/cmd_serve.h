/* cmd_serve.h: `pasada serve`, the OpenAI-compatible HTTP server. */
#ifndef PASADA_CMD_SERVE_H
#define PASADA_CMD_SERVE_H

/* argv[0] is "serve"; returns the process exit status. */
int cmd_serve(int argc, char **argv);

#endif
