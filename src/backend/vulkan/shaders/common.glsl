/* common.glsl: what every pasada compute shader includes. Shaders take no
 * descriptors: every buffer is reached through its device address
 * (VK_KHR_buffer_device_address, core in Vulkan 1.2), passed in the push
 * constants (at most 128 bytes) or read from the per-pass step buffer. An
 * address is a uint64_t counted in bytes; the reference types below view
 * the memory at an address as an array of one element type. */
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

layout(buffer_reference, std430, buffer_reference_align = 1) buffer U8s { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer I8s { int8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer U16s { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32s { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32s { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32s { float v[]; };

/* IEEE half and bfloat16 bits to float (exact). */
float half_bits(uint h) { return unpackHalf2x16(h).x; }
float bf16_bits(uint h) { return uintBitsToFloat(h << 16); }
/* little-endian loads at a byte address (a 16-bit load needs an even address) */
uint ld_u8(uint64_t a) { return uint(U8s(a).v[0]); }
uint ld_u16(uint64_t a) { return uint(U16s(a).v[0]); }

/* exp(x) by the algorithm of kernels/ops.h, the CPU tables' own (so the
 * gates and softmax weights match theirs to the last bits where the
 * compiler keeps the order: every step is `precise`). */
float pa_exp(float x) {
  precise float xc = min(x, 88.0);
  xc = max(xc, -88.0);
  precise float n = (xc * 1.44269504088896341 + 12582912.0) - 12582912.0;
  precise float r = xc - n * 0.693359375;
  r = r - n * -2.12194440e-4;
  precise float p = 1.9875691500e-4;
  p = p * r + 1.3981999507e-3;
  p = p * r + 8.3334519073e-3;
  p = p * r + 4.1665795894e-2;
  p = p * r + 1.6666665459e-1;
  p = p * r + 5.0000001201e-1;
  p = p * (r * r) + r + 1.0;
  int e = int(n) + 127;
  precise float y = p * uintBitsToFloat(uint(max(e, 0)) << 23);
  return x < -87.33654 ? 0.0 : y;
}

/* A workgroup's sum of one float per invocation (every invocation gets
 * it); `red` is WG floats of shared memory, WG the workgroup size. */
#define PA_WG_SUM(red, WG, val, out)                                 \
  {                                                                  \
    red[gl_LocalInvocationID.x] = (val);                             \
    barrier();                                                       \
    for (uint s_ = (WG) / 2; s_ > 0; s_ >>= 1) {                     \
      if (gl_LocalInvocationID.x < s_)                               \
        red[gl_LocalInvocationID.x] += red[gl_LocalInvocationID.x + s_]; \
      barrier();                                                     \
    }                                                                \
    out = red[0];                                                    \
    barrier();                                                       \
  }
#define PA_WG_MAX(red, WG, val, out)                                 \
  {                                                                  \
    red[gl_LocalInvocationID.x] = (val);                             \
    barrier();                                                       \
    for (uint s_ = (WG) / 2; s_ > 0; s_ >>= 1) {                     \
      if (gl_LocalInvocationID.x < s_)                               \
        red[gl_LocalInvocationID.x] = max(red[gl_LocalInvocationID.x], red[gl_LocalInvocationID.x + s_]); \
      barrier();                                                     \
    }                                                                \
    out = red[0];                                                    \
    barrier();                                                       \
  }
