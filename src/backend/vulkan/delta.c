/* delta.c: the Vulkan backend's linear-attention ops (backend.h: delta_net,
 * sigmoid_mul, state_copy). The recurrent state of every sequence and
 * snapshot slot lives in one device buffer of the context (pa_bctx.ssm:
 * [slot][recurrent layer][pa_ssm_state_floats], the host backends'
 * layout); delta_net is two dispatches, the conv in place over the pass's
 * qkv rows (shaders/delta_conv.comp) and the recurrence with the gated
 * norm (shaders/delta_net.comp), which read the tokens' sequences,
 * positions and checkpoint slots from the step buffer, so a decode step records the same
 * commands every time; state_copy is one copy in the graph. */
#include <string.h>

#include "backend/vulkan/context.h"
#include "base/base.h"

/* the recurrence keeps a token's q and k in shared memory (delta_net.comp's KMAX) */
enum { DELTA_KMAX = 256 };

int pa_vkc_delta_init(pa_bctx *c, const pa_bctx_params *p) {
  const pa_hparams *hp = p->hp;
  for (int l = 0; l < PA_MAX_LAYERS; l++) c->ssm_index[l] = -1;
  if (hp->ssm_conv <= 0) return PASADA_OK;
  if (hp->ssm_k_dim > DELTA_KMAX)
    return pa_error(PASADA_ERR_UNSUPPORTED, "vulkan: linear-attention key heads of %d values (at most %d)",
                    hp->ssm_k_dim, DELTA_KMAX);
  /* the recurrent layers this context runs: those whose KV values it holds
   * (a split context's GPU side holds the first kv_layers) */
  const int32_t n_layers = p->kv_layers > 0 && p->kv_layers < hp->n_layer ? p->kv_layers : hp->n_layer;
  for (int l = 0; l < n_layers; l++)
    if (hp->recurrent[l]) c->ssm_index[l] = (int16_t)c->n_recurrent++;
  c->n_slots = p->n_seq_max + p->n_snap;
  if (c->n_recurrent == 0) return PASADA_OK;
  const uint64_t bytes = (uint64_t)c->n_slots * (uint64_t)c->n_recurrent * (uint64_t)pa_ssm_state_floats(hp) * 4;
  return pa_vk_buf_create(c->d, bytes, false, &c->ssm);
}

/* floats from one slot's state to the next's */
static uint32_t slot_stride(const pa_bctx *c) { return (uint32_t)(c->n_recurrent * pa_ssm_state_floats(c->hp)); }

void pa_vkc_delta_net(pa_bctx *c, const pa_fwd_batch *b, const pa_delta_desc *d) {
  const pa_hparams *hp = c->hp;
  const uint32_t n = (uint32_t)b->n, cd = (uint32_t)pa_ssm_conv_dim(hp);
  /* the pass's sequences and positions (op_begin's; written here too, so
   * the op runs in a pass without it) */
  uint8_t *s = c->step.map;
  memcpy(s + c->s_pos, b->pos, (size_t)n * sizeof(int32_t));
  memcpy(s + c->s_seq, b->seq, (size_t)n * sizeof(int32_t));
  int32_t *ck = (int32_t *)(void *)(s + c->s_ckpt);
  for (uint32_t t = 0; t < n; t++) ck[t] = b->ckpt ? b->ckpt[t] : -1;
  const uint64_t state = c->ssm.addr + (uint64_t)c->ssm_index[d->layer] * (uint64_t)pa_ssm_state_floats(hp) * 4;
  const uint64_t qkv = buf_addr(c, d->qkv);
  struct {
    uint64_t qkv, w, state, seq, pos, ckpt;
    uint32_t n_tok, cd, taps, slot_stride;
  } pc = {qkv,
          pa_vkc_weight(c->vb, d->conv_w),
          state,
          step_addr(c, c->s_seq),
          step_addr(c, c->s_pos),
          step_addr(c, c->s_ckpt),
          n,
          cd,
          (uint32_t)hp->ssm_conv,
          slot_stride(c)};
  pa_vkc_dispatch(c, "delta_conv", &pc, sizeof pc, (cd + 63) / 64, 1, 1);
  struct {
    uint64_t qkv, z, beta, alpha, out, state, seq, pos, ckpt, a, dt, norm;
    uint32_t n_tok, kh, vh, kd, vd, slot_stride;
    float eps;
  } pr = {qkv,
          buf_addr(c, d->z),
          buf_addr(c, d->beta),
          buf_addr(c, d->alpha),
          buf_addr(c, d->out),
          state + (uint64_t)(hp->ssm_conv - 1) * cd * 4,
          step_addr(c, c->s_seq),
          step_addr(c, c->s_pos),
          step_addr(c, c->s_ckpt),
          pa_vkc_weight(c->vb, d->a),
          pa_vkc_weight(c->vb, d->dt_bias),
          pa_vkc_weight(c->vb, d->norm),
          n,
          (uint32_t)hp->ssm_k_heads,
          (uint32_t)hp->ssm_v_heads,
          (uint32_t)hp->ssm_k_dim,
          (uint32_t)hp->ssm_v_dim,
          slot_stride(c),
          hp->norm_eps};
  _Static_assert(sizeof pr <= PA_VK_PUSH, "delta_net's push constants");
  pa_vkc_dispatch(c, "delta_net", &pr, sizeof pr, (uint32_t)hp->ssm_v_heads, (uint32_t)c->n_seq_max, 1);
}

void pa_vkc_sigmoid_mul(pa_bctx *c, pa_buf x, pa_buf g, int64_t n, int64_t ng, int32_t n_tok) {
  const uint64_t N = (uint64_t)n * (uint64_t)n_tok;
  struct {
    uint64_t g, u;
    uint32_t n, kind, per_gate;
  } p = {buf_addr(c, x), buf_addr(c, g), (uint32_t)N, 4u, ng == 1 ? (uint32_t)n : 1u}; /* the gate shader's kind 4 */
  pa_vkc_dispatch(c, "gate", &p, sizeof p, groups_for(N, 256), 1, 1);
}

void pa_vkc_state_copy(pa_bctx *c, int32_t dst, int32_t src) {
  if (!c->n_recurrent || dst == src) return;
  const uint64_t bytes = (uint64_t)slot_stride(c) * 4;
  pa_vkc_copy(c, c->ssm.buf, (uint64_t)src * bytes, c->ssm.buf, (uint64_t)dst * bytes, bytes);
}
