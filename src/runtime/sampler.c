/* sampler.c: picks the next token from a row of logits: logit bias and a
 * grammar's mask (sampler_constrain.c), penalties, top-k, top-p, min-p,
 * temperature, then a draw from a seeded xoshiro256**.
 *
 * Built for 262144-token vocabularies: nothing sorts the whole vocabulary in
 * the common case. Top-k is a bounded heap over one pass of the logits;
 * top-p without top-k orders only the tokens near the best logit when they
 * hold the wanted mass (real logits are peaked), else only those of the
 * bucket of logits where the mass crosses; min-p needs no order at all (a
 * threshold on the logit); no truncation draws from block sums. */
#include "runtime/sampler.h"

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "kernels/ops.h"
#include "runtime/sampler_constrain.h"

typedef struct {
  float logit;
  int32_t id;
} pa_cand;

struct pa_sampler {
  pasada_sampler_params p;
  int32_t n_vocab;
  uint64_t seed; /* the one in use (drawn when p.seed is PASADA_SEED_RANDOM) */
  uint64_t rng[4];

  /* Penalty window: a ring of the last repeat_last_n accepted tokens (a
   * growing array when repeat_last_n is -1) and each token's count in it. */
  int32_t *window;
  int32_t window_cap, window_len, window_head;
  int32_t *counts; /* n_vocab */

  float *work;         /* n_vocab: the penalised copy of the logits */
  pa_cand *cand;       /* n_vocab: candidates that survive truncation */
  float *prob;         /* n_vocab: their probabilities, same order */
  double *bucket_mass; /* PA_TOP_P_BUCKETS: top-p over the whole vocabulary */
  uint16_t *bucket;    /* n_vocab: each token's bucket there (PA_TOP_P_BUCKETS: none) */
  /* The whole vocabulary as candidates (no top-k, top-p 1; see dense()):
   * prepare() leaves prob[id] = each token's weight, block_sum[b] the sum
   * of block b's (PA_SCAN_BLOCK tokens), dense_total their sum, and sets
   * dense instead of filling cand. */
  double *block_sum;
  double dense_total;
  bool dense;

  pa_sconstraint con; /* logit bias and grammar */
};

/* Top-p without top-k buckets the logits by distance to the maximum, so only
 * the tokens of the bucket where the mass crosses top_p need sorting. */
#define PA_TOP_P_BUCKETS 4096
/* Draws tried against a grammar before its mask is computed (no truncation). */
#define PA_REJECT_TRIES 4
/* Scans go by blocks of this many logits; a block whose maximum cannot
 * change the result is skipped after one vectorised pass. */
#define PA_SCAN_BLOCK 64

/* ---- generator: splitmix64 expands the seed, xoshiro256** draws ---- */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
  uint64_t result = rotl64(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64(s[3], 45);
  return result;
}

static void rng_seed(pa_sampler *s) {
  uint64_t x = s->seed;
  for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

double pa_sampler_uniform(pa_sampler *s) {
  return (double)(xoshiro_next(s->rng) >> 11) * 0x1.0p-53; /* 53 random mantissa bits */
}

/* ---- parameters, lifetime ---- */

pasada_sampler_params pasada_sampler_default_params(void) {
  pasada_sampler_params p = {
      .temp = 0.8f,
      .top_k = 40,
      .top_p = 0.95f,
      .min_p = 0.05f,
      .repeat_penalty = 1.0f,
      .repeat_last_n = 64,
      .presence_penalty = 0.0f,
      .frequency_penalty = 0.0f,
      .seed = PASADA_SEED_RANDOM,
  };
  return p;
}

static int check_params(const pasada_sampler_params *p) {
  if (!isfinite(p->temp)) return pa_error(PASADA_ERR_ARG, "sampler: temp is not a finite number");
  if (p->top_k < 0) return pa_error(PASADA_ERR_ARG, "sampler: top_k %d is negative", p->top_k);
  if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
    return pa_error(PASADA_ERR_ARG, "sampler: top_p %g is outside [0, 1]", (double)p->top_p);
  if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
    return pa_error(PASADA_ERR_ARG, "sampler: min_p %g is outside [0, 1]", (double)p->min_p);
  if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty))
    return pa_error(PASADA_ERR_ARG, "sampler: repeat_penalty %g must be a positive number",
                    (double)p->repeat_penalty);
  if (p->repeat_last_n < -1)
    return pa_error(PASADA_ERR_ARG, "sampler: repeat_last_n %d must be -1, 0 or positive",
                    p->repeat_last_n);
  if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
    return pa_error(PASADA_ERR_ARG, "sampler: presence and frequency penalties must be finite");
  return PASADA_OK;
}

/* Clock, process id and a process-wide counter: samplers made in the same
 * instant (a server's concurrent requests) still draw different seeds. */
static uint64_t random_seed(void) {
  static _Atomic uint64_t made;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  x ^= (uint64_t)getpid() << 32;
  x += atomic_fetch_add(&made, 1) * 0xd1b54a32d192ed03ull;
  uint64_t seed = splitmix64(&x);
  return seed == PASADA_SEED_RANDOM ? 0 : seed;
}

int pasada_sampler_create(const pasada_sampler_params *params, int32_t n_vocab,
                          pasada_sampler **out) {
  *out = NULL;
  pasada_sampler_params p = params ? *params : pasada_sampler_default_params();
  int st = check_params(&p);
  if (st) return st;
  if (p.repeat_last_n > (1 << 22)) p.repeat_last_n = -1; /* longer than any context: all tokens */
  if (n_vocab <= 0)
    return pa_error(PASADA_ERR_ARG, "sampler: n_vocab %d must be positive", n_vocab);

  pa_sampler *s = calloc(1, sizeof *s);
  if (!s) return pa_error(PASADA_ERR_NOMEM, "sampler: out of memory");
  s->p = p;
  s->n_vocab = n_vocab;
  s->con.n_vocab = n_vocab;
  s->seed = p.seed == PASADA_SEED_RANDOM ? random_seed() : p.seed;
  s->window_cap = p.repeat_last_n > 0 ? p.repeat_last_n : (p.repeat_last_n < 0 ? 256 : 0);
  s->counts = pa_calloc((size_t)n_vocab, sizeof *s->counts);
  s->work = pa_calloc((size_t)n_vocab, sizeof *s->work);
  s->cand = pa_calloc((size_t)n_vocab, sizeof *s->cand);
  s->prob = pa_calloc((size_t)n_vocab, sizeof *s->prob);
  s->bucket_mass = pa_calloc(PA_TOP_P_BUCKETS, sizeof *s->bucket_mass);
  s->bucket = pa_calloc((size_t)n_vocab, sizeof *s->bucket);
  s->block_sum = pa_calloc((size_t)n_vocab / PA_SCAN_BLOCK + 1, sizeof *s->block_sum);
  s->window = s->window_cap ? malloc((size_t)s->window_cap * sizeof *s->window) : NULL;
  if (!s->counts || !s->work || !s->cand || !s->prob || !s->bucket_mass || !s->bucket ||
      !s->block_sum || (s->window_cap && !s->window)) {
    pasada_sampler_free(s);
    return pa_error(PASADA_ERR_NOMEM, "sampler: out of memory for a vocabulary of %d", n_vocab);
  }
  rng_seed(s);
  *out = s;
  return PASADA_OK;
}

void pasada_sampler_free(pasada_sampler *s) {
  if (!s) return;
  pa_free(s->counts);
  pa_free(s->work);
  pa_free(s->cand);
  pa_free(s->prob);
  pa_free(s->bucket_mass);
  pa_free(s->block_sum);
  pa_free(s->bucket);
  free(s->window);
  pa_sconstraint_free(&s->con);
  free(s);
}

uint64_t pasada_sampler_seed(const pasada_sampler *s) { return s->seed; }

void pasada_sampler_reset(pasada_sampler *s) {
  for (int32_t i = 0; i < s->window_len; i++) s->counts[s->window[i]] = 0;
  s->window_len = 0;
  s->window_head = 0;
  rng_seed(s);
  if (s->con.matcher) pa_gmatcher_reset(s->con.matcher);
}

void pasada_sampler_accept(pasada_sampler *s, int32_t token) {
  if (s->con.matcher) pa_gmatcher_accept(s->con.matcher, token); /* a refusal fails the next sample */
  if (token < 0 || token >= s->n_vocab || s->p.repeat_last_n == 0) return;
  if (s->p.repeat_last_n < 0) { /* unbounded: append, growing the array */
    if (s->window_len == s->window_cap) {
      if (s->window_cap > INT32_MAX / 2) return;
      int32_t cap = s->window_cap * 2;
      int32_t *w = realloc(s->window, (size_t)cap * sizeof *w);
      if (!w) return; /* the penalty then misses this token; sampling still works */
      s->window = w;
      s->window_cap = cap;
    }
    s->window[s->window_len++] = token;
  } else if (s->window_len < s->window_cap) {
    s->window[s->window_len++] = token;
  } else { /* full ring: the oldest token leaves the window */
    s->counts[s->window[s->window_head]]--;
    s->window[s->window_head] = token;
    s->window_head = (s->window_head + 1) % s->window_cap;
  }
  s->counts[token]++;
}

/* ---- penalties ---- */

static bool penalties_active(const pa_sampler *s) {
  return s->window_len > 0 && (s->p.repeat_penalty != 1.0f || s->p.presence_penalty != 0.0f ||
                               s->p.frequency_penalty != 0.0f);
}

void pa_sampler_penalize(pa_sampler *s, float *logits, int32_t n_vocab) {
  const float rep = s->p.repeat_penalty, pres = s->p.presence_penalty,
              freq = s->p.frequency_penalty;
  /* Each distinct token is penalised once: its count is negated while it is
   * done, then restored in a second pass over the window. */
  for (int32_t i = 0; i < s->window_len; i++) {
    int32_t t = s->window[i];
    int32_t c = s->counts[t];
    if (c <= 0 || t >= n_vocab) continue;
    float l = logits[t];
    if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
    l -= (float)c * freq + pres;
    logits[t] = l;
    s->counts[t] = -c;
  }
  for (int32_t i = 0; i < s->window_len; i++) {
    int32_t t = s->window[i];
    if (s->counts[t] < 0) s->counts[t] = -s->counts[t];
  }
}

/* ---- candidate selection ---- */

/* a ranks above b: higher logit, ties to the lower id. */
static inline bool cand_better(pa_cand a, pa_cand b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static int cand_cmp_desc(const void *pa, const void *pb) {
  pa_cand a = *(const pa_cand *)pa, b = *(const pa_cand *)pb;
  return cand_better(a, b) ? -1 : cand_better(b, a) ? 1 : 0;
}

/* Heap on "better": the root is the worst of h[0..n) (best_top false: the
 * kept candidates of top-k) or the best (true: top-p's near set). */
static inline __attribute__((always_inline)) void sift_down(pa_cand *h, int32_t n, int32_t i,
                                                            const bool best_top) {
  for (;;) {
    int32_t l = 2 * i + 1, r = l + 1, w = i;
    if (l < n && (best_top ? cand_better(h[l], h[w]) : cand_better(h[w], h[l]))) w = l;
    if (r < n && (best_top ? cand_better(h[r], h[w]) : cand_better(h[w], h[r]))) w = r;
    if (w == i) return;
    pa_cand t = h[i];
    h[i] = h[w];
    h[w] = t;
    i = w;
  }
}
static void heap_sift_down(pa_cand *h, int32_t n, int32_t i) { sift_down(h, n, i, false); }

static void heap_sift_up(pa_cand *h, int32_t i) {
  while (i > 0) {
    int32_t parent = (i - 1) / 2;
    if (!cand_better(h[parent], h[i])) return;
    pa_cand t = h[i];
    h[i] = h[parent];
    h[parent] = t;
    i = parent;
  }
}

/* The largest (lo false) or smallest (lo true) of n logits, NaN ignored,
 * in eight independent lanes. GCC does not vectorise the select without
 * -ffast-math (it was ~46 us of a server's 49152-logit greedy pick), so on
 * x86-64 the lanes are two SSE2 vectors: maxps(x, lane) and minps(x, lane)
 * are lane when x is NaN, as the select is. */
static inline __attribute__((always_inline)) float block_extreme(const float *l, int32_t n,
                                                                 const bool lo) {
  const float start = lo ? INFINITY : -INFINITY;
  float lane[8];
  int32_t i = 0;
#if defined(__SSE2__)
  __m128 a = _mm_set1_ps(start), b = a;
  for (; i + 8 <= n; i += 8) {
    const __m128 x0 = _mm_loadu_ps(l + i), x1 = _mm_loadu_ps(l + i + 4);
    a = lo ? _mm_min_ps(x0, a) : _mm_max_ps(x0, a);
    b = lo ? _mm_min_ps(x1, b) : _mm_max_ps(x1, b);
  }
  _mm_storeu_ps(lane, a);
  _mm_storeu_ps(lane + 4, b);
#else
  for (int j = 0; j < 8; j++) lane[j] = start;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++)
      if (lo ? l[i + j] < lane[j] : l[i + j] > lane[j]) lane[j] = l[i + j];
#endif
  float r = start;
  for (int j = 0; j < 8; j++)
    if (lo ? lane[j] < r : lane[j] > r) r = lane[j];
  for (; i < n; i++)
    if (lo ? l[i] < r : l[i] > r) r = l[i];
  return r;
}
static float block_max(const float *l, int32_t n) { return block_extreme(l, n, false); }
static float block_min(const float *l, int32_t n) { return block_extreme(l, n, true); }

/* Index of the largest logit, ties to the lowest id; 0 when none is above
 * -infinity. Finds the best block first, then the first match inside it. */
static int32_t argmax(const float *l, int32_t n) {
  float best = -INFINITY;
  int32_t best_block = -1;
  for (int32_t b = 0; b < n; b += PA_SCAN_BLOCK) {
    int32_t len = n - b < PA_SCAN_BLOCK ? n - b : PA_SCAN_BLOCK;
    float m = block_max(l + b, len);
    if (m > best) best = m, best_block = b; /* strict: ties keep the earlier block */
  }
  if (best_block < 0) return 0;
  for (int32_t i = best_block;; i++)
    if (l[i] == best) return i;
}

/* Writes the m best of n logits to out, best first. One pass with a heap of
 * m: O(n log m), and once the heap is full a block whose maximum does not
 * beat the heap's worst is skipped whole. NaN logits rank as -infinity. */
static void select_top(const float *l, int32_t n, int32_t m, pa_cand *out) {
  for (int32_t i = 0; i < m; i++) {
    out[i] = (pa_cand){isnan(l[i]) ? -INFINITY : l[i], i};
    heap_sift_up(out, i);
  }
  for (int32_t b = m; b < n; b += PA_SCAN_BLOCK) {
    int32_t end = n - b < PA_SCAN_BLOCK ? n : b + PA_SCAN_BLOCK;
    if (!(block_max(l + b, end - b) > out[0].logit)) continue;
    for (int32_t i = b; i < end; i++) {
      if (l[i] > out[0].logit) { /* ids ascend, so an equal logit never ranks higher */
        out[0] = (pa_cand){l[i], i};
        heap_sift_down(out, m, 0);
      }
    }
  }
  qsort(out, (size_t)m, sizeof *out, cand_cmp_desc);
}

/* w[i] = exp((l[i] - max_l) x inv_t) where l[i] >= thr, else 0 (NaN and
 * -inf weigh nothing); the exponentials by pa_exp (SIMD). GCC does not
 * vectorise the select without -ffast-math, so on x86-64 it is SSE2 (the
 * same operations as the plain loop). */
static void weights(float *w, const float *l, int32_t n, float max_l, float inv_t, float thr) {
  int32_t i = 0;
#if defined(__SSE2__)
  const __m128 vmax = _mm_set1_ps(max_l), vinv = _mm_set1_ps(inv_t), vthr = _mm_set1_ps(thr),
               ninf = _mm_set1_ps(-INFINITY);
  for (; i + 4 <= n; i += 4) { /* l >= thr is false for NaN; -inf stays -inf */
    const __m128 x = _mm_loadu_ps(l + i), keep = _mm_cmpge_ps(x, vthr);
    const __m128 y = _mm_mul_ps(_mm_sub_ps(x, vmax), vinv);
    _mm_storeu_ps(w + i, _mm_or_ps(_mm_and_ps(keep, y), _mm_andnot_ps(keep, ninf)));
  }
#endif
  for (; i < n; i++) w[i] = l[i] >= thr ? (l[i] - max_l) * inv_t : -INFINITY;
  pa_exp(w, w, n); /* exp(-inf) = 0 */
}

/* Each logit's top-p bucket: min(trunc((max_l - x) x scale), last) for x >=
 * floor_l, last below it, PA_TOP_P_BUCKETS (none) for -infinity and NaN;
 * on x86-64 in SSE2, the same operations as the plain loop. */
static void buckets(uint16_t *bk, const float *l, int32_t n, float max_l, float floor_l,
                    float scale) {
  const int32_t last = PA_TOP_P_BUCKETS - 1;
  int32_t i = 0;
#if defined(__SSE2__)
  const __m128 vmax = _mm_set1_ps(max_l), vfloor = _mm_set1_ps(floor_l),
               vscale = _mm_set1_ps(scale), vlast = _mm_set1_ps((float)last),
               ninf = _mm_set1_ps(-INFINITY);
  const __m128i none = _mm_set1_epi32(PA_TOP_P_BUCKETS);
  for (; i + 8 <= n; i += 8) {
    __m128i b[2];
    for (int h = 0; h < 2; h++) {
      const __m128 x = _mm_loadu_ps(l + i + 4 * h), in = _mm_cmpge_ps(x, vfloor);
      __m128 y = _mm_mul_ps(_mm_sub_ps(vmax, x), vscale);
      y = _mm_min_ps(_mm_or_ps(_mm_and_ps(in, y), _mm_andnot_ps(in, vlast)), vlast);
      const __m128i valid = _mm_castps_si128(_mm_cmpgt_ps(x, ninf));
      b[h] = _mm_or_si128(_mm_and_si128(valid, _mm_cvttps_epi32(y)), _mm_andnot_si128(valid, none));
    }
    _mm_storeu_si128((__m128i *)(bk + i), _mm_packs_epi32(b[0], b[1]));
  }
#endif
  for (; i < n; i++) {
    const float x = l[i];
    float y = x >= floor_l ? (max_l - x) * scale : (float)last;
    y = y < (float)last ? y : (float)last;
    bk[i] = x > -INFINITY ? (uint16_t)(int32_t)y : PA_TOP_P_BUCKETS;
  }
}

/* Sums w[0..n) per block of PA_SCAN_BLOCK tokens into s->block_sum and
 * returns their total in double: each block's in 16 float lanes (lane j:
 * tokens j, j + 16, ... of the block) joined by a fixed tree. GCC does not
 * vectorise the lanes without -ffast-math, so on x86-64 they are SSE2 (the
 * same adds in the same order as the plain loop). */
static double block_sums(pa_sampler *s, const float *w, int32_t n) {
  double total = 0.0;
  int32_t i;
  for (int32_t b0 = 0, k = 0; b0 < n; b0 += PA_SCAN_BLOCK, k++) {
    const int32_t end = n - b0 < PA_SCAN_BLOCK ? n : b0 + PA_SCAN_BLOCK;
    float lane[16] = {0};
    i = b0;
#if defined(__SSE2__)
    __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 16 <= end; i += 16) {
      a0 = _mm_add_ps(a0, _mm_loadu_ps(w + i));
      a1 = _mm_add_ps(a1, _mm_loadu_ps(w + i + 4));
      a2 = _mm_add_ps(a2, _mm_loadu_ps(w + i + 8));
      a3 = _mm_add_ps(a3, _mm_loadu_ps(w + i + 12));
    }
    _mm_storeu_ps(lane, a0);
    _mm_storeu_ps(lane + 4, a1);
    _mm_storeu_ps(lane + 8, a2);
    _mm_storeu_ps(lane + 12, a3);
#endif
    for (; i < end; i++) lane[(i - b0) & 15] += w[i];
    float v[4];
    for (int j = 0; j < 4; j++) v[j] = (lane[j] + lane[4 + j]) + (lane[8 + j] + lane[12 + j]);
    s->block_sum[k] = (double)((v[0] + v[2]) + (v[1] + v[3]));
    total += s->block_sum[k];
  }
  return total;
}

/* Writes the tokens whose logit is >= t to c (NaN never is) and returns
 * their count, or -1 as soon as there would be more than cap. Sixteen logits
 * at a time are compared in SSE2 and skipped when none passes. */
static int32_t gather_near(pa_cand *c, const float *l, int32_t n, float t, int32_t cap) {
  int32_t m = 0, i = 0;
#if defined(__SSE2__)
  const __m128 vt = _mm_set1_ps(t);
  for (; i + 16 <= n; i += 16) {
    const __m128 a = _mm_or_ps(_mm_cmpge_ps(_mm_loadu_ps(l + i), vt),
                               _mm_cmpge_ps(_mm_loadu_ps(l + i + 4), vt));
    const __m128 b = _mm_or_ps(_mm_cmpge_ps(_mm_loadu_ps(l + i + 8), vt),
                               _mm_cmpge_ps(_mm_loadu_ps(l + i + 12), vt));
    if (!_mm_movemask_ps(_mm_or_ps(a, b))) continue;
    for (int32_t j = i; j < i + 16; j++) {
      if (!(l[j] >= t)) continue;
      if (m == cap) return -1;
      c[m++] = (pa_cand){l[j], j};
    }
  }
#endif
  for (; i < n; i++) {
    if (!(l[i] >= t)) continue;
    if (m == cap) return -1;
    c[m++] = (pa_cand){l[i], i};
  }
  return m;
}

/* The near set's size limit: a heap of this many takes a few microseconds. */
#define PA_NEAR_MAX 4096

/* Top-p near the best logit, first: the tokens with logit >= max_l - d are
 * the first ones in the order by logit, so when their weights w (at
 * temperature 1, total z) reach top_p of z the kept set lies among them,
 * and only they are ordered, best first, out of a heap until the mass is
 * reached (or min-p's threshold thr cuts). Real models' logits are peaked
 * (docs/benchmarks.md: ~97% of the mass within 8 of the best, a 0.9 set of
 * at most ~1000 tokens), so d tries 4, 8, then 16 while the set holds at
 * most PA_NEAR_MAX tokens. Writes the kept ones to s->cand and returns their
 * count; -1 when no d settles it (flat logits): then the buckets decide. */
static int32_t top_p_near(pa_sampler *s, const float *l, int32_t n, float max_l, float thr,
                          const float *w, double z) {
  pa_cand *c = s->cand;
  const double top_p = s->p.top_p;
  for (float d = 4.0f; d <= 16.0f; d *= 2.0f) {
    const int32_t m = gather_near(c, l, n, max_l - d, PA_NEAR_MAX);
    if (m < 0) return -1;
    double mass = 0.0;
    for (int32_t i = 0; i < m; i++) mass += w[c[i].id];
    if (mass < top_p * z) continue;
    for (int32_t i = m / 2 - 1; i >= 0; i--) sift_down(c, m, i, true);
    /* Pop the best to the end of the heap's span until the mass is reached:
     * the kept tokens collect at c[m - kept .. m), best last. */
    double cum = 0.0;
    int32_t h = m;
    while (h > 0 && c[0].logit >= thr) {
      const pa_cand best = c[0];
      c[0] = c[--h];
      c[h] = best;
      sift_down(c, h, 0, true);
      cum += w[best.id] / z;
      if (cum >= top_p) break;
    }
    if (h == 0 && cum < top_p) continue; /* rounding: never crossed (min-p cannot end it) */
    const int32_t kept = m - h;
    memmove(c, c + h, (size_t)kept * sizeof *c);
    return kept;
  }
  return -1;
}

/* Top-p over the whole vocabulary, then min-p (logit >= thr): writes the
 * survivors to s->cand and returns their count. The normaliser needs every
 * weight, but only the bucket where the cumulative mass crosses top_p needs
 * sorting: the tokens of the buckets above it are all kept, in any order.
 * Buckets are equal slices of [max_l - range, max_l] (range at most 40:
 * exp(-40) is far below what float sums resolve); lower logits share the
 * last one. */
static int32_t top_p_full(pa_sampler *s, const float *l, int32_t n, float max_l, float thr) {
  float *w = s->prob; /* scratch until prepare() fills it */
  weights(w, l, n, max_l, 1.0f, -INFINITY);
  const double z = block_sums(s, w, n); /* the normaliser of both ways below */
  const int32_t near = top_p_near(s, l, n, max_l, thr, w, z);
  if (near >= 0) return near;

  const float lo = block_min(l, n);
  float range = max_l - lo > 40.0f ? 40.0f : max_l - lo;
  const int32_t last = PA_TOP_P_BUCKETS - 1;
  const float scale = range > 0.0f ? (float)last / range : 0.0f, floor_l = max_l - range;
  double *mass = s->bucket_mass;
  memset(mass, 0, PA_TOP_P_BUCKETS * sizeof *mass);
  uint16_t *bk = s->bucket;
  buckets(bk, l, n, max_l, floor_l, scale);
  for (int32_t i = 0; i < n; i++)
    if (bk[i] <= last) mass[bk[i]] += w[i];
  const double top_p = s->p.top_p;
  double cum = 0.0;
  int32_t cross = last;
  for (int32_t b = 0; b < PA_TOP_P_BUCKETS; b++) {
    if (cum + mass[b] / z >= top_p) {
      cross = b;
      break;
    }
    cum += mass[b] / z;
  }

  /* Tokens of the buckets above `cross` that pass min-p go to the front;
   * those of `cross` itself to the back, to be sorted. */
  pa_cand *c = s->cand;
  int32_t above = 0, at = n;
  for (int32_t i = 0; i < n; i++) {
    const int32_t b = bk[i];
    if (b < cross) {
      if (l[i] >= thr) c[above++] = (pa_cand){l[i], i};
    } else if (b == cross) {
      c[--at] = (pa_cand){l[i], i};
    }
  }
  int32_t n_at = n - at;
  qsort(c + at, (size_t)n_at, sizeof *c, cand_cmp_desc);
  int32_t kept = 0;
  while (kept < n_at) {
    pa_cand t = c[at + kept];
    if (t.logit < thr) break; /* min-p cuts first */
    kept++;
    cum += w[t.id] / z;
    if (cum >= top_p) break;
  }
  memmove(c + above, c + at, (size_t)kept * sizeof *c);
  return above + kept;
}

/* Every token as a candidate (no top-k, top-p 1: OpenAI's default), min-p
 * as the logit threshold thr: w[id] = exp((l[id] - max_l) / T) where l[id]
 * >= thr, else 0, into s->prob (weights()), with their block sums and total
 * (block_sums()). A candidate list with scalar expf took ~300 us for 49152
 * tokens, and 16 users' draws were a sixth of a server step. False when the
 * weights are degenerate (1/T overflows). */
static bool dense(pa_sampler *s, const float *l, int32_t n, float max_l, float thr) {
  weights(s->prob, l, n, max_l, 1.0f / s->p.temp, thr);
  s->dense_total = block_sums(s, s->prob, n);
  return s->dense_total > 0.0 && isfinite(s->dense_total);
}

/* The token where the running sum of dense()'s weights, in id order, first
 * exceeds r x their total (r in [0, 1)): whole blocks skipped by their
 * sums, then token by token; never a token of weight 0. */
static int32_t dense_draw(const pa_sampler *s, double r) {
  const float *w = s->prob;
  const int32_t n = s->n_vocab;
  const double target = r * s->dense_total;
  double cum = 0.0;
  int32_t i = 0;
  for (int32_t k = 0; i + PA_SCAN_BLOCK < n && cum + s->block_sum[k] <= target; k++) {
    cum += s->block_sum[k];
    i += PA_SCAN_BLOCK;
  }
  for (; i < n; i++) {
    cum += w[i];
    if (target < cum) return i;
  }
  for (i = n - 1; i > 0; i--) /* rounding left the target above the sum */
    if (w[i] > 0.0f) return i;
  return 0;
}

/* Runs penalties and truncation; leaves the m surviving candidates in
 * s->cand[0..m) with their probabilities (temperature applied, summing to 1)
 * in s->prob[0..m), or sets s->dense (see dense()) and returns n. */
/* The logits the chain starts from: the bias added, the grammar's mask
 * (s->con.allowed) applied when `mask`, the penalties applied; the caller's
 * own when none of them changes anything. */
static const float *base_logits(pa_sampler *s, const float *logits, int32_t n, bool mask) {
  const bool pen = penalties_active(s);
  if (!pen && !s->con.n_bias && !mask) return logits;
  memcpy(s->work, logits, (size_t)n * sizeof *logits);
  pa_sconstraint_add_bias(&s->con, s->work);
  if (mask) pa_sconstraint_apply_mask(&s->con, s->work);
  if (pen) pa_sampler_penalize(s, s->work, n);
  return s->work;
}

static int32_t prepare(pa_sampler *s, const float *logits, int32_t n, bool mask) {
  const pasada_sampler_params *p = &s->p;
  const float *l = base_logits(s, logits, n, mask);
  s->dense = false;
  pa_cand *c = s->cand;

  int32_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
  float max_l = k < n || p->temp <= 0.0f ? 0.0f : block_max(l, n);
  if (p->temp <= 0.0f || k == 1 || (k == n && !isfinite(max_l))) {
    /* greedy; also the fallback when every logit is masked (or broken) */
    int32_t best = argmax(l, n);
    c[0] = (pa_cand){l[best], best};
    s->prob[0] = 1.0f;
    return 1;
  }

  int32_t m;
  if (k < n) { /* top-k, then top-p over the k renormalised, then min-p */
    select_top(l, n, k, c);
    max_l = c[0].logit;
    m = k;
    if (p->top_p < 1.0f && isfinite(max_l)) {
      double z = 0.0;
      for (int32_t i = 0; i < k; i++) z += exp((double)c[i].logit - max_l);
      double cum = 0.0;
      for (int32_t i = 0; i < k; i++) {
        cum += exp((double)c[i].logit - max_l) / z;
        if (cum >= p->top_p) {
          m = i + 1;
          break;
        }
      }
    }
    if (p->min_p > 0.0f) {
      float thr = max_l + logf(p->min_p);
      while (m > 1 && c[m - 1].logit < thr) m--;
    }
  } else {
    float thr = p->min_p > 0.0f ? max_l + logf(p->min_p) : -INFINITY;
    if (p->top_p < 1.0f) {
      m = top_p_full(s, l, n, max_l, thr);
    } else { /* no order needed: every token above the min-p threshold */
      s->dense = dense(s, l, n, max_l, thr);
      if (s->dense) return n;
      const int32_t best = argmax(l, n); /* degenerate weights */
      c[0] = (pa_cand){l[best], best};
      s->prob[0] = 1.0f;
      return 1;
    }
  }
  if (m < 1) m = 1;

  const float inv_t = 1.0f / p->temp;
  for (int32_t i = 0; i < m; i++) s->prob[i] = (c[i].logit - max_l) * inv_t;
  pa_exp(s->prob, s->prob, m);
  double sum = 0.0;
  for (int32_t i = 0; i < m; i++) sum += s->prob[i];
  if (!(sum > 0.0) || !isfinite(sum)) { /* degenerate weights: keep the best candidate */
    int32_t best = 0;
    for (int32_t i = 1; i < m; i++)
      if (cand_better(c[i], c[best])) best = i;
    c[0] = c[best];
    s->prob[0] = 1.0f;
    return 1;
  }
  for (int32_t i = 0; i < m; i++) s->prob[i] = (float)(s->prob[i] / sum);
  return m;
}

static int check_call(const pa_sampler *s, const float *logits, int32_t n_vocab) {
  if (!logits) return pa_error(PASADA_ERR_ARG, "sampler: no logits");
  if (n_vocab != s->n_vocab)
    return pa_error(PASADA_ERR_ARG, "sampler: %d logits given, the sampler was made for %d",
                    n_vocab, s->n_vocab);
  return PASADA_OK;
}

/* The pick of pasada_sampler_sample, its arguments checked. */
static int32_t sample_checked(pa_sampler *s, const float *logits, int32_t n_vocab, bool mask) {
  int32_t m = prepare(s, logits, n_vocab, mask);
  if (s->dense) return dense_draw(s, pa_sampler_uniform(s));
  if (m == 1) return s->cand[0].id;
  double r = pa_sampler_uniform(s), cum = 0.0;
  for (int32_t i = 0; i < m; i++) {
    cum += s->prob[i];
    if (r < cum) return s->cand[i].id;
  }
  for (int32_t i = m - 1; i > 0; i--) /* rounding left r above the total */
    if (s->prob[i] > 0.0f) return s->cand[i].id;
  return s->cand[0].id;
}

int pasada_sampler_sample(pasada_sampler *s, const float *logits, int32_t n_vocab, int32_t *out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "sampler: no output given");
  *out = -1;
  if (!s) return pa_error(PASADA_ERR_ARG, "sampler: no sampler");
  int st = check_call(s, logits, n_vocab);
  if (st) return st;
  if (!s->con.matcher) {
    *out = sample_checked(s, logits, n_vocab, false);
    return PASADA_OK;
  }
  if (s->p.temp <= 0.0f || s->p.top_k == 1) {
    /* greedy: the best token of the unmasked logits, when the grammar allows
     * it, is the best of the masked ones (ties go to the lowest id either
     * way); only otherwise is the whole mask needed */
    const int32_t best = argmax(base_logits(s, logits, n_vocab, false), n_vocab);
    if (pa_gmatcher_allows(s->con.matcher, best)) {
      *out = best;
      return PASADA_OK;
    }
  }
  if ((s->p.top_k <= 0 || s->p.top_k >= n_vocab) && s->p.top_p >= 1.0f && s->p.min_p <= 0.0f &&
      s->p.temp > 0.0f) {
    /* no truncation: the chain draws token x with weight w(x), the same
     * over the masked logits but for the masked tokens, so a draw repeated
     * until the grammar allows it (rejection) is a draw from the masked
     * chain; after a few refusals the mask decides (still exact: each
     * refused draw leaves the distribution of what follows unchanged) */
    prepare(s, logits, n_vocab, false);
    for (int k = 0; s->dense && k < PA_REJECT_TRIES; k++) {
      const int32_t t = dense_draw(s, pa_sampler_uniform(s));
      if (pa_gmatcher_allows(s->con.matcher, t)) {
        *out = t;
        return PASADA_OK;
      }
    }
  }
  if ((st = pa_sconstraint_mask(&s->con))) return st;
  int32_t t = sample_checked(s, logits, n_vocab, true);
  /* every allowed logit -infinity (or NaN): the chain's fallback picked an
   * arbitrary token; keep to the grammar */
  *out = pa_sconstraint_allowed(&s->con, t) ? t : pa_sconstraint_first_allowed(&s->con);
  return PASADA_OK;
}

int pa_sampler_distribution(pa_sampler *s, const float *logits, int32_t n_vocab, float *probs) {
  int st = check_call(s, logits, n_vocab);
  if (st) return st;
  const bool mask = s->con.matcher != NULL;
  if (mask && (st = pa_sconstraint_mask(&s->con))) return st;
  int32_t m = prepare(s, logits, n_vocab, mask);
  if (s->dense) {
    for (int32_t i = 0; i < n_vocab; i++) probs[i] = (float)(s->prob[i] / s->dense_total);
    return PASADA_OK;
  }
  memset(probs, 0, (size_t)n_vocab * sizeof *probs);
  for (int32_t i = 0; i < m; i++) probs[s->cand[i].id] = s->prob[i];
  return PASADA_OK;
}

/* ---- logit bias and grammars (sampler_constrain.c) ---- */

int pasada_sampler_set_logit_bias(pasada_sampler *s, const int32_t *ids, const float *bias,
                                  size_t n) {
  if (!s) return pa_error(PASADA_ERR_ARG, "sampler: no sampler");
  return pa_sconstraint_set_bias(&s->con, ids, bias, n);
}

int pasada_sampler_set_grammar(pasada_sampler *s, const pasada_grammar *g) {
  if (!s) return pa_error(PASADA_ERR_ARG, "sampler: no sampler");
  return pa_sconstraint_set_grammar(&s->con, g);
}

bool pasada_sampler_grammar_can_end(const pasada_sampler *s) {
  return s && s->con.matcher && pa_gmatcher_can_end(s->con.matcher);
}

bool pasada_sampler_grammar_must_end(const pasada_sampler *s) {
  return s && s->con.matcher && pa_gmatcher_must_end(s->con.matcher);
}
