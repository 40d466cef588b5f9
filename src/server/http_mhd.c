/* http_mhd.c: libmicrohttpd, loaded with dlopen when `pasada serve`
 * starts (http_internal.h: srv_mhd, the table the MHD_* names of the HTTP
 * files go through). */
#include <dlfcn.h>
#include <stdio.h>

#include "server/http_internal.h"

srv_mhd_table srv_mhd;

#ifndef PASADA_MHD_PATH
#define PASADA_MHD_PATH "libmicrohttpd.so"
#endif

int srv_mhd_load(void) {
  if (srv_mhd.loaded) return PASADA_OK;
  const char *names[] = {"libmicrohttpd.so.12", PASADA_MHD_PATH};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    lib = dlopen(names[i], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "pasada serve: cannot load libmicrohttpd (%s): %s\n", PASADA_MHD_PATH,
            dlerror());
    return PASADA_ERR_IO;
  }
#define MHD_SYM(field, name)                                          \
  if (!(*(void **)&srv_mhd.field = dlsym(lib, #name))) {              \
    fprintf(stderr, "pasada serve: libmicrohttpd lacks %s\n", #name); \
    dlclose(lib);                                                     \
    return PASADA_ERR_IO;                                             \
  }
  MHD_SYM(start_daemon, MHD_start_daemon)
  MHD_SYM(stop_daemon, MHD_stop_daemon)
  MHD_SYM(quiesce_daemon, MHD_quiesce_daemon)
  MHD_SYM(get_daemon_info, MHD_get_daemon_info)
  MHD_SYM(get_connection_info, MHD_get_connection_info)
  MHD_SYM(lookup_connection_value, MHD_lookup_connection_value)
  MHD_SYM(create_response_from_buffer, MHD_create_response_from_buffer)
  MHD_SYM(create_response_from_callback, MHD_create_response_from_callback)
  MHD_SYM(add_response_header, MHD_add_response_header)
  MHD_SYM(queue_response, MHD_queue_response)
  MHD_SYM(destroy_response, MHD_destroy_response)
#undef MHD_SYM
  srv_mhd.loaded = true; /* the library stays loaded for the process's life */
  return PASADA_OK;
}
