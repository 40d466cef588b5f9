/* meta.c: the public metadata accessors of pasada.h: a loaded model's GGUF
 * metadata keys in file order, and each key's value as text (the format is
 * gguf_value_text's, src/format/gguf_text.c). */
#include <stdlib.h>

#include "base/base.h"
#include "model/model.h"

int64_t pasada_model_meta_count(const pasada_model *m) {
  return m && m->gguf ? (int64_t)m->gguf->n_kv : 0;
}

int pasada_model_meta_key(const pasada_model *m, int64_t i, const char **out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "metadata: no output given");
  *out = NULL;
  if (!m) return pa_error(PASADA_ERR_ARG, "metadata: no model");
  if (i < 0 || i >= pasada_model_meta_count(m))
    return pa_error(PASADA_ERR_ARG, "metadata: key index %lld is out of range [0, %lld)",
                    (long long)i, (long long)pasada_model_meta_count(m));
  *out = m->gguf->kv[i].key;
  return PASADA_OK;
}

int pasada_model_meta_value(const pasada_model *m, const char *key, char **out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "metadata: no output given");
  *out = NULL;
  if (!m || !key) return pa_error(PASADA_ERR_ARG, "metadata: no model or no key");
  const gguf_value *v = m->gguf ? gguf_get(m->gguf, key) : NULL;
  if (!v) return pa_error(PASADA_ERR_ARG, "metadata: the model has no key '%.200s'", key);
  return gguf_value_text(v, out);
}
