/* loader_internal.h: what loader.c shares with loader_arch.c: the checked
 * readers of a GGUF's keys and tensors (errors set with pa_error, the
 * PASADA_ status returned), and the per-family loaders that loader.c calls
 * by architecture. Internal to src/model. */
#ifndef PASADA_LOADER_INTERNAL_H
#define PASADA_LOADER_INTERNAL_H

#include <string.h>

#include "model/model.h"

/* Qwen3.5-MoE (arch "qwen35moe"): qwen35's layers (hp.arch PA_ARCH_QWEN35)
 * with a mixture of experts and a gated shared expert as every FFN. */
static inline bool pa_is_qwen35moe(const struct pa_model *m) {
  return m->arch_name && !strcmp(m->arch_name, "qwen35moe");
}

/* ---- keys: "ARCH.suffix" of the model's architecture ---- */
int ld_key_u32(struct pa_model *m, const char *suffix, bool required, uint32_t *out);
int ld_key_f32(struct pa_model *m, const char *suffix, bool required, float *out);
/* A count that may be per layer (an array of n_layer integers) or one for
 * every layer: into out[0, n_layer); out[0] is the default when absent. */
int ld_key_u32_layers(struct pa_model *m, const char *suffix, bool required, uint32_t n_layer, uint32_t *out);
/* PASADA_ERR_FORMAT naming `what` unless lo <= v <= hi. */
int ld_check_range(const char *what, int64_t v, int64_t lo, int64_t hi);
/* hp->swa_layer from attention.sliding_window_pattern (bools per layer,
 * or a period; `period` when absent). */
int ld_load_swa_pattern(struct pa_model *m, uint32_t period);

/* ---- tensors ---- */
int ld_find_tensor(struct pa_model *m, const char *name, bool required, const gguf_tensor **out);
int ld_check_shape(const gguf_tensor *t, int64_t cols, int64_t rows);
/* A matrix of `rows` rows of `cols` elements, used from the file. */
int ld_get_matrix(struct pa_model *m, const char *name, int64_t cols, int64_t rows, bool required, pa_matrix *out);
/* n floats (any float type, copied; *out NULL when absent and not required). */
int ld_get_vector(struct pa_model *m, const char *name, int64_t n, bool required, float **out);
/* Layer i's router (ffn_gate_inp) and experts (the 3-D ffn_gate_exps,
 * ffn_up_exps, ffn_down_exps), hp.n_expert of hp.n_ff_exp. */
int ld_get_experts(struct pa_model *m, int i);
/* The n_expert matrices of a 3-D expert tensor ([n_expert][rows][cols]):
 * out[e] is expert e's slice, rows x cols, in the file's bytes. */
int ld_get_expert_slices(struct pa_model *m, const char *name, int64_t cols, int64_t rows, int64_t n_expert,
                         pa_matrix *out);
/* rows x cols floats, copied; required. */
int ld_get_table(struct pa_model *m, const char *name, int64_t cols, int64_t rows, float **out);

/* ---- per family (loader_arch.c) ---- */
int ld_phi3_hparams(struct pa_model *m);
int ld_yarn(struct pa_model *m, float factor);
int ld_gemma4_hparams(struct pa_model *m);
int ld_qwen35_hparams(struct pa_model *m);
int ld_bert(struct pa_model *m);
int ld_gemma4(struct pa_model *m);
int ld_qwen35(struct pa_model *m);

#endif
