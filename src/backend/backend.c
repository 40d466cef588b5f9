/* backend.c: backends by name (backend.h). */
#include "backend/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

const char *pa_backend_names(void) {
  return "cpu, cpu:TABLE (" PA_KERNEL_TABLE_NAMES "), ref, vulkan, vulkan:N, vulkan[:N]/LAYERS";
}

int pa_backend_create(const char *name, uint64_t weight_bytes, pa_backend **out) {
  *out = NULL;
  const char *slash = name ? strchr(name, '/') : NULL;
  if (slash) { /* DEV/N: the first N layers on DEV */
    char dev[32];
    char *end;
    const long n = strtol(slash + 1, &end, 10);
    if ((size_t)(slash - name) >= sizeof dev || strncmp(name, "vulkan", 6) || end == slash + 1 || *end || n < 1 ||
        n > 100000)
      return pa_error(PASADA_ERR_ARG, "backend '%s': expected vulkan[:N]/LAYERS, LAYERS a positive number", name);
    memcpy(dev, name, (size_t)(slash - name));
    dev[slash - name] = 0;
    return pa_backend_split_create(dev, (int32_t)n, weight_bytes, out);
  }
  if (!name || !*name || !strcmp(name, "cpu")) return pa_backend_cpu_create(NULL, weight_bytes, out);
  if (!strncmp(name, "cpu:", 4)) return pa_backend_cpu_create(name + 4, weight_bytes, out);
  if (!strcmp(name, "ref")) return pa_backend_ref_create(out);
  if (!strcmp(name, "vulkan")) return pa_backend_vulkan_create(-1, out);
  if (!strncmp(name, "vulkan:", 7)) {
    char *end;
    const long n = strtol(name + 7, &end, 10);
    if (end == name + 7 || *end || n < 0 || n > 1000)
      return pa_error(PASADA_ERR_ARG, "backend '%s': expected vulkan:N, N a device number (pasada devices)", name);
    return pa_backend_vulkan_create((int)n, out);
  }
  return pa_error(PASADA_ERR_ARG, "unknown backend '%s' (have: %s)", name, pa_backend_names());
}

void pa_backend_free(pa_backend *be) {
  if (!be) return;
  if (be->free_impl)
    be->free_impl(be);
  else
    pa_free(be->impl);
  pa_free(be);
}

void pa_moe_route(const float *logit, int32_t n_expert, int32_t n_used, bool norm_topk, int32_t *chosen,
                  float *weight) {
  float mx = logit[0];
  for (int32_t e = 1; e < n_expert; e++) mx = logit[e] > mx ? logit[e] : mx;
  double sum = 0;
  for (int32_t e = 0; e < n_expert; e++) sum += exp((double)logit[e] - mx);
  bool taken[PA_MAX_EXPERTS] = {false};
  for (int32_t k = 0; k < n_used; k++) {
    int32_t best = -1;
    for (int32_t e = 0; e < n_expert; e++)
      if (!taken[e] && (best < 0 || logit[e] > logit[best])) best = e;
    taken[best] = true;
  }
  double sel = 0;
  int32_t k = 0;
  for (int32_t e = 0; e < n_expert; e++)
    if (taken[e]) {
      chosen[k] = e;
      const double p = exp((double)logit[e] - mx) / sum;
      weight[k++] = (float)p;
      sel += p;
    }
  if (norm_topk)
    for (k = 0; k < n_used; k++) weight[k] = (float)(weight[k] / sel);
}

void pa_swiglu_oai(float *g, const float *u, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const float m = g[i] < PA_SWIGLU_OAI_LIMIT ? g[i] : PA_SWIGLU_OAI_LIMIT;
    float v = u[i] < -PA_SWIGLU_OAI_LIMIT ? -PA_SWIGLU_OAI_LIMIT : u[i];
    v = v > PA_SWIGLU_OAI_LIMIT ? PA_SWIGLU_OAI_LIMIT : v;
    g[i] = (v + 1.0f) * (m / (1.0f + expf(-PA_SWIGLU_OAI_ALPHA * m)));
  }
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

int64_t pa_buf_width(const pa_hparams *hp, pa_buf buf) {
  const int64_t E = hp->n_embd, F = hp->n_ff;
  /* the widest of the two kinds of layers (pa_layer_attn) */
  const pa_attn_shape a = pa_attn_max(hp);
  const int64_t Q = (int64_t)hp->n_head * a.head_dim, K = (int64_t)a.n_head_kv * a.head_dim;
  const int64_t VV = (int64_t)a.n_head_kv * a.head_dim_v, O = (int64_t)hp->n_head * a.head_dim_v;
  /* a linear-attention layer: its mixed q, k, v into Q, z into K, beta
   * into V, alpha into H1, its output into ATT; a gated attention layer's
   * gate into H1 */
  const bool lin = hp->ssm_conv > 0;
  const int64_t VZ = (int64_t)hp->ssm_v_heads * hp->ssm_v_dim;
  switch (buf) {
    case PA_BUF_X: return E;
    case PA_BUF_XB: return max64(E, O);
    case PA_BUF_Q: return lin ? max64(Q, pa_ssm_conv_dim(hp)) : Q;
    case PA_BUF_K: return lin ? max64(K, VZ) : K;
    case PA_BUF_V: return lin ? max64(VV, hp->ssm_v_heads) : VV;
    case PA_BUF_ATT: /* also gemma4's experts' output (n_embd), beside the dense FFN's in XB */
      return max64(lin ? max64(O, VZ) : O, hp->arch == PA_ARCH_GEMMA4 && hp->n_expert > 0 ? E : 0);
    case PA_BUF_H1: /* also the per-layer gate (n_embd_per_layer), qwen35's attention gate (Q) */
      return max64(max64(max64(F, E), hp->arch == PA_ARCH_QWEN35 ? Q : 0),
                   max64(lin ? hp->ssm_v_heads : 0, hp->n_embd_per_layer));
    case PA_BUF_H2: return F;
    case PA_BUF_PLE: return (int64_t)hp->n_layer * hp->n_embd_per_layer;
    default: return 0;
  }
}
