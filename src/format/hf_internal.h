/* hf_internal.h: what the Hugging Face folder reader's files share: the
 * checked JSON getters and the tokenizer half (hf_tokenizer.c). */
#ifndef PASADA_HF_INTERNAL_H
#define PASADA_HF_INTERNAL_H

#include "format/json.h"
#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"

/* Reads dir/name as JSON (st_read_json); when `optional` and the file does
 * not exist, *out is NULL and the result PASADA_OK. */
int hf_read_json(const char *dir, const char *name, bool optional, pj_value **out);
/* An object member that is a number / an integer in [lo, hi]; NULL/false when absent or null. */
const pj_value *hf_member(const pj_value *obj, const char *key);
/* Writes the tokenizer.ggml.* keys for the vocabulary of `n_vocab` entries
 * (config.json's vocab_size; 0: the tokenizer's own size) from the folder's
 * tokenizer.json and tokenizer_config.json (chat template included);
 * `config` supplies bos/eos ids when tokenizer_config.json names none. */
int hf_tokenizer_to_gguf(const char *dir, const pj_value *config, uint32_t n_vocab, gguf_writer *w);

#endif
