/* kv.glsl: the device KV cache's layout and its value types (one of
 * KV_F32, KV_F16, KV_Q8 defined). Per layer, K and V each hold
 * [n_blocks][n_head_kv][block_size][head_dim] values: a position's row
 * of one KV head is contiguous. F16 stores IEEE halves; Q8 stores 8-bit
 * integers with one float scale per position and KV head, in a separate
 * array [n_blocks][n_head_kv][block_size] (scale = max |x| / 127, q = x /
 * scale rounded half away from zero, as the host cache does). A slot is
 * block * block_size + offset in the block. */
uint kv_row(uint slot, uint h, uint n_kv, uint bs) { return ((slot / bs) * n_kv + h) * bs + slot % bs; }

#if defined(KV_F32)
float kv_get(uint64_t base, uint i) { return F32s(base).v[i]; }
void kv_put(uint64_t base, uint i, float v) { F32s(base).v[i] = v; }
#elif defined(KV_F16)
float kv_get(uint64_t base, uint i) { return half_bits(uint(U16s(base).v[i])); }
void kv_put(uint64_t base, uint i, float v) { U16s(base).v[i] = uint16_t(packHalf2x16(vec2(v, 0.0)) & 0xFFFFu); }
#elif defined(KV_Q8)
float kv_get(uint64_t base, uint i) { return float(int(I8s(base).v[i])); }
int q8_round(float x, float scale) {
  float y = scale > 0.0 ? x / scale : 0.0;
  y = isnan(y) ? 0.0 : y;
  y = clamp(y, -127.0, 127.0);
  const float t = trunc(y), f = y - t;
  return int(t + (f >= 0.5 ? 1.0 : f <= -0.5 ? -1.0 : 0.0));
}
#else
#error "kv.glsl: define KV_F32, KV_F16 or KV_Q8"
#endif
