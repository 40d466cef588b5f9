/* backend.h: the seam between the model code and a device. A backend owns
 * the memory a forward pass works in and the ops the model calls, named as
 * the model uses them; the model code (src/model) describes a layer as a
 * sequence of these ops and never touches a buffer itself.
 *
 * Objects and lifetimes:
 *   pa_backend  one device with its settings (kernel tables, prefetch
 *               distances, ...), made for a model when it loads and
 *               immutable afterwards; it prepares the model's weights once
 *               (the CPU repacks them for its kernels; the Vulkan backend
 *               uploads them). Shared by every context of that model.
 *   pa_bctx     a backend's state for one context: the activation buffers
 *               of a forward pass, scratch, and the KV cache's values (the
 *               context keeps the cache's block manager, runtime/kv_cache.h,
 *               the same for every backend). Used by one thread at a time.
 * No backend keeps mutable process-wide state: two models (or two contexts)
 * run side by side on different threads without touching each other.
 *
 * Buffers: a forward pass works in the named activation buffers of
 * pa_buf, each n_batch rows; a row of X, XB holds n_embd floats (XB also
 * the attention output's width), Q, K, V the projections of every head,
 * ATT n_head * head_dim_v, H1 and H2 n_ff. Ops read and write whole rows
 * of the batch's tokens; upload and download move floats between a buffer
 * and host memory, synchronize waits for what was submitted.
 *
 * Backends now: "cpu" (the SIMD kernels of src/kernels, "cpu:NAME" for one
 * table: scalar, avx2, avx512, avx512_vnni, amx), "vulkan" / "vulkan:N"
 * (GPUs: src/backend/vulkan), "vulkan:N/L" (the first L layers there, the
 * rest on the CPU: src/backend/split) and "ref" (the reference:
 * weights dequantized to F32 as they are read, float activations, double
 * sums, every op on its own with the plain C kernels, an F32 KV cache by
 * default). A new backend fills pa_backend_ops in src/backend/NAME/ and
 * adds its name to backend.c; tests/unit/test_backend_ops.c is its
 * conformance suite (every op against "ref"). */
#ifndef PASADA_BACKEND_H
#define PASADA_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "runtime/kv_cache.h"

struct pa_model;

typedef enum {
  PA_ARCH_LLAMA,
  PA_ARCH_QWEN2,
  PA_ARCH_QWEN3,
  PA_ARCH_QWEN3MOE,
  PA_ARCH_GEMMA2,
  PA_ARCH_GEMMA3,
  PA_ARCH_PHI3,
  PA_ARCH_BERT,
  PA_ARCH_GPT_OSS,
  PA_ARCH_GEMMA4,
  PA_ARCH_QWEN35
} pa_arch;
typedef enum { PA_ACT_SILU, PA_ACT_GELU_TANH } pa_activation;

#define PA_MAX_LAYERS 512

/* A model's shape: what every backend needs to size buffers and run ops. */
typedef struct {
  pa_arch arch;
  int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, head_dim_v, n_ff, n_vocab, n_ctx_train;
  int32_t rope_dim;
  /* the sliding-window layers' (swa_layer) KV heads, head sizes and
   * rotated dims, when they differ from the others' above (gemma4: 256
   * against the global layers' 512); equal to them in every other family.
   * pa_layer_attn gives a layer's. */
  int32_t n_head_kv_swa, head_dim_swa, head_dim_v_swa, rope_dim_swa;
  bool rope_neox;       /* rotate halves (qwen, gemma) rather than adjacent pairs (llama) */
  float rope_base;      /* global layers */
  float rope_base_swa;  /* sliding-window layers */
  float rope_freq_scale, rope_freq_scale_swa; /* 1/linear scaling factor */
  float rope_attn_factor; /* the RoPE tables' cos and sin times this (LongRoPE; else 1) */
  float norm_eps;
  float attn_scale;     /* applied to q.k */
  float attn_softcap;   /* > 0: scores s = cap * tanh(s / cap) after the scale (gemma2) */
  float final_softcap;  /* > 0: logits l = cap * tanh(l / cap) (gemma2) */
  float embed_scale;    /* embeddings multiplied by this (gemma: sqrt(n_embd)) */
  int32_t sliding_window;  /* 0: none */
  bool swa_layer[PA_MAX_LAYERS]; /* the layers that attend over the window only */
  pa_activation act;
  /* attention sees the whole sequence (BERT), not only the positions up to
   * the token's own: see the attention op */
  bool bidirectional;
  /* mixture of experts (0 experts: a dense FFN of n_ff): n_expert experts
   * of n_ff_exp, n_expert_used of them per token */
  int32_t n_expert, n_expert_used, n_ff_exp;
  /* KV sharing (gemma4): the last n_kv_shared layers store no K and V;
   * layer l's attention reads the cache of layer kv_from[l] (the last
   * earlier layer of its kind that stores them; kv_from[l] == l for the
   * others). kv_from is meaningful when n_kv_shared > 0. */
  int32_t n_kv_shared;
  int16_t kv_from[PA_MAX_LAYERS];
  /* linear attention (Gated DeltaNet, qwen35): the layers that are
   * recurrent rather than attention layers; each has ssm_k_heads heads of
   * ssm_k_dim for q and k, ssm_v_heads of ssm_v_dim for v (value head j
   * reads key head j % ssm_k_heads), and a causal conv1d of ssm_conv taps
   * over its q, k and v channels (ssm_conv 0: no recurrent layers) */
  bool recurrent[PA_MAX_LAYERS];
  int32_t ssm_conv, ssm_k_heads, ssm_v_heads, ssm_k_dim, ssm_v_dim;
  /* per-layer inputs (gemma4 E2B/E4B: embedding_length_per_layer_input;
   * 0: none): each token has n_embd_per_layer floats per layer in buffer
   * PLE (n_layer * n_embd_per_layer per token), computed once from the
   * embedding and read by every layer */
  int32_t n_embd_per_layer;
  /* multi-token prediction (qwen35: {arch}.nextn_predict_layers): layers
   * after the n_layer (model->layers[n_layer ...]) that a speculative
   * drafter runs, not the forward pass (0: none) */
  int32_t n_mtp;
} pa_hparams;

/* The attention shape of layer l: its KV heads (n_head query heads in
 * every layer) and the sizes of a q/k head and of a v head. A _swa field
 * of 0 (hand-made hparams) is the global layers' value. */
typedef struct {
  int32_t n_head_kv, head_dim, head_dim_v;
} pa_attn_shape;
static inline int32_t pa_or_(int32_t v, int32_t dflt) { return v > 0 ? v : dflt; }
static inline pa_attn_shape pa_layer_attn(const pa_hparams *hp, int l) {
  if (hp->swa_layer[l])
    return (pa_attn_shape){pa_or_(hp->n_head_kv_swa, hp->n_head_kv), pa_or_(hp->head_dim_swa, hp->head_dim),
                           pa_or_(hp->head_dim_v_swa, hp->head_dim_v)};
  return (pa_attn_shape){hp->n_head_kv, hp->head_dim, hp->head_dim_v};
}
/* The widest of either kind's, each field on its own (buffers and scratch
 * are sized by it), and the most query heads per KV head. */
static inline pa_attn_shape pa_attn_max(const pa_hparams *hp) {
  pa_attn_shape a = {hp->n_head_kv, hp->head_dim, hp->head_dim_v};
  if (hp->n_head_kv_swa > a.n_head_kv) a.n_head_kv = hp->n_head_kv_swa;
  if (hp->head_dim_swa > a.head_dim) a.head_dim = hp->head_dim_swa;
  if (hp->head_dim_v_swa > a.head_dim_v) a.head_dim_v = hp->head_dim_v_swa;
  return a;
}
/* The rotated dims of each head under the global or the sliding-window
 * tables (PA_ROPE_SWA), and the larger (the tables' rows are sized by it). */
static inline int32_t pa_rope_dim_of(const pa_hparams *hp, int swa) {
  return swa ? pa_or_(hp->rope_dim_swa, hp->rope_dim) : hp->rope_dim;
}
static inline int32_t pa_rope_dim_max(const pa_hparams *hp) {
  return hp->rope_dim_swa > hp->rope_dim ? hp->rope_dim_swa : hp->rope_dim;
}

/* A recurrent layer's state for one sequence: the conv's last ssm_conv - 1
 * inputs (conv_dim channels each) and the delta rule's matrix per value
 * head (ssm_k_dim x ssm_v_dim), in floats. */
static inline int64_t pa_ssm_conv_dim(const pa_hparams *hp) {
  return 2 * (int64_t)hp->ssm_k_heads * hp->ssm_k_dim + (int64_t)hp->ssm_v_heads * hp->ssm_v_dim;
}
static inline int64_t pa_ssm_state_floats(const pa_hparams *hp) {
  return (int64_t)(hp->ssm_conv - 1) * pa_ssm_conv_dim(hp) +
         (int64_t)hp->ssm_v_heads * hp->ssm_k_dim * hp->ssm_v_dim;
}


/* The most experts a layer may have, and use per token. */
#define PA_MAX_EXPERTS 512
#define PA_MAX_EXPERTS_USED 32

/* The tokens of one forward pass (validated by pasada_decode). */
typedef struct {
  int32_t n;
  const int32_t *token, *pos, *seq;
  int32_t n_out;          /* tokens whose logits are computed */
  const int32_t *out_idx; /* their indices in the pass */
  /* recurrent layers: per token the state slot that also receives its
   * sequence's state after that token (a checkpoint a later truncation
   * restores), or -1; NULL: none (see delta_net) */
  const int32_t *ckpt;
} pa_fwd_batch;

typedef enum {
  PA_BUF_NONE = -1,
  PA_BUF_X,   /* the residual stream */
  PA_BUF_XB,  /* a block's output before its residual add */
  PA_BUF_Q, PA_BUF_K, PA_BUF_V,
  PA_BUF_ATT, /* attention's output, the input of Wo */
  PA_BUF_H1, PA_BUF_H2, /* the FFN's gate and up projections */
  PA_BUF_PLE, /* the per-layer inputs (hp->n_embd_per_layer > 0; else 0 wide) */
  PA_BUF_COUNT
} pa_buf;

/* The widest row (floats per token) any op writes into buffer `buf` of a
 * pass of hp's model (the linear-attention layers use Q, K, V, H1 and ATT
 * for their own projections, backend.c): every backend sizes its buffers
 * by it. */
int64_t pa_buf_width(const pa_hparams *hp, pa_buf buf);

typedef enum { PA_ROPE_NONE, PA_ROPE_GLOBAL, PA_ROPE_SWA } pa_rope_kind;
/* PA_GATE_SWIGLU_OAI: gpt-oss's clamped SwiGLU, g = min(gate, L), u =
 * clamp(up, -L, L), out = (u + 1) * g * sigmoid(A * g), L and A below
 * (pa_swiglu_oai). */
typedef enum { PA_GATE_NONE, PA_GATE_SILU, PA_GATE_GELU_TANH, PA_GATE_SWIGLU_OAI } pa_gate;
#define PA_SWIGLU_OAI_ALPHA 1.702f
#define PA_SWIGLU_OAI_LIMIT 7.0f
/* An activation of a product's own output (no gate): GELU with the exact
 * erf, 0.5 x (1 + erf(x / sqrt 2)) (BERT's FFN). */
typedef enum { PA_UNARY_NONE, PA_UNARY_GELU_ERF } pa_unary;

/* A matrix product and what is fused around it. For m < n_w:
 *   n = in_norm ? rmsnorm(in) * in_norm : in            (each row, eps of hp)
 *   out[m] = W[m] n + bias[m]
 *   each head of out[m] (head_dim wide, or head_dim_v for V: the sizes of
 *     layer kv_layer when >= 0, else of `layer`, pa_layer_attn)
 *     RMS-normalised with head_norm[m], then rotated by RoPE (rope[m]: the
 *     global or the sliding-window tables of the pass's positions, over
 *     rope_dim or rope_dim_swa of each head)
 *   kv_layer >= 0: out[1] is K and out[2] is V: stored into the cache of
 *     that layer at the tokens' (sequence, position)
 *   gate: n_w == 2 and out[0] = act(out[0]) * out[1]
 *   unary: n_w == 1, no gate, and out[0] = unary(out[0]) (after its bias)
 *   residual != PA_BUF_NONE: residual += out[0]
 * Any field may be empty (NULL / PA_ROPE_NONE / -1 / PA_GATE_NONE /
 * PA_BUF_NONE). The input and output buffers are distinct. A backend gives
 * every output the values of these steps run one after another (within its
 * rounding); how it fuses them is its own. */
typedef struct {
  int n_w;
  const pa_matrix *w[3];
  pa_buf in, out[3];
  const float *in_norm;
  const float *bias[3];
  const float *head_norm[3];
  pa_rope_kind rope[3];
  int kv_layer;
  int layer; /* whose head sizes shape the head-wise steps when kv_layer < 0 (0 by default) */
  pa_gate gate;
  pa_unary unary;
  pa_buf residual;
} pa_matmul_desc;

/* Descriptors of one, two and three products of the same input, nothing
 * fused; the caller sets what it fuses. */
static inline pa_matmul_desc pa_mm(const pa_matrix *w, pa_buf in, pa_buf out) {
  return (pa_matmul_desc){.n_w = 1, .w = {w}, .in = in, .out = {out, PA_BUF_NONE, PA_BUF_NONE},
                          .kv_layer = -1, .residual = PA_BUF_NONE};
}
static inline pa_matmul_desc pa_mm2(const pa_matrix *w0, const pa_matrix *w1, pa_buf in, pa_buf out0,
                                    pa_buf out1) {
  return (pa_matmul_desc){.n_w = 2, .w = {w0, w1}, .in = in, .out = {out0, out1, PA_BUF_NONE},
                          .kv_layer = -1, .residual = PA_BUF_NONE};
}
static inline pa_matmul_desc pa_mm3(const pa_matrix *w0, const pa_matrix *w1, const pa_matrix *w2, pa_buf in,
                                    pa_buf out0, pa_buf out1, pa_buf out2) {
  return (pa_matmul_desc){.n_w = 3, .w = {w0, w1, w2}, .in = in, .out = {out0, out1, out2},
                          .kv_layer = -1, .residual = PA_BUF_NONE};
}

/* A mixture-of-experts feed-forward block:
 *   n = rmsnorm(in) * in_norm                          (each token, eps of hp)
 *   r = router n' + router_bias                        (n_expert logits)
 *       n' = n, or rmsnorm(in) * router_norm when router_norm is set
 *   p = softmax(r)                                     (n_expert probabilities)
 *   S = the n_used experts of largest p (ties: the lower index first)
 *   w_e = p_e / sum_{S} p  when norm_topk, else p_e     (e in S)
 *   w_e *= expert_scale[e]  when expert_scale is set    (gemma4)
 *   g_e = gate[e] n + gate_bias[e],  u_e = up[e] n + up_bias[e]
 *   out = sum_{e in S} w_e * (down[e] act(g_e, u_e) + down_bias[e])
 *   residual != PA_BUF_NONE: residual += out
 * act(g, u) = silu(g) * u, gelu_tanh(g) * u, or gpt-oss's pa_swiglu_oai;
 * router_norm (n_embd) and expert_scale (n_expert) may be NULL (none;
 * Gemma 4's router normalises its input with a weight of its own and
 * scales each chosen weight);
 * every bias may be NULL (none): router_bias n_expert floats, gate_bias
 * and up_bias [n_expert][n_ff_exp], down_bias [n_expert][n_embd]. With
 * norm_topk the weights are the softmax over the chosen logits alone
 * (gpt-oss's top-k, then softmax; Mixtral's).
 * router: n_expert rows of n_embd; gate[e], up[e]: n_ff_exp rows of n_embd;
 * down[e]: n_embd rows of n_ff_exp (every expert of one kind has one type).
 * The sum runs over S in increasing expert index. out is n_embd wide, in and
 * out distinct buffers. A family with shared experts (always-on experts
 * added to out, e.g. qwen2moe's) would add their matrices here, NULL when
 * absent; qwen3moe and mixtral have none. */
typedef struct {
  pa_buf in, out;
  const float *in_norm;
  const pa_matrix *router;
  int32_t n_expert, n_used;
  bool norm_topk;
  const pa_matrix *gate, *up, *down; /* arrays of n_expert */
  pa_gate act;
  pa_buf residual;
  const float *router_bias, *gate_bias, *up_bias, *down_bias;
  const float *router_norm, *expert_scale;
} pa_moe_desc;

/* gpt-oss's clamped SwiGLU over n values (PA_GATE_SWIGLU_OAI): g[i] =
 * (clamp(u[i], -L, L) + 1) * m * sigmoid(A m), m = min(g[i], L). One
 * plain function for every host table. */
void pa_swiglu_oai(float *g, const float *u, int64_t n);

/* The router's choice for one token (every backend's, so they choose alike
 * from the same logits): its n_used experts of largest logit (ties: the
 * lower index) into chosen[] in increasing index, their weights (softmax
 * over every logit, in double; renormalised over the chosen when
 * norm_topk) into weight[]. n_expert <= PA_MAX_EXPERTS. */
void pa_moe_route(const float *logit, int32_t n_expert, int32_t n_used, bool norm_topk, int32_t *chosen,
                  float *weight);

/* Gated DeltaNet (a linear-attention layer, `layer`, recurrent in hp) over
 * the pass's tokens, in batch order, each continuing its sequence's state
 * (a token at position 0 starts from a zero state). With Kd = ssm_k_dim,
 * Vd = ssm_v_dim, per token t of sequence s:
 *   c = silu(conv(the state's last ssm_conv - 1 rows of qkv, then qkv[t]))
 *       per channel: sum_j conv_w[ch][j] * row_j[ch] (the oldest row first);
 *       the state keeps the last ssm_conv - 1 inputs
 *   q, k, v = c's first k_heads * Kd, next k_heads * Kd, last v_heads * Vd
 *   q, k of every head L2-normalised (x / sqrt(sum x^2 + 1e-6)), q / sqrt(Kd)
 *   per value head h (key head h % k_heads):
 *     g = a[h] * softplus(alpha[t][h] + dt_bias[h]),  beta = sigmoid(beta_in[t][h])
 *     S = S * exp(g);  S += k (beta (v - S^T k))^T;  o = S^T q    (S: Kd x Vd)
 *     out[t][h] = rmsnorm(o) * norm * silu(z[t][h])   (Vd wide, eps of hp)
 * qkv: conv_dim per token; z, out: v_heads * Vd; beta_in, alpha: v_heads.
 * conv_w: [conv_dim][ssm_conv]; a (= -exp(A_log)), dt_bias: v_heads;
 * norm: Vd. The state lives in the backend's context, one per recurrent
 * layer and sequence (and snapshot slot: state_copy). When b->ckpt[t] >= 0
 * the layer's state of t's sequence as it is after t (the conv's inputs
 * and every head's S) is also copied to slot ckpt[t], a slot no token of
 * the pass runs in. */
typedef struct {
  int layer;
  pa_buf qkv, z, beta, alpha, out;
  const float *conv_w, *a, *dt_bias, *norm;
} pa_delta_desc;

typedef struct pa_bctx pa_bctx; /* a backend's per-context state (its own struct) */
typedef struct pa_backend pa_backend;

/* What a context gives its backend. */
typedef struct {
  const pa_hparams *hp;
  const float *rope_freqs; /* rope_dim / 2 frequency factors, or NULL (the global tables only) */
  int32_t n_batch, n_seq_max;
  pa_pool *pool;           /* the context's host threads */
  pa_kv_cache *kv;         /* the context's KV block manager: the backend attaches its values */
  pa_kv_type kv_type;      /* the values' type */
  const pa_matrix *const *mats; /* every matrix the forward pass multiplies by */
  int32_t n_mats;
  int32_t kv_layers;       /* the KV values of layers [0, kv_layers) only (0: of every layer) */
  /* attention sinks (gpt-oss): per layer n_head logits (NULL: the layer
   * has none), or NULL for a model without; see the attention op */
  const float *const *attn_sinks;
  /* recurrent state slots (hp->ssm_conv > 0): n_seq_max for the sequences,
   * then n_snap more the context keeps states in (snapshots for prefix
   * reuse, checkpoints for rolling drafts back: model/hybrid.c) */
  int32_t n_snap;
} pa_bctx_params;

typedef struct {
  const char *name;
  /* the KV cache's value type when a context does not ask for one */
  pa_kv_type default_kv_type;
  /* ---- weights: once per model, before any context ---- */
  int (*prepare_weights)(const pa_backend *be, struct pa_model *m);
  /* ---- contexts ---- */
  /* The backend's state for a context, and the KV cache's values (storage
   * of p->kv_type for every block of p->kv, attached to it with
   * pa_kv_attach; freed by context_free). */
  int (*context_init)(const pa_backend *be, const pa_bctx_params *p, pa_bctx **out);
  void (*context_free)(pa_bctx *bc);
  /* ---- memory ---- */
  void (*upload)(pa_bctx *bc, pa_buf dst, int64_t offset, const float *src, int64_t n);
  void (*download)(pa_bctx *bc, pa_buf src, int64_t offset, float *dst, int64_t n);
  void (*synchronize)(pa_bctx *bc);
  /* ---- ops ---- */
  /* Starts a forward pass: what depends only on the batch's positions
   * (RoPE tables: cos and sin of pos * base^(-2i/rope_dim) * freq_scale /
   * rope_freqs[i], times hp->rope_attn_factor; the sliding-window tables
   * with the _swa base and scale, no factors). */
  void (*begin)(pa_bctx *bc, const pa_fwd_batch *b);
  /* X[t] = row token[t] of the embedding table * scale */
  void (*embed)(pa_bctx *bc, const pa_fwd_batch *b, const pa_matrix *table, float scale);
  /* out[t] = rmsnorm(in[t]) * w, rows of n floats (out may be in) */
  void (*rms_norm)(pa_bctx *bc, pa_buf out, pa_buf in, const float *w, int64_t n, int32_t n_tok);
  /* out[t] = (in[t] - mean) / sqrt(var + eps) * w + bias, rows of n floats
   * (mean and variance of the row's n values, eps of hp; out may be in) */
  void (*layer_norm)(pa_bctx *bc, pa_buf out, pa_buf in, const float *w, const float *bias, int64_t n,
                     int32_t n_tok);
  /* X[t] += row (by_pos ? pos[t] : 0) of an F32 table (learned position
   * embeddings, BERT's token-type row); the rows exist (the loader checks) */
  void (*embed_add)(pa_bctx *bc, const pa_fwd_batch *b, const pa_matrix *table, bool by_pos);
  /* x[t] += y[t], rows of n floats */
  void (*add)(pa_bctx *bc, pa_buf x, pa_buf y, int64_t n, int32_t n_tok);
  /* x[t] *= s, rows of n floats (gemma4's per-layer output scalar) */
  void (*scale)(pa_bctx *bc, pa_buf x, float s, int64_t n, int32_t n_tok);
  /* The token part of the per-layer inputs: rows of table->cols floats,
   *   PLE[t] = (PLE[t] + row token[t] of table * scale) * out_scale
   * in float, in that order (the row times scale rounded, then the sum, then
   * the product). The table is read where the file maps it (any type
   * pa_matrix_get_row reads; it is never uploaded), its rows exist (the
   * loader checks). NULL: the backend runs no model with per-layer inputs. */
  void (*per_layer_embed)(pa_bctx *bc, const pa_fwd_batch *b, const pa_matrix *table, float scale,
                          float out_scale);
  /* x[t][i] = gelu_tanh(x[t][i]) * y[t * y_stride + y_off + i] for i < n
   * (x's rows n wide; gelu_tanh(g) * u as the gate of pa_matmul_desc's
   * PA_GATE_GELU_TANH computes it): a layer's gate times its slice of
   * the per-layer inputs */
  void (*gelu_mul)(pa_bctx *bc, pa_buf x, pa_buf y, int64_t n, int64_t y_stride, int64_t y_off, int32_t n_tok);
  void (*matmul)(pa_bctx *bc, const pa_fwd_batch *b, const pa_matmul_desc *d);
  /* ATT = causal attention of Q over the cache of `layer` (every token's own
   * K and V already stored), over the last `window` positions when window
   * > 0: scores scaled by hp->attn_scale, then soft-capped by
   * hp->attn_softcap when it is > 0 (s = cap * tanh(s / cap)). With the
   * context's attention sinks for the layer (pa_bctx_params.attn_sinks),
   * head h's softmax has one more logit, sink[h], in its denominator and
   * none in its output: out = sum_j e^(s_j - m) v_j / (sum_j e^(s_j - m) +
   * e^(sink[h] - m)).
   * hp->bidirectional: a token attends to every position of its sequence
   * up to the last one of that sequence in this pass (the whole input when
   * it is in one pass; window 0). */
  void (*attention)(pa_bctx *bc, const pa_fwd_batch *b, int layer, int32_t window);
  /* A linear-attention layer's recurrent step (pa_delta_desc) and x[t] *=
   * sigmoid(g[t]) over rows of n (the gated attention's output gate), g's
   * rows ng wide: ng == n elementwise, ng == 1 one gate per row (qwen35moe's
   * shared-expert gate);
   * state_copy copies every recurrent layer's state of slot src to slot dst
   * (slots: sequences 0..n_seq_max-1, then the snapshots). NULL: the
   * backend runs no model with recurrent layers (refused at load). */
  void (*delta_net)(pa_bctx *bc, const pa_fwd_batch *b, const pa_delta_desc *d);
  void (*sigmoid_mul)(pa_bctx *bc, pa_buf x, pa_buf g, int64_t n, int64_t ng, int32_t n_tok);
  void (*state_copy)(pa_bctx *bc, int32_t dst, int32_t src);
  /* A mixture-of-experts block (pa_moe_desc). NULL: the backend runs no
   * model with experts (refused at load). */
  void (*moe)(pa_bctx *bc, const pa_fwd_batch *b, const pa_moe_desc *d);
  /* logits[i] = out · rmsnorm(X[out_idx[i]]) * norm, for the pass's output
   * tokens, into host memory (n_out rows of n_vocab), soft-capped by
   * hp->final_softcap when it is > 0 (l = cap * tanh(l / cap)) */
  void (*logits)(pa_bctx *bc, const pa_fwd_batch *b, const float *norm, const pa_matrix *out,
                 float *logits);
  /* hidden[i] = rmsnorm(X[out_idx[i]]) * norm (norm NULL: X[out_idx[i]]
   * as it is), for the pass's output tokens, into host memory (n_out rows
   * of n_embd): the final hidden states an embedding model pools
   * (pasada_context_params.pooling) */
  void (*hidden)(pa_bctx *bc, const pa_fwd_batch *b, const float *norm, float *hidden);
  /* The ops that follow, up to the next call, are those of layer `layer`
   * (hp->n_layer: the output; -1: the embedding stage after the embed op,
   * e.g. the per-layer inputs); the model code calls it before each layer
   * and before the logits. A backend that splits the model by layers
   * (src/backend/split) routes ops by it; NULL: the backend needs no
   * telling. */
  void (*layer)(pa_bctx *bc, int layer);
} pa_backend_ops;

struct pa_backend {
  const pa_backend_ops *ops;
  char name[32];  /* as asked for: "cpu", "cpu:avx2", "ref" */
  char kernels[32]; /* what runs: the kernel table's name ("amx", "plain") */
  void *impl;     /* the backend's own device state */
  void (*free_impl)(struct pa_backend *be); /* frees impl (NULL: impl is one allocation) */
};

/* A backend by name: "cpu" (the default, NULL too), "cpu:TABLE", "ref".
 * weight_bytes: the bytes of the model's matrices, which some settings are
 * fitted to (0: unknown). Unknown names and tables this machine lacks are
 * PASADA_ERR_ARG naming them. */
int pa_backend_create(const char *name, uint64_t weight_bytes, pa_backend **out);
void pa_backend_free(pa_backend *be);
/* The names pa_backend_create takes, for help texts. */
const char *pa_backend_names(void);

/* The two backends built in (src/backend/cpu, src/backend/ref). */
int pa_backend_cpu_create(const char *table, uint64_t weight_bytes, pa_backend **out);
/* A CPU backend on kernel table k, which may be one a test built ("cpu:" and
 * its name). */
int pa_backend_cpu_create_with(const pa_cpu_kernels *k, uint64_t weight_bytes, pa_backend **out);
int pa_backend_ref_create(pa_backend **out);

/* ---- GPUs (src/backend/vulkan) ----
 * "vulkan" is the first Vulkan device that is a real GPU (discrete, then
 * integrated, then virtual); "vulkan:N" is device N of pa_vulkan_devices,
 * whatever its type (a CPU implementation such as Mesa's lavapipe is used
 * only when named so). The Vulkan loader is opened at run time: a binary
 * built with Vulkan runs on a machine without it (these calls then fail
 * with a line saying so). */
typedef struct {
  int index;          /* N of "vulkan:N" */
  char name[256];
  char type[16];      /* "discrete", "integrated", "virtual", "cpu", "other" */
  char api[16];       /* the Vulkan version it implements, "1.3.230" */
  uint64_t memory;    /* bytes of its largest device-local heap */
  uint32_t subgroup;  /* subgroup size (the smallest it may use) */
  bool fp16, int8;    /* 16-bit float and 8-bit integer arithmetic in shaders */
  bool coopmat;       /* VK_KHR_cooperative_matrix */
  bool usable;        /* has everything pasada's shaders need */
  char missing[96];   /* when not usable: what it lacks */
} pa_device_info;
/* Whether this build has the Vulkan backend. */
bool pa_vulkan_built(void);
/* The Vulkan devices of this machine, in the loader's order: *n of them,
 * the first min(*n, cap) into out. PASADA_ERR_UNSUPPORTED with a line
 * naming the cause when the build has no Vulkan or the loader cannot be
 * opened or made an instance; no device is *n == 0, not an error. */
int pa_vulkan_devices(pa_device_info *out, int cap, int *n);
/* device: -1 for the first real GPU, or N. */
int pa_backend_vulkan_create(int device, pa_backend **out);
/* The Vulkan backend's weights for layers [0, n_layers) only, and the
 * output (its norm and matrix) when `output` (src/backend/split). */
int pa_vulkan_prepare_layers(const pa_backend *be, struct pa_model *m, int32_t n_layers, bool output);

/* ---- a model across a GPU and the CPU (src/backend/split) ----
 * "DEV/N" (DEV a GPU backend's name: "vulkan", "vulkan:N"): the first N
 * layers on DEV, the embedding, the other layers and the output on the
 * CPU (the CPU's weights keep the file's layout); N must be at most the
 * model's layers (checked when the weights are prepared). The residual
 * stream moves between the devices where the layers change sides. */
int pa_backend_split_create(const char *gpu, int32_t n_gpu_layers, uint64_t weight_bytes, pa_backend **out);

#endif
