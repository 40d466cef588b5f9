/* hf_internal.h: what the Hugging Face folder reader's files share: the
 * checked JSON getters and the tokenizer half (hf_tokenizer.c). */
#ifndef PASADA_HF_INTERNAL_H
#define PASADA_HF_INTERNAL_H

#include "format/json.h"
#include <stdbool.h>
#include <stddef.h>
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

/* hf_bert.c: config.json (+ modules.json, 1_Pooling/config.json) of a
 * BERT folder to the bert.* keys (and token_type_count); *n_layer its depth. */
int hf_bert_config(const char *dir, const char *cfg_path, const pj_value *cfg, gguf_writer *w,
                   uint32_t *n_layer);
/* tokenizer.json's WordPiece vocabulary, or vocab.txt's when there is no
 * tokenizer.json (uncased BERT pipeline only), as the tokenizer.ggml.* keys
 * of llama.cpp's "bert" tokenizer. */
int hf_bert_tokenizer(const char *dir, gguf_writer *w);
/* llama.cpp's name of a BERT tensor into out; 0 mapped, 1 dropped
 * (position_ids, the pooler), -1 unknown. */
int hf_bert_tensor_name(const char *hf, uint32_t n_layer, char *out, size_t cap);

#endif
