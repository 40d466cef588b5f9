/* embeddings.h: OpenAI's /v1/embeddings request (validated into token lists)
 * and response (the pooled vectors as floats or base64). */
#ifndef PASADA_SERVER_EMBEDDINGS_H
#define PASADA_SERVER_EMBEDDINGS_H

#include "server/openai.h"

typedef struct {
  int n;         /* inputs */
  int32_t **ids; /* each input's tokens (malloc'd) */
  int32_t *n_ids;
  int64_t n_tokens;   /* all inputs' tokens: usage.prompt_tokens */
  bool base64;        /* encoding_format "base64" */
  int32_t dimensions; /* values per embedding (n_embd unless a Matryoshka model truncates) */
  int32_t n_embd;     /* the model's width (set by the caller before rendering) */
  char *model;        /* echoed back */
} srv_embd_request;

/* Validates a body: input (a string, a list of strings, a list of token ids
 * or a list of lists of ids; none empty, none longer than the context, ids
 * in the vocabulary, at most 2048 inputs), encoding_format ("float" or
 * "base64"), dimensions (the model's width, or below it when mi->matryoshka),
 * model (echoed). A 400 naming the field otherwise; a 400 on a server that
 * is not an embedding server. */
bool srv_embd_parse(const srv_model_info *mi, const char *body, size_t len, srv_embd_request *r,
                    srv_error *e);
void srv_embd_request_free(srv_embd_request *r);
/* The response body for r->n pooled vectors of r->n_embd floats; NULL when
 * out of memory. */
char *srv_embd_response(const srv_embd_request *r, const float *const *vecs);

#endif
