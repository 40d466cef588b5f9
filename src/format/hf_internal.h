/* hf_internal.h: what the Hugging Face folder reader's files share (hf.c,
 * hf_tokenizer.c, hf_bert.c, hf_families.c): the folder's context, the
 * checked JSON getters and the halves of the other files. */
#ifndef PASADA_HF_INTERNAL_H
#define PASADA_HF_INTERNAL_H

#include "format/json.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "format/safetensors.h"

/* Reads dir/name as JSON (st_read_json); when `optional` and the file does
 * not exist, *out is NULL and the result PASADA_OK. */
int hf_read_json(const char *dir, const char *name, bool optional, pj_value **out);
/* An object member that is a number / an integer in [lo, hi]; NULL/false when absent or null. */
const pj_value *hf_member(const pj_value *obj, const char *key);
/* Writes the tokenizer.ggml.* keys for the vocabulary of `n_vocab` entries
 * (config.json's vocab_size; 0: the tokenizer's own size) from the folder's
 * tokenizer.json and tokenizer_config.json (chat template included);
 * `config` supplies bos/eos ids when tokenizer_config.json names none;
 * `gemma4`: a SentencePiece-style BPE is written as llama.cpp's "gemma4"
 * vocabulary (merges, no space prefix) rather than "llama". */
int hf_tokenizer_to_gguf(const char *dir, const pj_value *config, uint32_t n_vocab, bool gemma4,
                         gguf_writer *w);

/* hf_bert.c: config.json (+ modules.json, 1_Pooling/config.json) of a
 * BERT folder to the bert.* keys (and token_type_count); *n_layer its depth. */
int hf_bert_config(const char *dir, const char *cfg_path, const pj_value *cfg, gguf_writer *w,
                   uint32_t *n_layer);
/* tokenizer.json's WordPiece vocabulary, or vocab.txt's when there is no
 * tokenizer.json (BERT's pipeline, cased or uncased), as the tokenizer.ggml.* keys
 * of llama.cpp's "bert" tokenizer. */
int hf_bert_tokenizer(const char *dir, gguf_writer *w);
/* llama.cpp's name of a BERT tensor into out; 0 mapped, 1 dropped
 * (position_ids, the pooler), -1 unknown. */
int hf_bert_tensor_name(const char *hf, uint32_t n_layer, char *out, size_t cap);

/* The state of one folder being read (hf.c), shared with hf_families.c. */
typedef struct {
  const char *dir;
  char cfg_path[4096];
  const pj_value *cfg;  /* config.json, or its text_config (text_config true) */
  const pj_value *root; /* config.json */
  const char *arch;  /* GGUF architecture name */
  bool llama, gemma; /* Q/K permutation; (1 + w) norms */
  bool bert;         /* hf_bert.c's config, tokenizer and names */
  bool mixtral;      /* experts under block_sparse_moe (w1, w3, w2) */
  bool oss;          /* gpt-oss: hf_gptoss.c's config and tensors */
  bool qwen35;       /* Qwen3.5: hf_qwen35.c's config and tensors */
  bool gemma4;       /* Gemma 4: hf_gemma4.c's config and tensors */
  bool text_config;  /* *ForConditionalGeneration: the text model of a multimodal folder */
  const st_tensor **mxfp4; /* gpt-oss: [layer][gate_up, down][blocks, scales], until repacked */
  uint32_t lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim; /* Qwen3.5's linear layers */
  uint32_t n_expert, n_ff_exp, n_embd; /* n_ff_exp: one expert's width (hf_experts_config) */
  /* Gemma 4: the first KV-sharing layer, the per-layer inputs' width, the
   * experts beside each dense FFN (not c->n_expert: those are stacked by hf.c) */
  uint32_t g4_first_shared, g4_per_layer, g4_experts;
  uint8_t *g4_no_v; /* [layer]: V is K's projection (a buffer of hf_keep_buf's) */
  const st_tensor **experts; /* [layer][gate, up, down][expert], until stacked */
  const st_tensor **fused;   /* [layer][gate_up_proj, down_proj] (transformers' 3-D experts) */
  uint32_t *fused_shard;     /* the shard each of `fused` is in */
  uint32_t n_head, n_head_kv, n_layer;
  uint32_t n_mtp; /* Qwen3.5's multi-token-prediction layers (mtp.*): 0 or 1, the last of n_layer */
  bool tied;
  st_file **shards;
  uint32_t n_shards;
  /* tensors used as stored, per shard */
  gguf_tensor **direct;
  uint64_t *n_direct;
  void **bufs; /* transformed tensors' data, until the image is written */
  uint64_t n_bufs;
} hf_ctx;

/* config.json's integer in [0, max] / finite number; absent: *out
 * untouched (an error when `required`). */
int hf_cfg_uint(hf_ctx *c, const char *key, bool required, uint64_t max, uint64_t *out);
int hf_cfg_num(hf_ctx *c, const pj_value *obj, const char *key, double *out, bool *found);
/* n bytes the context frees after the GGUF image is written; NULL: out of memory. */
void *hf_keep_buf(hf_ctx *c, size_t n);
/* hf_families.c: the experts' keys (no-op for other families; sets
 * c->n_expert) and Phi-3's (rope.dimension_count, the window, LongRoPE). */
int hf_experts_config(hf_ctx *c, gguf_writer *w);
/* `arch`.suffix = v. */
int hf_set_u32(hf_ctx *c, gguf_writer *w, const char *suffix, uint64_t v);
/* partial_rotary_factor (top level or in rope_parameters / rope_scaling;
 * absent: def) x head_dim as rope.dimension_count, into *rope_dim; an odd
 * or fractional count is an error. */
int hf_rope_dim(hf_ctx *c, gguf_writer *w, uint64_t head_dim, double def, uint64_t *rope_dim);
/* layer_types, when given, must be `every` in the layers i with (i + 1) %
 * period == 0 and `other` in the rest (`rule` says so in the error). */
int hf_layer_types(hf_ctx *c, uint64_t n_layer, uint64_t period, const char *every, const char *other,
                   const char *rule);
int hf_phi3_config(hf_ctx *c, gguf_writer *w, uint64_t head_dim, uint64_t n_ctx);
/* rope_parameters' llama3 scaling (rp) as the rope_freqs.weight tensor of
 * rope_dim / 2 frequency divisors. */
/* rope_parameters' YaRN (rp) as llama.cpp's rope.scaling keys (factor,
 * original context; beta_fast / beta_slow where not 32 / 1). */
int hf_yarn_rope(hf_ctx *c, gguf_writer *w, const pj_value *rp);
int hf_llama3_rope(hf_ctx *c, gguf_writer *w, const pj_value *rp, double theta, uint64_t rope_dim);

/* Adds tensor t as GGUF tensor `name` with hf.c's conventions (1-D as
 * F32, Gemma-style norms as 1 + w, llama's Q/K permuted, --quantize):
 * shard >= 0, t is one of that shard's (used as stored where it can be);
 * shard < 0, t->data is a buffer of hf_keep_buf's. */
int hf_add_tensor(hf_ctx *c, gguf_writer *w, int32_t shard, const st_tensor *t, const char *name);
/* Bytes per element of F32 / F16 / BF16. */
size_t hf_elem_size(uint32_t type);
/* t's values as F32, in a buffer of hf_keep_buf's; NULL: out of memory. */
float *hf_f32(hf_ctx *c, const st_tensor *t);
/* A 1-D / 3-D tensor under `name`: fills an in-memory st_tensor (dims in
 * GGUF order: ne[0] the row) over data; for hf_add_tensor(c, w, -1, ...). */
st_tensor hf_mem_tensor(const char *name, uint32_t type, uint32_t n_dims, int64_t ne0, int64_t ne1,
                        int64_t ne2, void *data);

/* Rows first .. first + n - 1 of every expert of t ([E][R][C], ne C, R, E)
 * as `name` [E][n][C]. */
int hf_expert_rows(hf_ctx *c, gguf_writer *w, const st_tensor *t, int64_t first, int64_t n,
                   const char *name);
/* Columns first, first + stride, ... (n of them) of every expert of t
 * ([E][R][C]), transposed: `name` [E][n][R] (x @ W products as W). */
int hf_expert_cols(hf_ctx *c, gguf_writer *w, const st_tensor *t, int64_t first, int64_t stride,
                   int64_t n, const char *name);
/* Layer l's fused experts (c->fused: transformers' gate_up_proj and
 * down_proj, both present, in either orientation) as llama.cpp's
 * ffn_{gate,up,down}_exps; shapes checked against config.json. */
int hf_fused_experts(hf_ctx *c, gguf_writer *w, uint32_t l);

/* hf_gptoss.c: gpt-oss (GptOssForCausalLM): its config keys (experts,
 * sliding window over every other layer, the clamped SwiGLU's limit) and
 * its tensors: *done true when t was one of its own (added). */
int hf_gptoss_config(hf_ctx *c, gguf_writer *w, uint64_t n_layer, uint64_t n_ff);
int hf_gptoss_tensor(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t, bool *done);
/* The MXFP4 experts hf_gptoss_tensor collected (transformers' *_blocks
 * [E][rows][cols / 32][16] and *_scales [E][rows][cols / 32], U8) as
 * llama.cpp's MXFP4 ffn_{gate,up,down}_exps; each layer's pair complete. */
int hf_gptoss_mxfp4(hf_ctx *c, gguf_writer *w);

/* hf_qwen35.c: Qwen3.5 (Qwen3_5ForCausalLM, the text model of
 * Qwen3_5ForConditionalGeneration): the linear-attention keys and layer
 * pattern, the partial and multi-section RoPE keys, and the linear layers'
 * tensors (value heads in llama.cpp's tiled order, A as -exp(A_log)). */
int hf_qwen35_config(hf_ctx *c, gguf_writer *w, uint64_t n_layer, uint64_t head_dim);
int hf_qwen35_tensor(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t, bool *done);
/* Qwen3.5's multi-token prediction (mtp.fc, mtp.pre_fc_norm_embedding,
 * mtp.pre_fc_norm_hidden, mtp.norm and the layer mtp.layers.0.*):
 * hf_qwen35_mtp_scan sets c->n_mtp (1 when the folder has mtp. tensors);
 * hf_qwen35_mtp_tensor adds one of its own tensors under llama.cpp's nextn
 * names (*done) or writes the layer's tensor's name as block n_layer - 1's
 * HF name into renamed (c->n_layer already counts it). */
int hf_qwen35_mtp_scan(hf_ctx *c);
int hf_qwen35_mtp_tensor(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t,
                         const char *name, char *renamed, size_t cap, bool *done);
/* hf_gemma4.c: Gemma 4 (Gemma4ForCausalLM, the text model of
 * Gemma4ForConditionalGeneration): the per-kind heads and RoPE, the layer
 * pattern, KV sharing, per-layer inputs and experts as llama.cpp's keys
 * (and rope_freqs); its tensors (*done true when t was one of the text
 * model's layers or per-layer inputs: added or dropped). */
int hf_gemma4_config(hf_ctx *c, gguf_writer *w, uint64_t n_layer, uint64_t n_ff, uint64_t vocab);
int hf_gemma4_tensor(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t, bool *done);

/* A tensor's name as the text model's: in a multimodal folder
 * (c->text_config) model.language_model.X as model.X, into buf, and NULL
 * for a tensor the text model drops (Qwen3.5's vision tower; Gemma 4's
 * vision and audio towers and their embedders); other names as they are. */
const char *hf_text_model_name(const hf_ctx *c, const char *name, char *buf, size_t cap);

#endif
