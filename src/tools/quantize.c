/* quantize.c: `pasada quantize`: the type rules (which tensor becomes which
 * type), the plan with the output file's exact size, the multi-threaded
 * conversion (dequantize a row to floats, quantize it with the reference
 * quantizers of quant/), the write through the GGUF writer, and the
 * reports. The rules follow llama.cpp's quantize (docs/tools.md lists them);
 * the bytes of each block are those of ggml's reference quantizers. */
#include "tools/quantize.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "base/threadpool.h"

/* llama.cpp's llama_ftype numbers, written to general.file_type. There is no
 * "all Q4_K", "all Q5_K", "all Q3_K" or "all Q2_K" ftype: those presets carry
 * the _S number, the nearest (llama.cpp only shows it as a label); MXFP4
 * carries MXFP4_MOE's, llama.cpp's only MXFP4 ftype (which keeps the
 * non-expert matrices in Q8_0; pasada's MXFP4 preset converts them all). */
static const pa_quant_preset presets[] = {
    {"Q4_K_M", PA_TYPE_Q4_K, PA_MIX_K_M, 15,
     "Q4_K; half of attn_v and ffn_down in Q6_K; output Q6_K"},
    {"Q5_K_M", PA_TYPE_Q5_K, PA_MIX_K_M, 17,
     "Q5_K; half of attn_v and ffn_down in Q6_K; output Q6_K"},
    {"Q4_K", PA_TYPE_Q4_K, PA_MIX_NONE, 14,
     "4.5 bits per weight, 256-element super-blocks; output Q6_K"},
    {"Q5_K", PA_TYPE_Q5_K, PA_MIX_NONE, 16,
     "5.5 bits per weight, 256-element super-blocks; output Q6_K"},
    {"Q6_K", PA_TYPE_Q6_K, PA_MIX_NONE, 18, "6.56 bits per weight, 256-element super-blocks"},
    {"Q3_K", PA_TYPE_Q3_K, PA_MIX_NONE, 11,
     "3.44 bits per weight, 256-element super-blocks; output Q6_K"},
    {"Q2_K", PA_TYPE_Q2_K, PA_MIX_NONE, 21,
     "2.62 bits per weight, 256-element super-blocks; output Q6_K"},
    {"Q8_0", PA_TYPE_Q8_0, PA_MIX_NONE, 7, "8.5 bits per weight, 32-element blocks"},
    {"Q4_0", PA_TYPE_Q4_0, PA_MIX_NONE, 2, "4.5 bits per weight, 32-element blocks; output Q6_K"},
    {"Q4_1", PA_TYPE_Q4_1, PA_MIX_NONE, 3, "5 bits per weight, 32-element blocks; output Q6_K"},
    {"Q5_0", PA_TYPE_Q5_0, PA_MIX_NONE, 8, "5.5 bits per weight, 32-element blocks; output Q6_K"},
    {"Q5_1", PA_TYPE_Q5_1, PA_MIX_NONE, 9, "6 bits per weight, 32-element blocks; output Q6_K"},
    {"IQ4_XS", PA_TYPE_IQ4_XS, PA_MIX_IQ4, 30,
     "4.25 bits per weight, non-linear levels, 256-element super-blocks; first eighth of ffn_down "
     "Q5_K; output Q6_K"},
    {"IQ4_NL", PA_TYPE_IQ4_NL, PA_MIX_IQ4, 25,
     "4.5 bits per weight, non-linear levels, 32-element blocks; first eighth of ffn_down Q5_K; "
     "output Q6_K"},
    {"MXFP4", PA_TYPE_MXFP4, PA_MIX_NONE, 38,
     "4.25 bits per weight, E2M1 values with a shared power-of-two scale; output Q6_K"},
    {"F16", PA_TYPE_F16, PA_MIX_NONE, 1, "IEEE half precision"},
    {"BF16", PA_TYPE_BF16, PA_MIX_NONE, 32, "bfloat16"},
    {"F32", PA_TYPE_F32, PA_MIX_NONE, 0, "single precision"},
};

const pa_quant_preset *pa_quant_presets(size_t *n) {
  *n = sizeof presets / sizeof presets[0];
  return presets;
}

const pa_quant_preset *pa_quant_preset_find(const char *name) {
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
    if (!strcasecmp(name, presets[i].name)) return &presets[i];
  return NULL;
}

/* ---- the rules ---- */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !memcmp(s + n - m, suffix, m);
}

/* Whether a tensor is a weight matrix to convert at all (llama.cpp's list):
 * a name ending in "weight", two or more dimensions, and none of the small
 * or sensitive tensors quantization would hurt for nothing. Returns NULL or
 * why the tensor is kept. */
static const char *kept_reason(const gguf_tensor *t) {
  static const char *const excluded[] = {
      "_norm.weight",        /* norms */
      "ffn_gate_inp.weight", /* MoE routers */
      "altup",               /* Gemma 3n: tiny */
      "laurel",
      "per_layer_model_proj",
      "ssm_conv1d.weight", /* Mamba */
      "shortconv.conv.weight",
      "time_mix_first.weight", /* RWKV */
      "time_mix_w0.weight",
      "time_mix_w1.weight",
      "time_mix_w2.weight",
      "time_mix_v0.weight",
      "time_mix_v1.weight",
      "time_mix_v2.weight",
      "time_mix_a0.weight",
      "time_mix_a1.weight",
      "time_mix_a2.weight",
      "time_mix_g1.weight",
      "time_mix_g2.weight",
      "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight",
      "time_mix_lerp_fused.weight",
      "attn_rel_b.weight", /* T5 relative position bias */
  };
  if (!ends_with(t->name, "weight")) return "not a weight";
  if (t->n_dims < 2) return "1-D";
  for (size_t i = 0; i < sizeof excluded / sizeof excluded[0]; i++)
    if (strstr(t->name, excluded[i])) return i == 0 ? "norm" : "excluded by name";
  if (!strcmp(t->name, "position_embd.weight") || !strcmp(t->name, "token_types.weight"))
    return "excluded by name";
  return NULL;
}

/* llama.cpp's choice of the layers whose attn_v / ffn_down keep more bits in
 * the _M mixes: the first and last eighth, and every third one between. */
static bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static int64_t layer_of(const char *name) {
  if (strncmp(name, "blk.", 4)) return -1;
  char *end;
  long long v = strtoll(name + 4, &end, 10);
  return (end != name + 4 && *end == '.') ? (int64_t)v : -1;
}

/* The rank of tensor `self` among the tensors whose name contains `kind`,
 * ordered by (layer, name): llama.cpp counts them in that order, so for one
 * such tensor per layer this is the layer's index. *n gets their count. */
static int64_t rank_of(const gguf_file *f, size_t self, const char *kind, int64_t *n) {
  int64_t rank = 0, count = 0;
  const gguf_tensor *s = &f->tensors[self];
  int64_t ls = layer_of(s->name);
  for (uint64_t i = 0; i < f->n_tensors; i++) {
    const gguf_tensor *t = &f->tensors[i];
    if (!strstr(t->name, kind)) continue;
    count++;
    int64_t lt = layer_of(t->name);
    if (lt < ls || (lt == ls && strcmp(t->name, s->name) < 0)) rank++;
  }
  *n = count;
  return rank;
}

/* The type with the same bits that fits rows of any multiple of 32
 * elements (llama.cpp's fallbacks for K-quants). */
static pa_type fallback_of(pa_type t) {
  switch (t) {
    case PA_TYPE_Q4_K: return PA_TYPE_Q5_0;
    case PA_TYPE_Q5_K: return PA_TYPE_Q5_1;
    case PA_TYPE_Q6_K: return PA_TYPE_Q8_0;
    case PA_TYPE_Q2_K:
    case PA_TYPE_Q3_K: return PA_TYPE_Q4_0;
    case PA_TYPE_IQ4_XS: return PA_TYPE_IQ4_NL;
    default: return PA_TYPE_F16;
  }
}

/* The output type of tensor i, with the rule that chose it in `why`. */
static pa_type choose_type(const gguf_file *f, size_t i, const pa_quant_preset *p, bool pure,
                           bool has_output, bool *fell_back, char *why, size_t why_len) {
  const gguf_tensor *t = &f->tensors[i];
  pa_type type = p->type;
  const pa_type_traits *base = pa_type_get(p->type);
  int64_t row = t->ne[0];
  snprintf(why, why_len, "%s", p->name);
  *fell_back = false;
  if (!pure && base->quantized) {
    bool is_output =
        !strcmp(t->name, "output.weight") || (!has_output && !strcmp(t->name, "token_embd.weight"));
    int64_t n = 0, r;
    if (is_output) {
      /* the output matrix (or the embedding, when tied) weighs most on the logits */
      if (row % base->block_size) {
        type = PA_TYPE_Q8_0;
        snprintf(why, why_len, "output matrix, row %" PRId64 " not a multiple of %" PRId64, row,
                 base->block_size);
      } else if (p->type != PA_TYPE_Q8_0) {
        type = PA_TYPE_Q6_K;
        snprintf(why, why_len, "output matrix");
      }
    } else if (p->mix == PA_MIX_K_M && strstr(t->name, "attn_v.weight")) {
      r = rank_of(f, i, "attn_v.weight", &n);
      if (use_more_bits(r, n)) {
        type = PA_TYPE_Q6_K;
        snprintf(why, why_len, "_M: attn_v %" PRId64 " of %" PRId64, r, n);
      }
    } else if (p->mix == PA_MIX_K_M && strstr(t->name, "ffn_down")) {
      r = rank_of(f, i, "ffn_down", &n);
      if (use_more_bits(r, n)) {
        type = PA_TYPE_Q6_K;
        snprintf(why, why_len, "_M: ffn_down %" PRId64 " of %" PRId64, r, n);
      }
    } else if (p->mix == PA_MIX_IQ4 && strstr(t->name, "ffn_down")) {
      r = rank_of(f, i, "ffn_down", &n);
      if (r < n / 8) {
        type = PA_TYPE_Q5_K;
        snprintf(why, why_len, "IQ4: ffn_down %" PRId64 " of %" PRId64 " (first eighth)", r, n);
      }
    } else if (p->mix == PA_MIX_K_M && strstr(t->name, "attn_qkv.weight")) {
      type = p->type == PA_TYPE_Q4_K ? PA_TYPE_Q5_K : PA_TYPE_Q6_K;
      snprintf(why, why_len, "_M: fused attn_qkv");
    }
  }
  const pa_type_traits *tr = pa_type_get(type);
  if (row % tr->block_size) {
    pa_type fb = fallback_of(type);
    if (row % pa_type_get(fb)->block_size) fb = PA_TYPE_F16;
    size_t k = strlen(why);
    snprintf(why + k, why_len - k, "; row %" PRId64 " %% %" PRId64 " != 0: %s", row, tr->block_size,
             pa_type_name(type));
    type = fb;
    *fell_back = true;
  }
  return type;
}

/* ---- sizes of the output file ---- */

static uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

/* Bytes gguf_writer_write spends on a value (without its type tag). */
static uint64_t value_size(const gguf_value *v) {
  switch (v->type) {
    case GGUF_TYPE_STRING: return 8 + v->str.len;
    case GGUF_TYPE_ARRAY: {
      uint64_t n = 12;
      size_t es = gguf_type_size(v->arr.elem_type);
      if (es) return n + v->arr.count * es;
      for (uint64_t i = 0; i < v->arr.count; i++)
        n += v->arr.elem_type == GGUF_TYPE_STRING ? 8 + v->arr.strs[i].len
                                                  : value_size(&v->arr.items[i]);
      return n;
    }
    default: return gguf_type_size(v->type);
  }
}

static const char *const SET_KEYS[2] = {"general.file_type", "general.quantization_version"};

static uint64_t output_file_size(const gguf_file *f, const pa_quant_plan *plan) {
  uint64_t n = 24; /* magic, version, tensor count, kv count */
  bool present[2] = {false, false};
  for (uint64_t i = 0; i < f->n_kv; i++) {
    const gguf_kv *kv = &f->kv[i];
    n += 8 + strlen(kv->key) + 4;
    int set = -1;
    for (int k = 0; k < 2; k++)
      if (!strcmp(kv->key, SET_KEYS[k])) set = k;
    if (set >= 0) {
      present[set] = true;
      n += 4; /* written as uint32 */
    } else {
      n += value_size(&kv->value);
    }
  }
  for (int k = 0; k < 2; k++)
    if (!present[k]) n += 8 + strlen(SET_KEYS[k]) + 4 + 4;
  for (size_t i = 0; i < plan->n_items; i++) {
    const gguf_tensor *t = plan->items[i].src;
    n += 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
  }
  n = align_up(n, f->alignment);
  for (size_t i = 0; i < plan->n_items; i++) n += align_up(plan->items[i].bytes_out, f->alignment);
  return n;
}

/* ---- the plan ---- */

int pa_quant_plan_make(const gguf_file *f, const pa_quant_preset *preset, bool pure,
                       pa_quant_plan *out) {
  memset(out, 0, sizeof *out);
  out->preset = preset;
  out->pure = pure;
  out->items = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *out->items);
  if (!out->items)
    return pa_error(PASADA_ERR_NOMEM, "out of memory planning %" PRIu64 " tensors", f->n_tensors);
  out->n_items = f->n_tensors;
  bool has_output = gguf_find_tensor(f, "output.weight") >= 0;
  for (size_t i = 0; i < f->n_tensors; i++) {
    const gguf_tensor *t = &f->tensors[i];
    pa_quant_item *it = &out->items[i];
    it->src = t;
    it->to = t->type;
    int64_t nel = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) nel *= t->ne[d];
    out->n_elements += nel;
    const char *kept = kept_reason(t);
    if (kept) {
      snprintf(it->why, sizeof it->why, "kept: %s", kept);
    } else {
      bool fell_back;
      it->to = choose_type(f, i, preset, pure, has_output, &fell_back, it->why, sizeof it->why);
      if (it->to == t->type) {
        size_t k = strlen(it->why);
        snprintf(it->why + k, sizeof it->why - k, " (already)");
      } else {
        if (!pa_type_get(t->type)->to_float)
          return pa_error(PASADA_ERR_UNSUPPORTED, "tensor '%s': type %s cannot be dequantized",
                          t->name, pa_type_name(t->type));
        it->convert = true;
        out->n_convert++;
        out->n_fallback += fell_back;
        out->n_requant += pa_type_get(t->type)->quantized;
      }
    }
    it->bytes_out =
        it->convert ? (uint64_t)pa_row_size((pa_type)it->to, t->ne[0]) * (uint64_t)(nel / t->ne[0])
                    : t->nbytes;
    out->in_tensor_bytes += t->nbytes;
    out->out_tensor_bytes += it->bytes_out;
  }
  out->in_file_bytes = f->size;
  out->out_file_bytes = output_file_size(f, out);
  return PASADA_OK;
}

void pa_quant_plan_free(pa_quant_plan *plan) {
  free(plan->items);
  memset(plan, 0, sizeof *plan);
}

/* ---- conversion ---- */

typedef struct {
  const pa_quant_item *item;
  uint8_t *dst;
  int64_t row0, row1; /* this slice */
  float *scratch;     /* n_threads rows of max_row floats */
  int64_t max_row;
} convert_job;

static void convert_rows(void *arg, int ith, int nth) {
  const convert_job *j = arg;
  const gguf_tensor *t = j->item->src;
  const pa_type_traits *from = pa_type_get(t->type), *to = pa_type_get(j->item->to);
  int64_t n = t->ne[0];
  size_t in_row = pa_row_size((pa_type)t->type, n), out_row = pa_row_size((pa_type)j->item->to, n);
  float *buf = j->scratch + (size_t)ith * (size_t)j->max_row;
  long lo, hi;
  pa_split((long)(j->row1 - j->row0), ith, nth, &lo, &hi);
  for (int64_t r = j->row0 + lo; r < j->row0 + hi; r++) {
    const uint8_t *src = (const uint8_t *)t->data + (size_t)r * in_row;
    const float *x = buf;
    if (t->type == PA_TYPE_F32)
      x = (const float *)src; /* tensor data is aligned in the file */
    else
      from->to_float(src, buf, n);
    to->from_float(x, j->dst + (size_t)r * out_row, n);
  }
}

static bool same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int pa_quant_write(const gguf_file *f, const pa_quant_plan *plan, const char *out_path,
                   int n_threads, pa_quant_progress_fn progress, void *user) {
  if (same_file(f->path, out_path))
    return pa_error(PASADA_ERR_ARG, "%s: the output would overwrite the input", out_path);
  if (n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int)n : 1;
  }
  if (n_threads > 256) n_threads = 256;
  size_t len = strlen(out_path);
  char *tmp = malloc(len + 5);
  uint8_t **bufs = calloc(plan->n_items ? plan->n_items : 1, sizeof *bufs);
  gguf_writer *w = gguf_writer_create();
  pa_pool *pool = n_threads > 1 ? pa_pool_create(n_threads) : NULL;
  int64_t max_row = 1, total = 0, done = 0;
  for (size_t i = 0; i < plan->n_items; i++)
    if (plan->items[i].convert) {
      const gguf_tensor *t = plan->items[i].src;
      if (t->ne[0] > max_row) max_row = t->ne[0];
      total += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
  float *scratch = pa_alloc((size_t)n_threads * (size_t)max_row * sizeof(float));
  int rc = PASADA_OK;
  if (!tmp || !bufs || !w || !scratch || (n_threads > 1 && !pool)) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory preparing the conversion");
    goto done;
  }
  memcpy(tmp, out_path, len);
  memcpy(tmp + len, ".tmp", 5);

  for (uint64_t i = 0; i < f->n_kv && !rc; i++) /* a split model's keys: the output is one file */
    if (strncmp(f->kv[i].key, "split.", 6) != 0) rc = gguf_writer_set_value(w, f->kv[i].key, &f->kv[i].value);
  if (!rc) rc = gguf_writer_set_u32(w, SET_KEYS[0], plan->preset->file_type);
  if (!rc) rc = gguf_writer_set_u32(w, SET_KEYS[1], 2); /* the K-quant block layouts' version */
  if (progress) progress(user, 0, total);
  for (size_t i = 0; i < plan->n_items && !rc; i++) {
    const pa_quant_item *it = &plan->items[i];
    const gguf_tensor *t = it->src;
    const void *data = t->data;
    if (it->convert) {
      bufs[i] = pa_alloc(it->bytes_out ? (size_t)it->bytes_out : 1);
      if (!bufs[i]) {
        rc = pa_error(PASADA_ERR_NOMEM, "out of memory converting tensor '%s' (%" PRIu64 " bytes)",
                      t->name, it->bytes_out);
        break;
      }
      int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
      /* slices of ~4M elements, so the progress moves on large tensors */
      int64_t step = (4 << 20) / t->ne[0] + 1;
      for (int64_t r = 0; r < rows; r += step) {
        convert_job job = {it, bufs[i], r, r + step < rows ? r + step : rows, scratch, max_row};
        pa_pool_run(pool, convert_rows, &job);
        done += (job.row1 - job.row0) * t->ne[0];
        if (progress) progress(user, done, total);
      }
      data = bufs[i];
    }
    rc = gguf_writer_add_tensor(w, t->name, it->to, t->n_dims, t->ne, data, it->bytes_out);
  }
  if (!rc) rc = gguf_writer_write(w, tmp, f->version >= 3 ? 3 : f->version);
  if (!rc && rename(tmp, out_path) != 0)
    rc = pa_error(PASADA_ERR_IO, "%s: cannot rename %s to it: %s", out_path, tmp, strerror(errno));
  if (rc && tmp) unlink(tmp);

done:
  pa_pool_free(pool);
  pa_free(scratch);
  gguf_writer_free(w);
  if (bufs)
    for (size_t i = 0; i < plan->n_items; i++) pa_free(bufs[i]);
  free(bufs);
  free(tmp);
  return rc;
}

/* ---- reports ---- */

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void shape_text(const gguf_tensor *t, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = 0;
  for (uint32_t d = 0; d < t->n_dims && k < n; d++)
    k += (size_t)snprintf(buf + k, n - k, d ? " x %" PRId64 : "%" PRId64, t->ne[d]);
}

static const char *file_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

void pa_quant_print_plan(FILE *out, const gguf_file *f, const pa_quant_plan *plan,
                         bool per_tensor) {
  const pa_quant_preset *p = plan->preset;
  double bpw_in =
      plan->n_elements ? 8.0 * (double)plan->in_tensor_bytes / (double)plan->n_elements : 0;
  double bpw_out =
      plan->n_elements ? 8.0 * (double)plan->out_tensor_bytes / (double)plan->n_elements : 0;
  if (per_tensor) {
    fprintf(out, "%-36s %-18s %-6s    %-6s %10s  %s\n", "tensor", "shape", "from", "to", "MiB",
            "rule");
    for (size_t i = 0; i < plan->n_items; i++) {
      const pa_quant_item *it = &plan->items[i];
      char shape[64];
      shape_text(it->src, shape, sizeof shape);
      fprintf(out, "%-36s %-18s %-6s %s %-6s %10.3f  %s\n", it->src->name, shape,
              pa_type_name(it->src->type), it->convert ? "->" : "==", pa_type_name(it->to),
              mib(it->bytes_out), it->why);
    }
    fputc('\n', out);
  }
  /* tensors and bytes per output type */
  uint64_t bytes[PA_TYPE_COUNT] = {0};
  size_t count[PA_TYPE_COUNT] = {0};
  for (size_t i = 0; i < plan->n_items; i++) {
    bytes[plan->items[i].to] += plan->items[i].bytes_out;
    count[plan->items[i].to]++;
  }
  fprintf(out,
          "input     %s: %" PRIu64 " tensors, %.2f M parameters, %.2f MiB (%.2f bits per weight)\n",
          file_name(f->path), f->n_tensors, (double)plan->n_elements / 1e6,
          mib(plan->in_file_bytes), bpw_in);
  fprintf(out,
          "output    %s%s: %zu tensors converted (%zu from quantized types, %zu row-length "
          "fallbacks), %zu copied\n",
          p->name, plan->pure ? " (pure)" : "", plan->n_convert, plan->n_requant, plan->n_fallback,
          plan->n_items - plan->n_convert);
  fprintf(out, "types    ");
  for (int t = 0; t < PA_TYPE_COUNT; t++)
    if (count[t])
      fprintf(out, " %s: %zu (%.2f MiB)", pa_type_name((uint32_t)t), count[t], mib(bytes[t]));
  fputc('\n', out);
  fprintf(out, "size      %.2f MiB -> %.2f MiB (%" PRIu64 " bytes, %.2f bits per weight)\n",
          mib(plan->in_file_bytes), mib(plan->out_file_bytes), plan->out_file_bytes, bpw_out);
}

int pa_quant_print_json(FILE *out, const gguf_file *f, const pa_quant_plan *plan,
                        const char *out_path, bool dry_run, bool per_tensor, double seconds) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return -1;
  cJSON_AddStringToObject(root, "input", f->path);
  if (out_path) cJSON_AddStringToObject(root, "output", out_path);
  cJSON_AddStringToObject(root, "type", plan->preset->name);
  cJSON_AddBoolToObject(root, "pure", plan->pure);
  cJSON_AddBoolToObject(root, "dry_run", dry_run);
  cJSON_AddNumberToObject(root, "file_type", plan->preset->file_type);
  cJSON_AddNumberToObject(root, "n_tensors", (double)plan->n_items);
  cJSON_AddNumberToObject(root, "n_converted", (double)plan->n_convert);
  cJSON_AddNumberToObject(root, "n_requantized", (double)plan->n_requant);
  cJSON_AddNumberToObject(root, "n_fallback", (double)plan->n_fallback);
  cJSON_AddNumberToObject(root, "n_elements", (double)plan->n_elements);
  cJSON_AddNumberToObject(root, "input_bytes", (double)plan->in_file_bytes);
  cJSON_AddNumberToObject(root, "output_bytes", (double)plan->out_file_bytes);
  cJSON_AddNumberToObject(root, "input_tensor_bytes", (double)plan->in_tensor_bytes);
  cJSON_AddNumberToObject(root, "output_tensor_bytes", (double)plan->out_tensor_bytes);
  if (seconds >= 0) cJSON_AddNumberToObject(root, "seconds", seconds);
  if (per_tensor) {
    cJSON *arr = cJSON_AddArrayToObject(root, "tensors");
    for (size_t i = 0; arr && i < plan->n_items; i++) {
      const pa_quant_item *it = &plan->items[i];
      cJSON *o = cJSON_CreateObject();
      if (!o) break;
      cJSON_AddItemToArray(arr, o);
      cJSON_AddStringToObject(o, "name", it->src->name);
      cJSON *shape = cJSON_AddArrayToObject(o, "shape");
      for (uint32_t d = 0; shape && d < it->src->n_dims; d++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)it->src->ne[d]));
      cJSON_AddStringToObject(o, "from", pa_type_name(it->src->type));
      cJSON_AddStringToObject(o, "to", pa_type_name(it->to));
      cJSON_AddBoolToObject(o, "converted", it->convert);
      cJSON_AddNumberToObject(o, "bytes", (double)it->bytes_out);
      cJSON_AddStringToObject(o, "rule", it->why);
    }
  }
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!s) return -1;
  fprintf(out, "%s\n", s);
  cJSON_free(s);
  return 0;
}
