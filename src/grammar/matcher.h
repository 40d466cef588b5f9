/* matcher.h: the matcher's state and the steps mask.c shares with
 * matcher.c (frames, closure, one byte's advance). Private to src/grammar. */
#ifndef PASADA_GRAMMAR_MATCHER_H
#define PASADA_GRAMMAR_MATCHER_H

#include "grammar/grammar.h"

#define PA_GM_VISIT_SLOTS (2 * PA_G_MAX_CLOSURE) /* a closure's seen set, at most half full */

typedef struct {
  uint32_t node, parent, jc; /* jc: the rule was just called (it cannot end yet) */
} pa_gwork;

/* Where a step writes heads (at most PA_G_MAX_HEADS) and whether the root
 * can end. */
typedef struct {
  pa_ghead *h;
  uint32_t n;
  bool end;
} pa_gout;

/* One level of a walk: the heads after a token's first d bytes. */
typedef struct {
  uint32_t off, n; /* heads at lv[off .. off + n) */
  uint8_t end;     /* the root (or, for a cache, the rule) can end here */
  uint8_t unc;     /* it could end at a shorter prefix: what follows is uncertain */
} pa_glevel;

struct pa_gmatcher {
  const pa_grammar *g;
  /* frames: committed [0, n_committed), scratch [n_committed, n_frames) */
  pa_ghead *frames;
  uint32_t n_frames, cap_frames, n_committed;
  uint32_t *ctab, ctab_mask;          /* committed frames by content: id + 1 */
  uint32_t *stab, *sstamp, stab_mask; /* scratch ones, valid where sstamp == stamp */
  uint32_t stamp;
  /* the accepted state: heads in one of buf[0..2] */
  pa_ghead *buf[3];
  pa_ghead *cur;
  uint32_t n_cur;
  bool end, finished, dead;
  /* closure scratch */
  pa_gwork *work;
  uint64_t vkey[PA_GM_VISIT_SLOTS];
  uint32_t vstamp[PA_GM_VISIT_SLOTS], vcur, vcount;
  uint64_t steps; /* automaton steps of the current call, against PA_G_WORK_BUDGET */
  /* walk levels: level d's heads at lv[lvl[d].off .. + lvl[d].n) */
  uint32_t max_len;
  pa_ghead *lv;
  uint32_t lv_cap;
  pa_glevel *lvl;
  char err[200];
  /* negated token references (negation.c): whether the grammar has any;
   * 5 x PA_G_MAX_HEADS heads of scratch for their walks, and the heads
   * an accepted token reached through them */
  bool has_neg;
  pa_ghead *neg_buf, *neg_acc;
  uint32_t n_neg_acc;
  bool neg_end;
};

bool pa_gm_fail(pa_gmatcher *m, const char *why);
/* The frame (node over parent): the existing one, else a new scratch or
 * committed frame; PA_G_NONE on error. */
uint32_t pa_gm_push(pa_gmatcher *m, uint32_t node, uint32_t parent, bool scratch);
void pa_gm_drop_scratch(pa_gmatcher *m);
bool pa_gm_closure(pa_gmatcher *m, uint32_t node, uint32_t parent, bool scratch, pa_gout *o);
/* The heads after reading `byte` from in[0..n_in) into o. */
bool pa_gm_advance(pa_gmatcher *m, const pa_ghead *in, uint32_t n_in, uint8_t byte, bool scratch,
                   pa_gout *o);

/* Negated token references at the current heads (negation.c). */
bool pa_gm_neg_init(pa_gmatcher *m); /* at creation: has_neg and the buffers */
void pa_gm_neg_free(pa_gmatcher *m);
/* The heads token `token` reaches through them, into neg_acc / neg_end
 * (committed frames). False on error (m->err). */
bool pa_gm_neg_accept(pa_gmatcher *m, int32_t token);
/* Which tokens they allow: *all (any token), else only_but >= 0: any token
 * but that one, else none. False on error. */
bool pa_gm_neg_allowed(pa_gmatcher *m, bool *all, int32_t *only_but);

#endif
