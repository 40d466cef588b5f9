/* ilv_run.h: the `run` entry (kernels.h, pa_ilv_kernel) of an interleaved
 * layout's SIMD kernel whose body takes its token count T (1 to 4; 1 to 8
 * with PA_ILV_RUN8) as a compile-time constant: one switch over the call's
 * count, so each count gets its own unrolled body; the one-token body
 * (decode) in a function of its own, whose code does not move with the
 * others' (when the x16 kernels' batched bodies gained their prefetch,
 * SmolLM2's one-token decode fell from 326-332 to 303-308 tok/s with the
 * same instructions in its loop, `pasada bench` tg, 3 alternated runs; on
 * its own it gave 339-345). The including file defines
 *   run_body(const int kind, int64_t cols, const uint8_t *wg,
 *            const uint8_t *const *xp, float *y, int64_t ldy, const int T,
 *            const pa_prefetch *stream)
 * (always inlined) and names its target attribute (ATTR). */
#ifndef PASADA_ILV_RUN_H
#define PASADA_ILV_RUN_H

/* the one-token entry, name##_one, of PA_ILV_RUN4 / PA_ILV_RUN8 */
#define PA_ILV_ONE(ATTR, name, kind)                                                          \
  static ATTR __attribute__((noinline)) void name##_one(int64_t cols, const uint8_t *wg,     \
                                                        const uint8_t *const *xp, float *y,  \
                                                        const pa_prefetch *stream) {         \
    run_body(kind, cols, wg, xp, y, 0, 1, stream);                                         \
  }

#define PA_ILV_RUN4(ATTR, name, kind)                                                         \
  PA_ILV_ONE(ATTR, name, kind)                                                               \
  static ATTR void name(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, \
                        float *y, int64_t ldy, const pa_prefetch *stream) {                               \
    switch (nt) {                                                                          \
      case 1: name##_one(cols, wg, xp, y, stream); break;                                          \
      case 2: run_body(kind, cols, wg, xp, y, ldy, 2, stream); break;                      \
      case 3: run_body(kind, cols, wg, xp, y, ldy, 3, stream); break;                      \
      default: run_body(kind, cols, wg, xp, y, ldy, 4, stream); break;                     \
    }                                                                                      \
  }

/* up to 8 tokens: 5 to 8 here, fewer through the 4-token entry name##_4 */
#define PA_ILV_RUN8(ATTR, name, kind)                                                         \
  PA_ILV_RUN4(ATTR, name##_4, kind)                                                          \
  static ATTR void name(int64_t cols, const uint8_t *wg, const uint8_t *const *xp, int nt, \
                        float *y, int64_t ldy, const pa_prefetch *stream) {                               \
    switch (nt) {                                                                          \
      case 5: run_body(kind, cols, wg, xp, y, ldy, 5, stream); break;                      \
      case 6: run_body(kind, cols, wg, xp, y, ldy, 6, stream); break;                      \
      case 7: run_body(kind, cols, wg, xp, y, ldy, 7, stream); break;                      \
      case 8: run_body(kind, cols, wg, xp, y, ldy, 8, stream); break;                      \
      default: name##_4(cols, wg, xp, nt, y, ldy, stream); break;                          \
    }                                                                                      \
  }

#endif
