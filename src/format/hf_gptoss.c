/* hf_gptoss.c: gpt-oss folders (GptOssForCausalLM) as llama.cpp's
 * converter writes them: the experts' keys, the window over every other
 * layer, and the tensors transformers stores its own way: the attention
 * sinks, the router with its bias, and the experts as x @ W products
 * (gate_up_proj [expert][n_embd][2 ff], gate and up interleaved column by
 * column; down_proj [expert][ff][n_embd]) split and transposed into
 * llama.cpp's ffn_{gate,up,down}_exps [expert][rows][cols]; or, as the
 * released checkpoints store them, in MXFP4 (*_blocks and *_scales, rows
 * of the transposed products: gate and up interleaved row by row),
 * repacked into llama.cpp's MXFP4 blocks. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/hf_internal.h"
#include "quant/quant.h"

/* The experts (num_local_experts, num_experts_per_tok; each
 * intermediate_size wide), the sliding window of the even layers
 * (layer_types, when given, must say so: pasada runs that pattern), and
 * the clamped SwiGLU's limit and alpha (7 and 1.702, the ones pasada runs). */
int hf_gptoss_config(hf_ctx *c, gguf_writer *w, uint64_t n_layer, uint64_t n_ff) {
  uint64_t n_expert = 0, n_used = 0, window = 0;
  int rc;
  if ((rc = hf_cfg_uint(c, "num_local_experts", true, 4096, &n_expert)) ||
      (rc = hf_cfg_uint(
           c,
           hf_member(c->cfg, "num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token",
           true, 4096, &n_used)) ||
      (rc = hf_cfg_uint(c, "sliding_window", true, 1 << 24, &window)))
    return rc;
  if (n_expert == 0 || n_used == 0 || n_used > n_expert || window == 0)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %" PRIu64 " experts of which %" PRIu64
                    " per token, sliding_window %" PRIu64
                    ": need 1 <= per token <= experts and a window >= 1",
                    c->cfg_path, n_expert, n_used, window);
  if ((rc = hf_layer_types(c, n_layer, 2, "full_attention", "sliding_attention",
                           "gpt-oss runs windowed attention in the even layers, full attention in "
                           "the odd ones")))
    return rc;
  double limit = 7, alpha = 1.702;
  bool found = false;
  if ((rc = hf_cfg_num(c, c->cfg, "swiglu_limit", &limit, &found)) ||
      (rc = hf_cfg_num(c, c->cfg, "swiglu_alpha", &alpha, &found)))
    return rc;
  if (limit != 7 || alpha != 1.702)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: swiglu_limit %g, swiglu_alpha %g are not supported (7, 1.702)",
                    c->cfg_path, limit, alpha);
  c->n_expert = (uint32_t)n_expert;
  if ((rc = hf_set_u32(c, w, "attention.sliding_window", window)) ||
      (rc = hf_set_u32(c, w, "expert_count", n_expert)) ||
      (rc = hf_set_u32(c, w, "expert_used_count", n_used)))
    return rc;
  return hf_set_u32(c, w, "expert_feed_forward_length", n_ff);
}

/* An expert tensor of n_dims dims whose outermost is the c->n_expert
 * experts and whose innermost is even when `even`; else the error. */
static int check_experts(const hf_ctx *c, const st_tensor *t, uint32_t n_dims, bool even) {
  if (t->n_dims != n_dims || t->ne[n_dims - 1] != (int64_t)c->n_expert || (even && t->ne[0] % 2))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tensor '%.100s' is not [%u experts]%s%s (%u dims: %" PRId64 " x %" PRId64
                    " x %" PRId64 ", innermost first)",
                    c->dir, t->name, c->n_expert, n_dims == 3 ? "[rows]" : "",
                    even ? "[an even count: gate and up interleaved]" : "[values]", t->n_dims,
                    t->ne[0], t->ne[1], t->ne[2]);
  return PASADA_OK;
}

/* gate_up_proj [E][cols][2 ff] (gate the even, up the odd columns of x @ W)
 * as ffn_gate_exps and ffn_up_exps [E][ff][cols]. */
static int split_gate_up(hf_ctx *c, gguf_writer *w, const st_tensor *t, unsigned layer) {
  for (int k = 0; k < 2; k++) {
    char name[64];
    snprintf(name, sizeof name, "blk.%u.%s.weight", layer, k ? "ffn_up_exps" : "ffn_gate_exps");
    int rc = hf_expert_cols(c, w, t, k, 2, t->ne[0] / 2, name);
    if (rc) return rc;
  }
  return PASADA_OK;
}

/* down_proj [E][ff][n_embd] as ffn_down_exps [E][n_embd][ff]. */
static int transpose_down(hf_ctx *c, gguf_writer *w, const st_tensor *t, unsigned layer) {
  char name[64];
  snprintf(name, sizeof name, "blk.%u.ffn_down_exps.weight", layer);
  return hf_expert_cols(c, w, t, 0, 1, t->ne[0], name);
}

/* The experts' biases as F32 tables: gate_up_proj_bias [E][2 ff] split
 * into ffn_gate_exps.bias and ffn_up_exps.bias [E][ff], down_proj_bias
 * [E][n_embd] as ffn_down_exps.bias. */
static int expert_biases(hf_ctx *c, gguf_writer *w, const st_tensor *t, unsigned layer,
                         bool gate_up) {
  float *b = hf_f32(c, t);
  if (!b) return pa_error(PASADA_ERR_NOMEM, "out of memory for '%s'", t->name);
  const int64_t width = t->ne[0], n_e = t->ne[1];
  char name[64];
  if (!gate_up) {
    snprintf(name, sizeof name, "blk.%u.ffn_down_exps.bias", layer);
    st_tensor m = hf_mem_tensor(name, PA_TYPE_F32, 2, width, n_e, 1, b);
    return hf_add_tensor(c, w, -1, &m, name);
  }
  for (int k = 0; k < 2; k++) {
    float *dst = hf_keep_buf(c, (size_t)(n_e * (width / 2)) * sizeof *dst);
    if (!dst) return pa_error(PASADA_ERR_NOMEM, "out of memory for '%s'", t->name);
    for (int64_t e = 0; e < n_e; e++)
      for (int64_t f = 0; f < width / 2; f++) dst[e * (width / 2) + f] = b[e * width + 2 * f + k];
    snprintf(name, sizeof name, "blk.%u.%s.bias", layer, k ? "ffn_up_exps" : "ffn_gate_exps");
    st_tensor m = hf_mem_tensor(name, PA_TYPE_F32, 2, width / 2, n_e, 1, dst);
    int rc = hf_add_tensor(c, w, -1, &m, name);
    if (rc) return rc;
  }
  return PASADA_OK;
}

int hf_gptoss_tensor(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t, bool *done) {
  static const struct {
    const char *hf, *gguf;
  } renamed[] = {{"self_attn.sinks", "attn_sinks.weight"},
                 {"self_attn.o_proj.bias", "attn_output.bias"},
                 {"post_attention_layernorm.weight", "post_attention_norm.weight"},
                 {"mlp.router.weight", "ffn_gate_inp.weight"},
                 {"mlp.router.bias", "ffn_gate_inp.bias"}};
  unsigned layer;
  int at = 0;
  *done = false;
  if (sscanf(t->name, "model.layers.%u.%n", &layer, &at) != 1 || at == 0 || layer >= c->n_layer)
    return PASADA_OK; /* the generic names (and their errors) */
  const char *rest = t->name + at;
  const bool experts = !strncmp(rest, "mlp.experts.", 12);
  size_t k = 0;
  while (k < sizeof renamed / sizeof renamed[0] && strcmp(rest, renamed[k].hf)) k++;
  if (k == sizeof renamed / sizeof renamed[0] && !experts) return PASADA_OK;
  *done = true;
  const char *part = rest + 12;
  const size_t plen = strlen(part);
  const bool blocks = plen > 7 && !strcmp(part + plen - 7, "_blocks"),
             mxfp4 = experts && (blocks || (plen > 7 && !strcmp(part + plen - 7, "_scales")));
  if (t->type >= ST_TYPE_I64 && !mxfp4)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: tensor '%.100s' has dtype %s (supported: F32, F16, BF16)", c->dir, t->name,
                    st_type_name(t->type));
  if (k < sizeof renamed / sizeof renamed[0]) {
    char name[64];
    snprintf(name, sizeof name, "blk.%u.%s", layer, renamed[k].gguf);
    return hf_add_tensor(c, w, (int32_t)shard, t, name);
  }
  int rc;
  if (mxfp4) { /* repacked once both halves are known (hf_gptoss_mxfp4) */
    const int kind = !strncmp(part, "gate_up_proj_", 13) ? 0
                     : !strncmp(part, "down_proj_", 10)  ? 1
                                                         : -1;
    if (kind < 0 || (kind == 0 ? plen != 19 : plen != 16) || t->type != ST_TYPE_U8)
      return pa_error(
          PASADA_ERR_FORMAT,
          "%s: tensor '%.100s' is not gate_up_proj or down_proj's MXFP4 blocks or scales "
          "(U8; it is %s)",
          c->dir, t->name, st_type_name(t->type));
    if (!c->mxfp4 && !(c->mxfp4 = calloc((size_t)c->n_layer * 4, sizeof *c->mxfp4)))
      return pa_error(PASADA_ERR_NOMEM, "out of memory");
    c->mxfp4[(size_t)layer * 4 + (size_t)kind * 2 + !blocks] = t;
    return PASADA_OK;
  }
  if (!strcmp(part, "gate_up_proj"))
    return (rc = check_experts(c, t, 3, true)) ? rc : split_gate_up(c, w, t, layer);
  if (!strcmp(part, "down_proj"))
    return (rc = check_experts(c, t, 3, false)) ? rc : transpose_down(c, w, t, layer);
  if (!strcmp(part, "gate_up_proj_bias"))
    return (rc = check_experts(c, t, 2, true)) ? rc : expert_biases(c, w, t, layer, true);
  if (!strcmp(part, "down_proj_bias"))
    return (rc = check_experts(c, t, 2, false)) ? rc : expert_biases(c, w, t, layer, false);
  return pa_error(PASADA_ERR_UNSUPPORTED, "%s: tensor '%.100s' has no place in a gpt-oss model",
                  c->dir, t->name);
}

/* One HF MXFP4 row (g groups of 16 bytes: byte j holds elements 2j (low
 * nibble) and 2j + 1 (high), with its E8M0 scale per group) as g of
 * llama.cpp's blocks (the scale, then qs[j] = element j | element j + 16
 * << 4; the same E2M1 codes and exponent). */
static void repack_row(const uint8_t *blk, const uint8_t *scale, int64_t g, block_mxfp4 *out) {
  for (int64_t k = 0; k < g; k++) {
    uint8_t v[QK_MXFP4];
    for (int j = 0; j < QK_MXFP4 / 2; j++) {
      v[2 * j] = blk[k * 16 + j] & 0x0F;
      v[2 * j + 1] = blk[k * 16 + j] >> 4;
    }
    out[k].e = scale[k];
    for (int j = 0; j < QK_MXFP4 / 2; j++)
      out[k].qs[j] = (uint8_t)(v[j] | v[j + QK_MXFP4 / 2] << 4);
  }
}

int hf_gptoss_mxfp4(hf_ctx *c, gguf_writer *w) {
  for (uint32_t l = 0; c->mxfp4 && l < c->n_layer; l++)
    for (int kind = 0; kind < 2; kind++) {
      const st_tensor *b = c->mxfp4[(size_t)l * 4 + (size_t)kind * 2],
                      *s = c->mxfp4[(size_t)l * 4 + (size_t)kind * 2 + 1];
      const char *what = kind ? "down_proj" : "gate_up_proj";
      if (!b && !s) continue; /* the model loader names what is missing */
      /* blocks [E][rows][g][16], scales [E][rows][g] */
      if (!b || !s || b->n_dims != 4 || b->ne[0] != 16 || s->n_dims != 3 || b->ne[1] != s->ne[0] ||
          b->ne[2] != s->ne[1] || b->ne[3] != s->ne[2] || b->ne[3] != (int64_t)c->n_expert ||
          (kind == 0 && b->ne[2] % 2))
        return pa_error(
            PASADA_ERR_FORMAT,
            "%s: layer %u's MXFP4 %s needs %s_blocks [%u experts][rows][groups][16] and "
            "%s_scales [%u experts][rows][groups] (U8%s)",
            c->dir, l, what, what, c->n_expert, what, c->n_expert,
            kind == 0 ? "; an even count of rows" : "");
      const int64_t g = b->ne[1], rows = b->ne[2], n_e = b->ne[3], cols = g * QK_MXFP4;
      const int64_t out_rows = kind == 0 ? rows / 2 : rows;
      const size_t row_bytes = (size_t)g * sizeof(block_mxfp4);
      for (int half = 0; half < (kind == 0 ? 2 : 1); half++) {
        block_mxfp4 *dst = hf_keep_buf(c, row_bytes * (size_t)(out_rows * n_e));
        if (!dst) return pa_error(PASADA_ERR_NOMEM, "out of memory for '%s'", b->name);
        for (int64_t e = 0; e < n_e; e++)
          for (int64_t r = 0; r < out_rows; r++) {
            /* gate_up: gate the even rows, up the odd ones */
            const int64_t src = e * rows + (kind == 0 ? 2 * r + half : r);
            repack_row(b->data + (size_t)src * (size_t)g * 16, s->data + (size_t)src * (size_t)g, g,
                       dst + (size_t)(e * out_rows + r) * (size_t)g);
          }
        char name[64];
        snprintf(name, sizeof name, "blk.%u.%s.weight", l,
                 kind   ? "ffn_down_exps"
                 : half ? "ffn_up_exps"
                        : "ffn_gate_exps");
        const int64_t ne[4] = {cols, out_rows, n_e, 1};
        int rc = gguf_writer_add_tensor(w, name, PA_TYPE_MXFP4, 3, ne, dst,
                                        row_bytes * (size_t)(out_rows * n_e));
        if (rc) return rc;
      }
    }
  return PASADA_OK;
}
