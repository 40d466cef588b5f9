/* quantize.h: `pasada quantize`: rewrites a GGUF file with its weight
 * matrices in another type, keeping every metadata key (the tokenizer
 * included). A plan (which tensor becomes which type, and why) is made
 * first, so --dry-run and the real run print the same thing; quantize.c
 * holds the rules (docs/tools.md explains them), the conversion and the
 * report. */
#ifndef PASADA_TOOLS_QUANTIZE_H
#define PASADA_TOOLS_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "format/gguf.h"
#include "quant/quant.h"

/* Which tensors keep more precision than the preset's type. */
typedef enum {
  PA_MIX_NONE = 0, /* every quantized matrix in `type` (the output matrix aside) */
  PA_MIX_K_M,      /* llama.cpp's _M recipe: some attn_v and ffn_down in Q6_K */
  PA_MIX_IQ4,      /* llama.cpp's IQ4_NL/IQ4_XS without an importance matrix:
                      ffn_down of the first eighth of the layers in Q5_K */
} pa_quant_mix;

typedef struct {
  const char *name; /* "Q4_K_M", as given to --type */
  pa_type type;     /* the type most matrices get */
  pa_quant_mix mix;
  uint32_t file_type; /* general.file_type written (llama.cpp's llama_ftype number) */
  const char *about;  /* one line for --help */
} pa_quant_preset;

/* The presets, in the order --help lists them; *n gets their count. */
const pa_quant_preset *pa_quant_presets(size_t *n);
/* The preset named `name` (case-insensitive); NULL when there is none. */
const pa_quant_preset *pa_quant_preset_find(const char *name);

/* One tensor of the plan. */
typedef struct {
  const gguf_tensor *src; /* in the input file */
  uint32_t to;            /* output type (src->type when copied) */
  uint64_t bytes_out;
  bool convert; /* false: the bytes are copied unchanged */
  char why[64]; /* the rule that chose `to`, for the report */
} pa_quant_item;

typedef struct {
  const pa_quant_preset *preset;
  bool pure;
  pa_quant_item *items; /* one per input tensor, in the input's order */
  size_t n_items;
  size_t n_convert, n_fallback, n_requant; /* requant: from an already quantized type */
  uint64_t in_file_bytes, out_file_bytes;  /* whole files (the output's computed exactly) */
  uint64_t in_tensor_bytes, out_tensor_bytes;
  int64_t n_elements;
} pa_quant_plan;

/* Decides every tensor's output type. `pure`: no mix, no special output
 * matrix: every quantizable matrix gets the preset's type (row-length
 * fallbacks still apply). Returns a pasada_status (message set). */
int pa_quant_plan_make(const gguf_file *f, const pa_quant_preset *preset, bool pure,
                       pa_quant_plan *out);
void pa_quant_plan_free(pa_quant_plan *plan);

/* Called from the calling thread as the conversion advances: elements done
 * out of all the elements to convert. */
typedef void (*pa_quant_progress_fn)(void *user, int64_t done, int64_t total);

/* Converts and writes the output: every metadata key of `f` copied, then
 * general.file_type and general.quantization_version set; tensors in the
 * input's order. The file is written to OUT.tmp and renamed to OUT when
 * complete (OUT.tmp removed on failure). Rows are split over n_threads
 * threads (<= 0: every online core); the bytes do not depend on it.
 * Converted tensors are held in memory until the write. */
int pa_quant_write(const gguf_file *f, const pa_quant_plan *plan, const char *out_path,
                   int n_threads, pa_quant_progress_fn progress, void *user);

/* Reports: the per-tensor table (plan) and the totals. */
void pa_quant_print_plan(FILE *out, const gguf_file *f, const pa_quant_plan *plan, bool per_tensor);
/* One JSON object and a newline: the plan (with tensors when per_tensor),
 * and `seconds` when >= 0 (a real run). Returns 0, or -1 if out of memory. */
int pa_quant_print_json(FILE *out, const gguf_file *f, const pa_quant_plan *plan,
                        const char *out_path, bool dry_run, bool per_tensor, double seconds);

#endif
