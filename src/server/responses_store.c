/* responses_store.c: finished Responses API responses kept in memory for
 * previous_response_id and GET /v1/responses/{id} (see responses.h). A
 * small array scanned linearly (a few hundred entries), each stamped with
 * its last use; one mutex for all. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "server/responses.h"

typedef struct {
  char id[64];
  char *response, *conversation;
  size_t bytes;
  uint64_t used; /* the store's clock at the last use */
} entry;

struct srv_resp_store {
  pthread_mutex_t mu;
  entry *e;
  int n, cap;
  size_t bytes, max_bytes;
  uint64_t clock;
};

srv_resp_store *srv_resp_store_create(int max_entries, size_t max_bytes) {
  srv_resp_store *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->cap = max_entries > 0 ? max_entries : 1;
  s->e = calloc((size_t)s->cap, sizeof *s->e);
  if (!s->e) {
    free(s);
    return NULL;
  }
  s->max_bytes = max_bytes;
  pthread_mutex_init(&s->mu, NULL);
  return s;
}

static void drop(srv_resp_store *s, int i) {
  s->bytes -= s->e[i].bytes;
  free(s->e[i].response);
  free(s->e[i].conversation);
  s->e[i] = s->e[--s->n];
}

void srv_resp_store_free(srv_resp_store *s) {
  if (!s) return;
  while (s->n > 0) drop(s, s->n - 1);
  free(s->e);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static int find(srv_resp_store *s, const char *id) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->e[i].id, id) == 0) return i;
  return -1;
}

static int oldest(srv_resp_store *s) {
  int k = 0;
  for (int i = 1; i < s->n; i++)
    if (s->e[i].used < s->e[k].used) k = i;
  return k;
}

void srv_resp_store_put(srv_resp_store *s, const char *id, char *response, char *conversation) {
  size_t bytes = strlen(id) + (response ? strlen(response) : 0) +
                 (conversation ? strlen(conversation) : 0) + sizeof(entry);
  if (!s || !response || !conversation || bytes > s->max_bytes || strlen(id) >= sizeof s->e->id) {
    free(response);
    free(conversation);
    return;
  }
  pthread_mutex_lock(&s->mu);
  int i = find(s, id);
  if (i >= 0) drop(s, i);
  while (s->n > 0 && (s->n == s->cap || s->bytes + bytes > s->max_bytes)) drop(s, oldest(s));
  entry *e = &s->e[s->n++];
  strcpy(e->id, id);
  e->response = response;
  e->conversation = conversation;
  e->bytes = bytes;
  e->used = ++s->clock;
  s->bytes += bytes;
  pthread_mutex_unlock(&s->mu);
}

static char *copy(srv_resp_store *s, const char *id, bool response) {
  if (!s) return NULL;
  pthread_mutex_lock(&s->mu);
  int i = find(s, id);
  char *out = NULL;
  if (i >= 0) {
    s->e[i].used = ++s->clock;
    out = strdup(response ? s->e[i].response : s->e[i].conversation);
  }
  pthread_mutex_unlock(&s->mu);
  return out;
}

char *srv_resp_store_response(srv_resp_store *s, const char *id) {
  return copy(s, id, true);
}

char *srv_resp_store_conversation(srv_resp_store *s, const char *id) {
  return copy(s, id, false);
}

bool srv_resp_store_delete(srv_resp_store *s, const char *id) {
  if (!s) return false;
  pthread_mutex_lock(&s->mu);
  int i = find(s, id);
  if (i >= 0) drop(s, i);
  pthread_mutex_unlock(&s->mu);
  return i >= 0;
}

int srv_resp_store_count(srv_resp_store *s) {
  if (!s) return 0;
  pthread_mutex_lock(&s->mu);
  int n = s->n;
  pthread_mutex_unlock(&s->mu);
  return n;
}
