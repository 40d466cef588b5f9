/* version.c: the library's version as compiled in, so a program can compare
 * it with the PASADA_VERSION_* of the header it was built against. */
#include "pasada.h"

const char *pasada_version(void) { return PASADA_VERSION_STRING; }
