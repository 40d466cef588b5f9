/* hf.c: a Hugging Face model folder as a GGUF view: config.json to
 * llama.cpp's hyper-parameter keys, the safetensors tensors to llama.cpp's
 * names and conventions (the transforms convert_hf_to_gguf.py applies), the
 * metadata and the transformed tensors in an in-memory GGUF image, and the
 * tensors used as stored left in the mapped safetensors files. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "base/base.h"
#include "format/hf.h"
#include "format/hf_internal.h"
#include "format/safetensors.h"
#include "quant/quant.h"

bool hf_is_dir(const char *path) {
  struct stat sb;
  return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int hf_read_json(const char *dir, const char *name, bool optional, pj_value **out) {
  *out = NULL;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    return pa_error(PASADA_ERR_ARG, "%s: path too long", dir);
  struct stat sb;
  if (stat(path, &sb) != 0) {
    if (optional && errno == ENOENT) return PASADA_OK;
    return pa_error(PASADA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  }
  return st_read_json(path, out);
}

const pj_value *hf_member(const pj_value *obj, const char *key) {
  const pj_value *j = pj_is_obj(obj) ? pj_get(obj, key) : NULL;
  return j && !pj_is_null(j) ? j : NULL;
}

/* ---- config.json ---- */

int hf_cfg_uint(hf_ctx *c, const char *key, bool required, uint64_t max, uint64_t *out) {
  const pj_value *j = hf_member(c->cfg, key);
  if (!j) {
    if (required)
      return pa_error(PASADA_ERR_FORMAT, "%s: required key '%s' is missing", c->cfg_path, key);
    return PASADA_OK;
  }
  double d = pj_is_num(j) ? j->valuedouble : -1;
  if (!(d >= 0 && d <= (double)max) || floor(d) != d)
    return pa_error(PASADA_ERR_FORMAT, "%s: '%s' is not an integer in [0, %" PRIu64 "]",
                    c->cfg_path, key, max);
  *out = (uint64_t)d;
  return PASADA_OK;
}

int hf_cfg_num(hf_ctx *c, const pj_value *obj, const char *key, double *out, bool *found) {
  const pj_value *j = hf_member(obj, key);
  *found = j != NULL;
  if (!j) return PASADA_OK;
  if (!pj_is_num(j) || !isfinite(j->valuedouble))
    return pa_error(PASADA_ERR_FORMAT, "%s: '%s' is not a number", c->cfg_path, key);
  *out = j->valuedouble;
  return PASADA_OK;
}

static const struct {
  const char *hf, *gguf;
} arch_names[] = {{"LlamaForCausalLM", "llama"},
                  {"MistralForCausalLM", "llama"},
                  {"Qwen2ForCausalLM", "qwen2"},
                  {"Qwen3ForCausalLM", "qwen3"},
                  {"Gemma3ForCausalLM", "gemma3"},
                  {"Gemma2ForCausalLM", "gemma2"},
                  {"Qwen3MoeForCausalLM", "qwen3moe"},
                  {"Phi3ForCausalLM", "phi3"},
                  {"MixtralForCausalLM", "llama"},
                  {"BertModel", "bert"},
                  {"GptOssForCausalLM", "gpt-oss"},
                  {"Qwen3_5ForCausalLM", "qwen35"},
                  {"Qwen3_5ForConditionalGeneration", "qwen35"},
                  {"Qwen3_5MoeForCausalLM", "qwen35moe"},
                  {"Qwen3_5MoeForConditionalGeneration", "qwen35moe"},
                  {"Gemma4ForCausalLM", "gemma4"},
                  {"Gemma4ForConditionalGeneration", "gemma4"},
                  {"llama", "llama"},
                  {"mistral", "llama"},
                  {"qwen2", "qwen2"},
                  {"qwen3", "qwen3"},
                  {"gemma3_text", "gemma3"},
                  {"gemma2", "gemma2"},
                  {"qwen3_moe", "qwen3moe"},
                  {"phi3", "phi3"},
                  {"mixtral", "llama"},
                  {"bert", "bert"},
                  {"gpt_oss", "gpt-oss"},
                  {"qwen3_5_text", "qwen35"},
                  {"qwen3_5", "qwen35"},
                  {"qwen3_5_moe_text", "qwen35moe"},
                  {"qwen3_5_moe", "qwen35moe"},
                  {"gemma4_text", "gemma4"},
                  {"gemma4", "gemma4"}};

/* The multimodal architectures whose text model pasada runs (its keys in
 * text_config, its tensors under model.language_model.). */
static const char *const text_of[] = {"Qwen3_5ForConditionalGeneration",    "qwen3_5",
                                      "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe",
                                      "Gemma4ForConditionalGeneration",     "gemma4"};

const char *hf_text_model_name(const hf_ctx *c, const char *name, char *buf, size_t cap) {
  static const char lm[] = "model.language_model.";
  if (!c->text_config) return name;
  static const char *const dropped[] = {"model.visual.", "model.vision_tower.",
                                        "model.audio_tower.", "model.embed_vision.",
                                        "model.embed_audio."};
  if (!strncmp(name, lm, sizeof lm - 1)) {
    snprintf(buf, cap, "model.%s", name + sizeof lm - 1);
    return buf;
  }
  for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
    if (!strncmp(name, dropped[i], strlen(dropped[i]))) return NULL;
  return name;
}

static int pick_arch(hf_ctx *c) {
  const pj_value *archs = hf_member(c->cfg, "architectures"), *mt = hf_member(c->cfg, "model_type");
  const char *name = NULL;
  if (pj_is_arr(archs) && pj_is_str(pj_at(archs, 0)))
    name = pj_at(archs, 0)->valuestring;
  else if (pj_is_str(mt))
    name = mt->valuestring;
  if (!name)
    return pa_error(PASADA_ERR_FORMAT, "%s: names no architecture (architectures or model_type)",
                    c->cfg_path);
  for (size_t i = 0; i < sizeof arch_names / sizeof arch_names[0]; i++)
    if (!strcmp(name, arch_names[i].hf)) c->arch = arch_names[i].gguf;
  if (!c->arch)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: architecture '%.80s' is not supported (supported: LlamaForCausalLM, "
                    "MistralForCausalLM, "
                    "Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM, Gemma2ForCausalLM, "
                    "Qwen3MoeForCausalLM, Phi3ForCausalLM, "
                    "MixtralForCausalLM, BertModel, GptOssForCausalLM, Qwen3_5ForCausalLM, "
                    "Qwen3_5ForConditionalGeneration, Qwen3_5MoeForCausalLM, "
                    "Qwen3_5MoeForConditionalGeneration, Gemma4ForCausalLM, "
                    "Gemma4ForConditionalGeneration)",
                    c->cfg_path, name);
  c->llama = !strcmp(c->arch, "llama");
  c->gemma = !strcmp(c->arch, "gemma3") || !strcmp(c->arch, "gemma2");
  c->bert = !strcmp(c->arch, "bert");
  c->mixtral = !strcmp(name, "MixtralForCausalLM") || !strcmp(name, "mixtral");
  c->oss = !strcmp(c->arch, "gpt-oss");
  c->qwen35 = !strcmp(c->arch, "qwen35") || !strcmp(c->arch, "qwen35moe");
  c->gemma4 = !strcmp(c->arch, "gemma4");
  bool text = false;
  for (size_t i = 0; i < sizeof text_of / sizeof text_of[0]; i++) text |= !strcmp(name, text_of[i]);
  if (text) {
    /* the text model's hyper-parameters are text_config's */
    const pj_value *tc = hf_member(c->cfg, "text_config");
    if (!pj_is_obj(tc))
      return pa_error(PASADA_ERR_FORMAT, "%s: %s has no text_config object", c->cfg_path, name);
    c->cfg = tc;
    c->text_config = true;
  }
  return PASADA_OK;
}

/* rope_theta: a key of its own (older configs) or inside rope_parameters,
 * per attention kind for Gemma 3 (transformers 5); the scaling in
 * rope_parameters (transformers 5) or rope_scaling (older configs): linear
 * (the scaling keys), llama3 (rope_freqs factors over rope_dim). */
static int rope_params(hf_ctx *c, gguf_writer *w, char *key, size_t cap, uint64_t rope_dim) {
  const pj_value *rp = hf_member(c->cfg, "rope_parameters");
  if (!rp) rp = hf_member(c->cfg, "rope_scaling");
  const pj_value *full = hf_member(rp, "full_attention"),
                 *slide = hf_member(rp, "sliding_attention");
  const pj_value *rp_main = full ? full : rp;
  double theta = 0, theta_swa = 0;
  bool f1 = false, f2 = false;
  int rc;
  if ((rc = hf_cfg_num(c, c->cfg, "rope_theta", &theta, &f1))) return rc;
  if (!f1 && (rc = hf_cfg_num(c, rp_main, "rope_theta", &theta, &f1))) return rc;
  if (f1) {
    snprintf(key, cap, "%s.rope.freq_base", c->arch);
    if ((rc = gguf_writer_set_f32(w, key, (float)theta))) return rc;
  }
  if ((rc = hf_cfg_num(c, c->cfg, "rope_local_base_freq", &theta_swa, &f2))) return rc;
  if (!f2 && (rc = hf_cfg_num(c, slide, "rope_theta", &theta_swa, &f2))) return rc;
  if (f2 && !strcmp(c->arch, "gemma3")) {
    snprintf(key, cap, "%s.rope.freq_base_swa", c->arch);
    if ((rc = gguf_writer_set_f32(w, key, (float)theta_swa))) return rc;
  }
  const pj_value *type = hf_member(rp_main, "rope_type");
  if (!type) type = hf_member(rp_main, "type");
  if (type && !pj_is_str(type))
    return pa_error(PASADA_ERR_FORMAT, "%s: rope_type is not a string", c->cfg_path);
  if (!type || !strcmp(type->valuestring, "default")) return PASADA_OK;
  if (!strcmp(c->arch, "phi3") &&
      (!strcmp(type->valuestring, "longrope") || !strcmp(type->valuestring, "su")))
    return PASADA_OK; /* phi3_config */
  if (!strcmp(type->valuestring, "llama3") && !full && strcmp(c->arch, "phi3") != 0)
    return hf_llama3_rope(c, w, rp_main, f1 ? theta : 10000, rope_dim);
  if (!strcmp(type->valuestring, "yarn") && !full) return hf_yarn_rope(c, w, rp_main);
  if (strcmp(type->valuestring, "linear") != 0)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: rope scaling '%.40s' is not supported (default, linear, llama3, yarn%s)",
                    c->cfg_path, type->valuestring,
                    !strcmp(c->arch, "phi3") ? ", longrope" : "");
  double factor = 0;
  bool ff = false;
  if ((rc = hf_cfg_num(c, rp_main, "factor", &factor, &ff))) return rc;
  if (!ff)
    return pa_error(PASADA_ERR_FORMAT, "%s: linear rope scaling without a factor", c->cfg_path);
  snprintf(key, cap, "%s.rope.scaling.type", c->arch);
  if ((rc = gguf_writer_set_string(w, key, "linear"))) return rc;
  snprintf(key, cap, "%s.rope.scaling.factor", c->arch);
  return gguf_writer_set_f32(w, key, (float)factor);
}

static int config_to_gguf(hf_ctx *c, gguf_writer *w, uint32_t *n_vocab) {
  int rc;
  if ((rc = pick_arch(c))) return rc;
  if (c->bert) {
    *n_vocab = 0;
    if ((rc = hf_bert_config(c->dir, c->cfg_path, c->cfg, w, &c->n_layer))) return rc;
    const pj_value *name = hf_member(c->cfg, "_name_or_path");
    const char *base = strrchr(c->dir, '/');
    return gguf_writer_set_string(w, "general.name",
                                  base && base[1]   ? base + 1
                                  : pj_is_str(name) ? name->valuestring
                                                    : c->dir);
  }
  uint64_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0, n_ctx = 0, head_dim = 0,
           vocab = 0;
  uint64_t window = 0, qpas = 0;
  if ((rc = hf_cfg_uint(c, "num_hidden_layers", true, 4096, &n_layer)) ||
      (rc = hf_cfg_uint(c, "hidden_size", true, 1 << 20, &n_embd)) ||
      /* qwen35moe: no dense FFN; its FFN width is the shared expert's */
      (rc = hf_cfg_uint(c, strcmp(c->arch, "qwen35moe") ? "intermediate_size" : "shared_expert_intermediate_size",
                        true, 1 << 24, &n_ff)) ||
      (rc = hf_cfg_uint(c, "num_attention_heads", true, 1 << 16, &n_head)) ||
      (rc = hf_cfg_uint(c, "num_key_value_heads", false, 1 << 16, &n_head_kv)) ||
      (rc = hf_cfg_uint(c, "max_position_embeddings", false, UINT32_MAX, &n_ctx)) ||
      (rc = hf_cfg_uint(c, "head_dim", false, 1 << 16, &head_dim)) ||
      (rc = hf_cfg_uint(c, "vocab_size", false, INT32_MAX, &vocab)))
    return rc;
  if (n_layer == 0 || n_head == 0)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: num_hidden_layers and num_attention_heads must be positive", c->cfg_path);
  if (!n_head_kv) n_head_kv = n_head;
  c->n_layer = (uint32_t)n_layer, c->n_head = (uint32_t)n_head, c->n_head_kv = (uint32_t)n_head_kv;
  c->n_embd = (uint32_t)n_embd;
  const pj_value *tie = hf_member(c->cfg, "tie_word_embeddings");
  if (!tie && c->text_config) tie = hf_member(c->root, "tie_word_embeddings");
  if (tie && !pj_is_bool(tie))
    return pa_error(PASADA_ERR_FORMAT, "%s: tie_word_embeddings is not a boolean", c->cfg_path);
  c->tied = tie ? pj_is_true(tie) : c->gemma || c->gemma4;
  char key[256];
  const char *a = c->arch;
#define SET_U32(suffix, v)                                            \
  do {                                                                \
    snprintf(key, sizeof key, "%s." suffix, a);                       \
    if ((rc = gguf_writer_set_u32(w, key, (uint32_t)(v)))) return rc; \
  } while (0)
  if ((rc = gguf_writer_set_string(w, "general.architecture", a))) return rc;
  SET_U32("block_count", n_layer);
  if (n_ctx) SET_U32("context_length", n_ctx);
  SET_U32("embedding_length", n_embd);
  SET_U32("feed_forward_length", n_ff);
  SET_U32("attention.head_count", n_head);
  SET_U32("attention.head_count_kv", n_head_kv);
  if (head_dim) {
    SET_U32("attention.key_length", head_dim);
    SET_U32("attention.value_length", head_dim);
  }
  if (vocab) SET_U32("vocab_size", vocab);
  if ((rc = hf_experts_config(c, w))) return rc;
  if (c->oss && (rc = hf_gptoss_config(c, w, n_layer, n_ff))) return rc;
  if (c->qwen35 && (rc = hf_qwen35_config(c, w, n_layer, head_dim ? head_dim : n_embd / n_head)))
    return rc;
  if (c->gemma4 && (rc = hf_gemma4_config(c, w, n_layer, n_ff, vocab))) return rc;
  double eps = 0;
  bool found = false;
  if ((rc = hf_cfg_num(c, c->cfg, "rms_norm_eps", &eps, &found))) return rc;
  if (found) {
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    if ((rc = gguf_writer_set_f32(w, key, (float)eps))) return rc;
  }
  if (!c->gemma4 &&
      (rc = rope_params(c, w, key, sizeof key, head_dim ? head_dim : n_embd / n_head)))
    return rc; /* Gemma 4's per kind: hf_gemma4_config */
  if (!strcmp(a, "phi3") &&
      (rc = hf_phi3_config(c, w, head_dim ? head_dim : n_embd / n_head, n_ctx)))
    return rc;
  if (c->gemma) {
    /* Gemma 2: local layers every other one from the first, soft-capped
     * scores and logits; Gemma 3: five local layers in six */
    const bool g2 = !strcmp(a, "gemma2");
    const uint32_t def_period = g2 ? 2 : 6;
    if ((rc = hf_cfg_uint(c, "sliding_window", !g2, 1 << 24, &window))) return rc;
    if (window) SET_U32("attention.sliding_window", window);
    if (g2) {
      static const char *caps[] = {"attn_logit_softcapping", "final_logit_softcapping"};
      for (int i = 0; i < 2; i++) {
        double cap = 0;
        bool fc = false;
        if ((rc = hf_cfg_num(c, c->cfg, caps[i], &cap, &fc))) return rc;
        if (fc && !(cap >= 0 && cap < 1e6))
          return pa_error(PASADA_ERR_FORMAT, "%s: '%s' %g is out of range [0, 1e6)", c->cfg_path,
                          caps[i], cap);
        snprintf(key, sizeof key, "%s.%s", a, caps[i]);
        if (fc && (rc = gguf_writer_set_f32(w, key, (float)cap))) return rc;
      }
    }
    /* the loader scales scores by 1/sqrt(head_dim) (n_embd / n_head for the 27B shape) */
    if ((rc = hf_cfg_uint(c, "query_pre_attn_scalar", false, 1 << 20, &qpas))) return rc;
    uint64_t hd = head_dim ? head_dim : n_embd / n_head,
             want = n_layer == (g2 ? 46 : 62) ? n_embd / n_head : hd;
    if (qpas && qpas != want)
      return pa_error(PASADA_ERR_UNSUPPORTED,
                      "%s: query_pre_attn_scalar %" PRIu64 " is not supported (expected %" PRIu64
                      ")",
                      c->cfg_path, qpas, want);
    const pj_value *lt = hf_member(c->cfg, "layer_types");
    uint64_t period = 0; /* older configs: every period-th layer global */
    if (!lt && (rc = hf_cfg_uint(c, "sliding_window_pattern", false, 1 << 16, &period))) return rc;
    if (period && period != def_period) SET_U32("attention.sliding_window_pattern", period);
    if (lt) {
      if (!pj_is_arr(lt) || (uint64_t)pj_size(lt) != n_layer)
        return pa_error(PASADA_ERR_FORMAT, "%s: layer_types is not an array of %" PRIu64 " entries",
                        c->cfg_path, n_layer);
      bool *swa = calloc(n_layer, sizeof *swa), periodic = true;
      if (!swa) return pa_error(PASADA_ERR_NOMEM, "out of memory");
      uint32_t i = 0;
      for (const pj_value *e = lt->child; e; e = e->next, i++) {
        if (!pj_is_str(e) || (strcmp(e->valuestring, "sliding_attention") &&
                              strcmp(e->valuestring, "full_attention"))) {
          free(swa);
          return pa_error(PASADA_ERR_FORMAT,
                          "%s: layer_types[%u] is not sliding_attention or full_attention",
                          c->cfg_path, i);
        }
        swa[i] = !strcmp(e->valuestring, "sliding_attention");
        periodic &= swa[i] == ((i + 1) % def_period != 0);
      }
      snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
      if (!periodic) rc = gguf_writer_set_array(w, key, GGUF_TYPE_BOOL, swa, n_layer);
      free(swa);
      if (rc) return rc;
    }
  }
#undef SET_U32
  *n_vocab = (uint32_t)vocab;
  const pj_value *name = hf_member(c->cfg, "_name_or_path");
  const char *base = strrchr(c->dir, '/');
  return gguf_writer_set_string(w, "general.name",
                                pj_is_str(name) && name->valuestring[0] ? name->valuestring
                                : base && base[1]                       ? base + 1
                                                                        : c->dir);
}

/* ---- tensors ---- */

/* llama.cpp's name for an HF tensor name into out; 0: mapped, 1: dropped
 * (rotary tables, a tied lm_head), -1: unknown. */
static int map_name(const hf_ctx *c, const char *hf, char *out, size_t cap) {
  if (c->bert) return hf_bert_tensor_name(hf, c->n_layer, out, cap);
  if (!strcmp(hf, "model.embed_tokens.weight")) return snprintf(out, cap, "token_embd.weight"), 0;
  if (!strcmp(hf, "model.norm.weight")) return snprintf(out, cap, "output_norm.weight"), 0;
  if (!strcmp(hf, "lm_head.weight")) return c->tied ? 1 : (snprintf(out, cap, "output.weight"), 0);
  unsigned layer;
  int at = 0;
  if (sscanf(hf, "model.layers.%u.%n", &layer, &at) != 1 || at == 0 || layer >= c->n_layer)
    return -1;
  const char *rest = hf + at;
  if (strstr(rest, "rotary_emb.inv_freq")) return 1;
  static const struct {
    const char *hf, *gguf;
  } per_layer[] = {{"input_layernorm.weight", "attn_norm.weight"},
                   {"self_attn.q_proj.weight", "attn_q.weight"},
                   {"self_attn.k_proj.weight", "attn_k.weight"},
                   {"self_attn.v_proj.weight", "attn_v.weight"},
                   {"self_attn.q_proj.bias", "attn_q.bias"},
                   {"self_attn.k_proj.bias", "attn_k.bias"},
                   {"self_attn.v_proj.bias", "attn_v.bias"},
                   {"self_attn.o_proj.weight", "attn_output.weight"},
                   {"self_attn.q_norm.weight", "attn_q_norm.weight"},
                   {"self_attn.k_norm.weight", "attn_k_norm.weight"},
                   {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
                   {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
                   {"mlp.gate_proj.weight", "ffn_gate.weight"},
                   {"mlp.up_proj.weight", "ffn_up.weight"},
                   {"mlp.down_proj.weight", "ffn_down.weight"},
                   {"mlp.gate.weight", "ffn_gate_inp.weight"},
                   {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
                   {"mlp.gate_up_proj.weight", "ffn_up.weight"},
                   {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"}};
  const char *g = NULL;
  if (!strcmp(rest, "post_attention_layernorm.weight"))
    g = c->gemma ? "post_attention_norm.weight"
                 : "ffn_norm.weight"; /* Gemma normalises after attention too */
  for (size_t i = 0; !g && i < sizeof per_layer / sizeof per_layer[0]; i++)
    if (!strcmp(rest, per_layer[i].hf)) g = per_layer[i].gguf;
  if (!g) return -1;
  /* the fused Phi-3 matrices and the routers only where the family has them */
  const bool phi3 = !strcmp(c->arch, "phi3");
  /* (Mixtral's router under mlp. where transformers saves its fused experts) */
  if ((!phi3 && (strstr(rest, "qkv_proj") || strstr(rest, "gate_up_proj"))) ||
      (!strcmp(g, "ffn_gate_inp.weight") &&
       (!c->n_expert || (!c->mixtral && !strncmp(rest, "block_sparse_moe.", 17)))))
    return -1;
  snprintf(out, cap, "blk.%u.%s", layer, g);
  return 0;
}

/* An expert's matrix (per-expert names, as transformers saves them):
 * true with its layer, kind (0 gate, 1 up, 2 down) and expert index. */
static bool expert_part(const hf_ctx *c, const char *hf, uint32_t *layer, int *kind, uint32_t *e) {
  unsigned l, x;
  int at = 0;
  char part[16];
  if (!c->n_expert) return false;
  const char *fmt = c->mixtral ? "model.layers.%u.block_sparse_moe.experts.%u.%15[^.].weight%n"
                               : "model.layers.%u.mlp.experts.%u.%15[^.].weight%n";
  if (sscanf(hf, fmt, &l, &x, part, &at) != 3 || at == 0 || hf[at] != 0) return false;
  static const char *names[2][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};
  for (int k = 0; k < 3; k++)
    if (!strcmp(part, names[c->mixtral][k])) {
      *layer = l, *kind = k, *e = x;
      return true;
    }
  return false;
}

/* transformers' fused experts of a layer (3-D gate_up_proj, down_proj
 * under mlp.experts.; Mixtral's under block_sparse_moe.experts. too): true
 * with the layer and kind (0 gate_up_proj, 1 down_proj). */
static bool fused_part(const hf_ctx *c, const char *hf, uint32_t *layer, int *kind) {
  unsigned l;
  int at = 0;
  char part[16];
  if (!c->n_expert) return false;
  if ((sscanf(hf, "model.layers.%u.mlp.experts.%15[a-z_]%n", &l, part, &at) != 2 &&
       (!c->mixtral ||
        sscanf(hf, "model.layers.%u.block_sparse_moe.experts.%15[a-z_]%n", &l, part, &at) != 2)) ||
      at == 0 || hf[at] != 0)
    return false;
  const int k = !strcmp(part, "gate_up_proj") ? 0 : !strcmp(part, "down_proj") ? 1 : -1;
  if (k < 0) return false;
  *layer = l, *kind = k;
  return true;
}

size_t hf_elem_size(uint32_t type) {
  return type == PA_TYPE_F32 ? 4 : 2;
}

float *hf_f32(hf_ctx *c, const st_tensor *t) {
  const int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  float *f = hf_keep_buf(c, (size_t)n * sizeof *f);
  if (!f) return NULL;
  if (t->type == PA_TYPE_F32)
    memcpy(f, t->data, (size_t)n * sizeof *f);
  else
    pa_type_get(t->type)->to_float(t->data, f, n);
  return f;
}

st_tensor hf_mem_tensor(const char *name, uint32_t type, uint32_t n_dims, int64_t ne0, int64_t ne1,
                        int64_t ne2, void *data) {
  st_tensor t = {.name = (char *)name, .type = type, .n_dims = n_dims, .data = data};
  t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = 1;
  t.nbytes = (uint64_t)(ne0 * ne1 * ne2) * hf_elem_size(type);
  return t;
}

/* Rows of a Q or K matrix, HF's rotate-half order [first halves | second
 * halves] per head, to GGML's adjacent pairs: row h*d + 2i + j of the result
 * is row h*d + j*d/2 + i of the input. */
static void permute_rows(const uint8_t *src, uint8_t *dst, int64_t rows, size_t row_bytes,
                         uint32_t n_head) {
  const int64_t d = rows / n_head;
  for (int64_t h = 0; h < n_head; h++)
    for (int64_t i = 0; i < d / 2; i++)
      for (int64_t j = 0; j < 2; j++)
        memcpy(dst + (size_t)(h * d + 2 * i + j) * row_bytes,
               src + (size_t)(h * d + j * (d / 2) + i) * row_bytes, row_bytes);
}

/* The type matrices are quantized to at load; PA_TYPE_COUNT: as stored. */
static uint32_t load_type = PA_TYPE_COUNT;

int hf_set_load_type(const char *name) {
  if (!name) {
    load_type = PA_TYPE_COUNT;
    return PASADA_OK;
  }
  for (uint32_t t = 0; t < PA_TYPE_COUNT; t++) {
    const pa_type_traits *tr = pa_type_get(t);
    if (tr && tr->from_float && t != PA_TYPE_Q8_1 && t != PA_TYPE_Q8_K &&
        !strcasecmp(tr->name, name)) {
      load_type = t;
      return PASADA_OK;
    }
  }
  char list[512] = "";
  size_t at = 0;
  for (uint32_t t = 0; t < PA_TYPE_COUNT && at < sizeof list; t++) {
    const pa_type_traits *tr = pa_type_get(t);
    if (tr && tr->from_float)
      at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", tr->name);
  }
  return pa_error(PASADA_ERR_ARG, "'%.40s' is not a type weights can be quantized to (%s)", name,
                  list);
}

/* The tensor t, its rows permuted first when `heads` (llama's Q/K), as
 * `type` into buf: rows through F32, then the reference quantizer. (Q8_1
 * and Q8_K, the activations' types, are not offered for weights.) */
static int quantize_tensor(const st_tensor *t, uint32_t heads, uint32_t type, uint8_t *buf) {
  const int64_t cols = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
  float *f32 = malloc((size_t)(cols * rows) * sizeof *f32);
  float *perm = heads ? malloc((size_t)(cols * rows) * sizeof *perm) : NULL;
  if (!f32 || (heads && !perm)) {
    free(f32), free(perm);
    return pa_error(PASADA_ERR_NOMEM, "out of memory quantizing '%s'", t->name);
  }
  if (t->type == PA_TYPE_F32)
    memcpy(f32, t->data, (size_t)(cols * rows) * sizeof *f32);
  else
    pa_type_get(t->type)->to_float(t->data, f32, cols * rows);
  if (heads) {
    permute_rows((const uint8_t *)f32, (uint8_t *)perm, rows, (size_t)cols * sizeof(float), heads);
    free(f32);
    f32 = perm;
  }
  const size_t row = pa_row_size((pa_type)type, cols);
  for (int64_t r = 0; r < rows; r++)
    pa_type_get(type)->from_float(f32 + r * cols, buf + (size_t)r * row, cols);
  free(f32);
  return PASADA_OK;
}

void *hf_keep_buf(hf_ctx *c, size_t n) {
  void **nb = realloc(c->bufs, (size_t)(c->n_bufs + 1) * sizeof *nb);
  if (!nb) return NULL;
  c->bufs = nb;
  void *p = malloc(n ? n : 1);
  if (p) c->bufs[c->n_bufs++] = p;
  return p;
}

int hf_add_tensor(hf_ctx *c, gguf_writer *w, int32_t shard, const st_tensor *t,
                  const char *name) {
  const bool is_norm = strstr(name, "norm.weight") != NULL;
  const bool is_q = strstr(name, "attn_q.weight") != NULL,
             is_k = strstr(name, "attn_k.weight") != NULL;
  const bool permute = c->llama && (is_q || is_k);
  /* norms and biases F32 as llama.cpp writes them; bert's learned
   * positions and token types too (the loader adds them as F32 rows) */
  const bool to_f32 =
      t->n_dims == 1 ||
      (c->bert && (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")));
  const int64_t count = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  /* MoE routers stay as stored (pasada quantize keeps them too) */
  const bool quantize = load_type != PA_TYPE_COUNT && !to_f32 && load_type != t->type &&
                        !strstr(name, "ffn_gate_inp.weight") &&
                        t->ne[0] % pa_type_get(load_type)->block_size == 0;
  if (quantize) {
    const uint32_t heads = permute ? (is_q ? c->n_head : c->n_head_kv) : 0;
    const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (heads && rows % (2 * (int64_t)heads) != 0)
      return pa_error(PASADA_ERR_FORMAT, "%s: %lld rows do not split into %u heads of pairs", name,
                      (long long)rows, heads);
    const size_t bytes = pa_row_size((pa_type)load_type, t->ne[0]) * (size_t)rows;
    uint8_t *buf = hf_keep_buf(c, bytes);
    if (!buf) return pa_error(PASADA_ERR_NOMEM, "out of memory for tensor '%s'", name);
    int rc = quantize_tensor(t, heads, load_type, buf);
    return rc ? rc : gguf_writer_add_tensor(w, name, load_type, t->n_dims, t->ne, buf, bytes);
  }
  if (!permute && !to_f32 && shard < 0) /* a buffer of the context's */
    return gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
  if (!permute && !to_f32 &&
      ((uintptr_t)t->data % 4) == 0) { /* used as stored (the loader needs 4-byte alignment) */
    gguf_tensor g = {.name = (char *)name,
                     .type = t->type,
                     .n_dims = t->n_dims,
                     .nbytes = t->nbytes,
                     .data = t->data};
    memcpy(g.ne, t->ne, sizeof g.ne);
    g.offset = (uint64_t)(t->data - c->shards[shard]->map) - c->shards[shard]->data_offset;
    gguf_tensor *nd = realloc(c->direct[shard], (size_t)(c->n_direct[shard] + 1) * sizeof *nd);
    if (!nd || !(g.name = pa_strdup(name))) return pa_error(PASADA_ERR_NOMEM, "out of memory");
    c->direct[shard] = nd;
    nd[c->n_direct[shard]++] = g;
    return PASADA_OK;
  }
  const uint32_t type = to_f32 ? PA_TYPE_F32 : t->type;
  const size_t bytes = (size_t)count * hf_elem_size(type);
  uint8_t *buf = hf_keep_buf(c, bytes);
  if (!buf) return pa_error(PASADA_ERR_NOMEM, "out of memory for tensor '%s'", name);
  if (to_f32) {
    if (t->type == PA_TYPE_F32)
      memcpy(buf, t->data, bytes);
    else
      pa_type_get(t->type)->to_float(t->data, (float *)buf, count);
    /* GGUF stores Gemma's and Qwen3.5's RMS norm scale 1 + w (not the
     * Qwen3.5 gated norm's, which is a plain w) */
    if ((c->gemma || (c->qwen35 && !strstr(name, "ssm_norm"))) && is_norm)
      for (int64_t i = 0; i < count; i++) ((float *)buf)[i] += 1.0f;
  } else if (permute) {
    const uint32_t heads = is_q ? c->n_head : c->n_head_kv;
    const int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (rows % (2 * (int64_t)heads) != 0)
      return pa_error(PASADA_ERR_FORMAT, "%s: %lld rows do not split into %u heads of pairs", name,
                      (long long)rows, heads);
    permute_rows(t->data, buf, rows, (size_t)t->ne[0] * hf_elem_size(type), heads);
  } else {
    memcpy(buf, t->data, bytes); /* unaligned in the file */
  }
  return gguf_writer_add_tensor(w, name, type, t->n_dims, t->ne, buf, bytes);
}

static int index_shards(hf_ctx *c) {
  pj_value *idx = NULL;
  int rc = hf_read_json(c->dir, "model.safetensors.index.json", true, &idx);
  if (rc) return rc;
  char path[4096];
  char **names = NULL;
  uint32_t n = 0;
  if (!idx) {
    names = calloc(1, sizeof *names);
    if (!names || !(names[0] = pa_strdup("model.safetensors"))) {
      free(names);
      return pa_error(PASADA_ERR_NOMEM, "out of memory");
    }
    n = 1;
  } else {
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", c->dir);
    const pj_value *wm = hf_member(idx, "weight_map");
    if (!pj_is_obj(wm)) rc = pa_error(PASADA_ERR_FORMAT, "%s: no weight_map object", path);
    int cap = wm ? pj_size(wm) : 0;
    names = calloc(cap ? (size_t)cap : 1, sizeof *names);
    if (!rc && !names) rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    for (const pj_value *e = wm ? wm->child : NULL; e && !rc; e = e->next) {
      if (!pj_is_str(e) || !e->valuestring[0] || strchr(e->valuestring, '/') ||
          !strcmp(e->valuestring, "..") || !strcmp(e->valuestring, ".")) {
        rc = pa_error(PASADA_ERR_FORMAT,
                      "%s: weight_map['%.100s'] is not a file name in the folder", path, e->string);
        break;
      }
      uint32_t k = 0;
      while (k < n && strcmp(names[k], e->valuestring)) k++;
      if (k == n && !(names[n++] = pa_strdup(e->valuestring)))
        rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    }
    if (!rc && n == 0) rc = pa_error(PASADA_ERR_FORMAT, "%s: weight_map is empty", path);
  }
  if (!rc) {
    c->shards = calloc(n, sizeof *c->shards);
    c->direct = calloc(n, sizeof *c->direct);
    c->n_direct = calloc(n, sizeof *c->n_direct);
    if (!c->shards || !c->direct || !c->n_direct)
      rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    else
      c->n_shards = n;
  }
  for (uint32_t i = 0; i < n && !rc; i++) {
    snprintf(path, sizeof path, "%s/%s", c->dir, names[i]);
    rc = st_open(path, &c->shards[i]);
  }
  /* every tensor the index names is in the shard it names */
  const pj_value *wm = idx ? hf_member(idx, "weight_map") : NULL;
  for (const pj_value *e = wm ? wm->child : NULL; e && !rc; e = e->next) {
    uint32_t k = 0;
    while (k < n && strcmp(names[k], e->valuestring)) k++;
    const st_file *s = c->shards[k];
    uint64_t j = 0;
    while (j < s->n_tensors && strcmp(s->tensors[j].name, e->string)) j++;
    if (j == s->n_tensors)
      rc = pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' of the index is not in it", s->path,
                    e->string);
  }
  for (uint32_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  pj_free(idx);
  return rc;
}

/* Each layer's experts stacked into llama.cpp's 3-D ffn_{gate,up,down}_exps
 * ([expert][rows][cols]); every expert present, one shape and one type; or
 * the layer's fused experts split (hf_fused_experts), never both. */
static int stack_experts(hf_ctx *c, gguf_writer *w) {
  static const char *gname[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
  for (uint32_t l = 0; l < c->n_layer; l++) {
    const st_tensor *fused =
        c->fused[(size_t)l * 2] ? c->fused[(size_t)l * 2] : c->fused[(size_t)l * 2 + 1];
    if (fused) {
      for (size_t i = 0; i < (size_t)3 * c->n_expert; i++)
        if (c->experts[(size_t)l * 3 * c->n_expert + i])
          return pa_error(PASADA_ERR_FORMAT,
                          "%s: tensor '%.100s' fuses layer %u's experts, which '%.100s' holds "
                          "one by one too",
                          c->dir, fused->name, l,
                          c->experts[(size_t)l * 3 * c->n_expert + i]->name);
      int rc = hf_fused_experts(c, w, l);
      if (rc) return rc;
      continue;
    }
    for (int k = 0; k < 3; k++) {
      const st_tensor **x = c->experts + ((size_t)l * 3 + (size_t)k) * c->n_expert;
      uint32_t have = 0;
      for (uint32_t e = 0; e < c->n_expert; e++) have += x[e] != NULL;
      if (have == 0) continue; /* the model loader names what is missing */
      char name[GGUF_MAX_NAME_LEN];
      snprintf(name, sizeof name, "blk.%u.%s.weight", l, gname[k]);
      for (uint32_t e = 0; e < c->n_expert; e++) {
        if (!x[e])
          return pa_error(PASADA_ERR_FORMAT, "%s: expert %u of layer %u is missing (%u experts)",
                          c->dir, e, l, c->n_expert);
        if (x[e]->n_dims != 2 || x[e]->type != x[0]->type || x[e]->ne[0] != x[0]->ne[0] ||
            x[e]->ne[1] != x[0]->ne[1])
          return pa_error(PASADA_ERR_FORMAT,
                          "%s: expert tensor '%.100s' is not a matrix of its siblings' shape and "
                          "type",
                          c->dir, x[e]->name);
      }
      const size_t one = (size_t)x[0]->nbytes;
      uint8_t *buf = hf_keep_buf(c, one * c->n_expert);
      if (!buf) return pa_error(PASADA_ERR_NOMEM, "out of memory for tensor '%s'", name);
      for (uint32_t e = 0; e < c->n_expert; e++) memcpy(buf + one * e, x[e]->data, one);
      st_tensor t = {
          .name = name, .type = x[0]->type, .n_dims = 3, .nbytes = one * c->n_expert, .data = buf};
      t.ne[0] = x[0]->ne[0], t.ne[1] = x[0]->ne[1], t.ne[2] = c->n_expert, t.ne[3] = 1;
      const bool quantize = load_type != PA_TYPE_COUNT && load_type != t.type &&
                            t.ne[0] % pa_type_get(load_type)->block_size == 0;
      int rc;
      if (quantize) {
        const size_t bytes = pa_row_size((pa_type)load_type, t.ne[0]) * (size_t)(t.ne[1] * t.ne[2]);
        uint8_t *q = hf_keep_buf(c, bytes);
        if (!q) return pa_error(PASADA_ERR_NOMEM, "out of memory for tensor '%s'", name);
        if ((rc = quantize_tensor(&t, 0, load_type, q))) return rc;
        rc = gguf_writer_add_tensor(w, name, load_type, 3, t.ne, q, bytes);
      } else {
        rc = gguf_writer_add_tensor(w, name, t.type, 3, t.ne, buf, t.nbytes);
      }
      if (rc) return rc;
    }
  }
  return PASADA_OK;
}

static int tensors_to_gguf(hf_ctx *c, gguf_writer *w) {
  char name[GGUF_MAX_NAME_LEN + 64];
  int rc = PASADA_OK;
  /* Qwen3.5's multi-token-prediction layer: one block more, after the others */
  if (c->qwen35 && (rc = hf_qwen35_mtp_scan(c))) return rc;
  c->n_layer += c->n_mtp;
  if (c->n_expert &&
      (!(c->experts = calloc((size_t)c->n_layer * 3 * c->n_expert, sizeof *c->experts)) ||
       !(c->fused = calloc((size_t)c->n_layer * 2, sizeof *c->fused)) ||
       !(c->fused_shard = calloc((size_t)c->n_layer * 2, sizeof *c->fused_shard))))
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  for (uint32_t s = 0; s < c->n_shards && !rc; s++) {
    const st_file *f = c->shards[s];
    for (uint64_t i = 0; i < f->n_tensors && !rc; i++) {
      const st_tensor *t0 = &f->tensors[i];
      char text_name[GGUF_MAX_NAME_LEN + 64];
      const char *hname = hf_text_model_name(c, t0->name, text_name, sizeof text_name);
      if (!hname) continue; /* not the text model's */
      char mtp_name[GGUF_MAX_NAME_LEN + 64];
      /* the MTP layer's tensors as block n_layer's, or its own ones */
      if (c->n_mtp && !strncmp(hname, "mtp.", 4)) {
        bool done = false;
        if ((rc = hf_qwen35_mtp_tensor(c, w, s, t0, hname, mtp_name, sizeof mtp_name, &done)))
          return rc;
        if (done) continue;
        hname = mtp_name;
      }
      st_tensor named = *t0;
      named.name = (char *)hname;
      const st_tensor *t = hname == t0->name ? t0 : &named; /* the shard's own where it can be */
      if (c->oss || c->qwen35 || c->gemma4) {
        for (uint32_t p = 0; p < s; p++) /* a name in two shards */
          for (uint64_t j = 0; j < c->shards[p]->n_tensors; j++)
            if (!strcmp(c->shards[p]->tensors[j].name, t0->name))
              return pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' is also in %s", f->path,
                              t0->name, c->shards[p]->path);
        bool done = false;
        rc = c->oss      ? hf_gptoss_tensor(c, w, s, t, &done)
             : c->qwen35 ? hf_qwen35_tensor(c, w, s, t, &done)
                         : hf_gemma4_tensor(c, w, s, t, &done);
        if (rc) return rc;
        if (done) continue;
      }
      uint32_t layer = 0, e = 0;
      int kind = 0;
      const bool one = expert_part(c, t->name, &layer, &kind, &e); /* else fused */
      if (one || fused_part(c, t->name, &layer, &kind)) {
        if (layer >= c->n_layer || e >= c->n_expert)
          return pa_error(PASADA_ERR_FORMAT,
                          "%s: tensor '%.100s' is past the %u layers or %u experts of config.json",
                          f->path, t->name, c->n_layer, c->n_expert);
        const size_t at = one ? ((size_t)layer * 3 + (size_t)kind) * c->n_expert + e
                              : (size_t)layer * 2 + (size_t)kind;
        const st_tensor **slot = one ? &c->experts[at] : &c->fused[at];
        if (*slot)
          return pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' is also in another shard",
                          f->path, t->name);
        if (t->type >= ST_TYPE_I64)
          return pa_error(PASADA_ERR_UNSUPPORTED,
                          "%s: tensor '%.100s' has dtype %s (supported: F32, F16, BF16)", f->path,
                          t->name, st_type_name(t->type));
        *slot = t0; /* the shard's own entry (named only differs for text_config folders) */
        if (!one) c->fused_shard[at] = s;
        continue;
      }
      int m = map_name(c, t->name, name, sizeof name);
      if (m < 0)
        return pa_error(PASADA_ERR_UNSUPPORTED, "%s: tensor '%.100s' has no place in a %s model",
                        f->path, t->name, c->arch);
      if (m > 0) continue;
      if (t->type >= ST_TYPE_I64)
        return pa_error(PASADA_ERR_UNSUPPORTED,
                        "%s: tensor '%.100s' has dtype %s (supported: F32, F16, BF16)", f->path,
                        t->name, st_type_name(t->type));
      for (uint32_t p = 0; p < s; p++) /* a name in two shards */
        for (uint64_t j = 0; j < c->shards[p]->n_tensors; j++)
          if (!strcmp(c->shards[p]->tensors[j].name, t->name))
            return pa_error(PASADA_ERR_FORMAT, "%s: tensor '%.100s' is also in %s", f->path,
                            t->name, c->shards[p]->path);
      rc = hf_add_tensor(c, w, (int32_t)s, t, name);
    }
  }
  if (!rc && c->n_expert) rc = stack_experts(c, w);
  if (!rc && c->n_mtp) {
    char key[96];
    snprintf(key, sizeof key, "%s.block_count", c->arch);
    rc = gguf_writer_set_u32(w, key, c->n_layer);
    snprintf(key, sizeof key, "%s.nextn_predict_layers", c->arch);
    if (!rc) rc = gguf_writer_set_u32(w, key, c->n_mtp);
  }
  if (!rc && c->oss) rc = hf_gptoss_mxfp4(c, w);
  return rc; /* no tensors: a vocabulary-only folder (the model loader names what is missing) */
}

/* ---- the view ---- */

static void ctx_free(hf_ctx *c) {
  for (uint32_t s = 0; s < c->n_shards; s++) {
    for (uint64_t i = 0; c->direct && i < c->n_direct[s]; i++) free(c->direct[s][i].name);
    if (c->direct) free(c->direct[s]);
    st_close(c->shards[s]);
  }
  free(c->direct);
  free(c->n_direct);
  free(c->shards);
  free(c->experts);
  free(c->fused);
  free(c->fused_shard);
  free(c->mxfp4);
  for (uint64_t i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
  free(c->bufs);
}

static int file_type(const hf_ctx *c) {
  uint32_t t = PA_TYPE_F32;
  for (uint32_t s = 0; s < c->n_shards; s++)
    for (uint64_t i = 0; i < c->shards[s]->n_tensors; i++)
      if (c->shards[s]->tensors[i].type != PA_TYPE_F32 &&
          c->shards[s]->tensors[i].type < ST_TYPE_I64 && c->shards[s]->tensors[i].n_dims > 1)
        t = c->shards[s]->tensors[i].type;
  return t == PA_TYPE_F16    ? 1
         : t == PA_TYPE_BF16 ? 32
                             : 0; /* llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_BF16 */
}

static int build(hf_ctx *c, gguf_writer *w, gguf_file **out) {
  pj_value *cfg = NULL;
  int rc = hf_read_json(c->dir, "config.json", false, &cfg);
  if (rc) return rc;
  c->cfg = c->root = cfg;
  snprintf(c->cfg_path, sizeof c->cfg_path, "%s/config.json", c->dir);
  uint32_t n_vocab = 0;
  if (!pj_is_obj(cfg)) rc = pa_error(PASADA_ERR_FORMAT, "%s: not a JSON object", c->cfg_path);
  if (!rc) rc = config_to_gguf(c, w, &n_vocab);
  if (!rc)
    rc = c->bert ? hf_bert_tokenizer(c->dir, w) : hf_tokenizer_to_gguf(c->dir, cfg, n_vocab, c->gemma4, w);
  if (!rc) rc = index_shards(c);
  if (!rc) rc = gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type(c));
  if (!rc) rc = tensors_to_gguf(c, w);
  pj_free(cfg);
  c->cfg = c->root = NULL;
  if (rc) return rc;
  void *img = NULL;
  uint64_t size = 0;
  if ((rc = gguf_writer_write_memory(w, &img, &size, 3))) return rc;
  for (uint64_t i = 0; i < c->n_bufs; i++) free(c->bufs[i]);
  c->n_bufs = 0;
  void *map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    free(img);
    return pa_error(PASADA_ERR_NOMEM, "%s: out of memory", c->dir);
  }
  memcpy(map, img, (size_t)size);
  free(img);
  gguf_file **parts = calloc(c->n_shards + 1, sizeof *parts);
  if (!parts) {
    munmap(map, (size_t)size);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  rc = gguf_open_anon(map, size, c->dir, &parts[0]);
  for (uint32_t s = 0; s < c->n_shards && !rc; s++) {
    st_file *f = c->shards[s];
    rc = gguf_wrap_mapping(f->path, f->map, f->size, f->data_offset, c->direct[s], c->n_direct[s],
                           &parts[s + 1]);
    f->map = NULL; /* adopted */
  }
  if (rc) {
    for (uint32_t i = 0; i <= c->n_shards; i++) gguf_close(parts[i]);
    free(parts);
    return rc;
  }
  rc = gguf_join(parts, c->n_shards + 1, c->dir, out); /* adopts the parts */
  free(parts);
  return rc;
}

int hf_open(const char *path, gguf_file **out) {
  *out = NULL;
  char dir[2048];
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/') len--; /* "dir/" names files "dir/x", not "dir//x" */
  if (len >= sizeof dir) return pa_error(PASADA_ERR_ARG, "%.100s...: path too long", path);
  memcpy(dir, path, len);
  dir[len] = 0;
  hf_ctx c = {.dir = dir};
  gguf_writer *w = gguf_writer_create();
  if (!w) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  int rc = build(&c, w, out);
  gguf_writer_free(w);
  ctx_free(&c);
  return rc;
}
