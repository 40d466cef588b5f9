/* test_grammar_mask.c: the token mask and the sampler under a grammar. The
 * mask (cached per-state token sets, walks over the byte-sorted vocabulary)
 * against its brute-force twin on random walks through several grammars,
 * on a synthetic vocabulary and on SmolLM2's; then the sampler: logit bias,
 * greedy decoding equal to the argmax of the masked logits, drawn tokens
 * always allowed, the distribution equal to the chain's over the masked
 * logits, accept/reset/end semantics and errors. */
#include <math.h>

#include "runtime/sampler.h"
#include "test_grammar_util.h"

static const char *grammars[] = {
    TEST_GBNF_JSON,
    /* a fixed-shape object: literals, an enum, bounded strings and numbers */
    "root ::= \"{\" sp \"\\\"name\\\":\" sp str \",\" sp \"\\\"kind\\\":\" sp (\"\\\"a\\\"\" | "
    "\"\\\"ab\\\"\" | \"\\\"b\\\"\") "
    "\",\" sp \"\\\"n\\\":\" sp [1-9] [0-9]{0,2} sp \"}\"\n"
    "str ::= \"\\\"\" [^\"\\\\]{1,6} \"\\\"\"\nsp ::= \" \"?\n",
    /* recursion where rules end mid-token: nested lists */
    "root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= list | \"a\" | \"ab\" | "
    "\"\\\"\" [a-z]* \"\\\"\"\n",
    /* free text with multi-byte characters and a terminator */
    "root ::= ([^\\n] | \"\\n\" [a-z])* \"\\n\\n\"\n",
    /* ambiguity: several heads at once */
    "root ::= (\"a\" | \"ab\" | \"a\" \"b\" \"b\"?)+ (\",\" root)?\n",
    /* right recursion under a pushed frame, nullable calls */
    "root ::= \"{\" a \"}\"\na ::= \"x\" a | \"y\" b | \"\"\nb ::= e* \"z\"? a\ne ::= \"\" | "
    "\"w\"\n",
    /* an object's keys as the schema converter writes them: a rule of its
     * own (too big to inline), whose states after each character may end
     * it, and whose first characters pick known names */
    "root ::= \"{\" key \":\" [0-9] (\",\" key \":\" [0-9])* \"}\"\nkey ::= \"\\\"\" name "
    "\"\\\"\"\nname ::= \"\" | [^\"\\\\\\x00-\\x1Fn] kc{0,300} | \"n\" (\"\" | "
    "[^\"\\\\\\x00-\\x1Fa] kc{0,300} | \"a\" kc{0,300})\nkc ::= [^\"\\\\\\x00-\\x1F]\n",
    /* counted characters of classes without some non-ASCII characters (of
     * two, three and four bytes), of ASCII only, and characters after
     * which fewer may follow */
    "root ::= [^\"\\\\\u00e9]{0,7} \"\\\" \" [ -~]{0,5} \"\\n\"\n",
    "root ::= [^\"\\\\\u3000-\u9fff]{0,6} \"\\n\"\n",
    "root ::= [^\"\\\\\U00010000-\U0010FFFF]{0,6} \"\\n\"\n",
    "root ::= [ -~]* ([^\\x00-\\x7F] [ -~]{0,2})? \"\\n\"\n",
    /* characters through a state that may end a rule of its own (too big
     * to inline), whose caller reads more of them; and counted characters
     * followed by multi-byte ones only */
    "root ::= \"<\" name [^\"\\\\\\x00-\\x1F]{0,4} \"\\n\"\nname ::= [^\"\\\\\\x00-\\x1F] "
    "(\"\\\"\" [0-9])? | \"\\\\\" [0-9]{300}\n",
    "root ::= [^\"\\\\\\x00-\\x1F]{0,2} [^\\x00-\\x7F]? \"\\n\"\n",
};

/* Random walks: at each step the mask equals the twin's verdict token by
 * token (all of them, or `sample` of them plus every allowed one), and
 * pa_gmatcher_allows agrees; then a random allowed token is accepted. */
static void walk_grammar(const pasada_tokenizer *tok, const char *gbnf, int walks, int steps,
                         int sample) {
  pasada_grammar *g = compile(tok, gbnf);
  if (!g) return;
  const pa_gvocab *v = g->vocab;
  const int32_t nv = v->n_vocab;
  pa_gmatcher *m, *twin;
  CHECK(pa_gmatcher_create(g, &m) == PASADA_OK && pa_gmatcher_create(g, &twin) == PASADA_OK,
        "matchers");
  uint64_t *bits = calloc(((size_t)nv + 63) / 64, 8);
  int32_t *allowed = malloc((size_t)nv * sizeof *allowed);
  uint8_t *text = malloc(1 << 16);
  long checked = 0, masks = 0;
  for (int w = 0; w < walks; w++) {
    pa_gmatcher_reset(m);
    size_t n = 0;
    for (int s = 0; s < steps; s++) {
      int64_t count = pa_gmatcher_mask(m, bits);
      CHECK(count >= 0, "mask: %s", pasada_last_error());
      if (count < 0) break;
      masks++;
      int32_t na = 0;
      for (int32_t id = 0; id < nv; id++) {
        bool bit = bits[id >> 6] >> (id & 63) & 1;
        if (bit) allowed[na++] = id;
        CHECK(!bit || v->rank[id] >= 0 || pa_gvocab_is_eog(v, id), "control token %d allowed", id);
        if (!bit && sample && (int)(rng() % (uint64_t)nv) >= sample) continue;
        bool want = twin_allows(twin, v, text, n, id);
        CHECK(bit == want, "walk %d step %d after '%.*s': token %d mask %d, twin %d", w, s, (int)n,
              (const char *)text, id, bit, want);
        CHECK(pa_gmatcher_allows(m, id) == want, "allows(%d) disagrees after '%.*s'", id, (int)n,
              (const char *)text);
        checked++;
      }
      CHECK(na == count, "mask count %lld, bits %d", (long long)count, na);
      if (!na) break;
      int32_t t = allowed[rng() % (uint64_t)na];
      if (pa_gvocab_is_eog(v, t) && na > 1 && rng() % 4) t = allowed[(rng() % (uint64_t)na)];
      CHECK(pa_gmatcher_accept(m, t) == PASADA_OK, "accept %d: %s", t, pasada_last_error());
      if (pa_gvocab_is_eog(v, t)) {
        CHECK(pa_gmatcher_must_end(m), "after the end only the end");
        CHECK(pa_gmatcher_mask(m, bits) >= 1 && pa_gmatcher_allows(m, t), "the end stays allowed");
        break;
      }
      const int32_t r = v->rank[t];
      const uint32_t len = v->off[r + 1] - v->off[r];
      if (n + len >= (1 << 16)) break;
      memcpy(text + n, v->bytes + v->off[r], len);
      n += len;
    }
  }
  printf("  %ld token verdicts over %ld masks\n", checked, masks);
  CHECK(masks >= walks, "walks too short");
  free(bits);
  free(allowed);
  free(text);
  pa_gmatcher_free(m);
  pa_gmatcher_free(twin);
  pasada_grammar_free(g);
}

/* Tokens judged by their characters alone sit between walked ones: the
 * walk after them must start from the prefix it shares with the last
 * walked token through every token between. Here "ma", "mz" and "n" are
 * judged alone after `m\` was walked; `n\t` must then be walked from its
 * first byte, not from the "m" its neighbour shares with `m\`. */
static void test_walk_after_judged(void) {
  static const char *const toks[] = {"<unk>", "<s>", "</s>", "\"", "m",
                                     "m\\t",  "ma",  "mz",   "n",  "n\\t"};
  const int n = (int)(sizeof toks / sizeof toks[0]);
  int32_t types[16];
  for (int i = 0; i < n; i++)
    types[i] = i == 0 ? PA_TOKEN_UNKNOWN : i < 3 ? PA_TOKEN_CONTROL : PA_TOKEN_NORMAL;
  pa_tokenizer *tok = write_vocab(toks, types, n, SYN_EOS);
  /* after "n", \t escapes; after any other first character, nothing does */
  pasada_grammar *g =
      tok ? compile(tok,
                    "root ::= \"\\\"\" (\"n\" ([^\"\\\\] | \"\\\\\" \"t\")* | [^\"\\\\n] "
                    "[^\"\\\\]*) \"\\\"\"\n")
          : NULL;
  pa_gmatcher *m = NULL, *twin = NULL;
  if (g && pa_gmatcher_create(g, &m) == PASADA_OK && pa_gmatcher_create(g, &twin) == PASADA_OK &&
      pa_gmatcher_accept(m, 3) == PASADA_OK) {
    uint64_t bits[1];
    CHECK(pa_gmatcher_mask(m, bits) > 0, "mask: %s", pasada_last_error());
    for (int32_t id = 0; id < n; id++)
      CHECK((bits[0] >> id & 1) == twin_allows(twin, g->vocab, (const uint8_t *)"\"", 1, id),
            "after '\"': token %d ('%s') mask %d", id, toks[id], (int)(bits[0] >> id & 1));
    CHECK((bits[0] >> 9 & 1) && !(bits[0] >> 5 & 1), "after '\"': n\\t allowed, m\\t not");
  } else {
    CHECK(0, "setup: %s", pasada_last_error());
  }
  pa_gmatcher_free(m);
  pa_gmatcher_free(twin);
  pasada_grammar_free(g);
  pa_tokenizer_free(tok);
}

/* ---- the sampler ---- */

static pasada_sampler *make_sampler(float temp, int32_t top_k, float top_p, float min_p, int32_t nv,
                                    uint64_t seed) {
  pasada_sampler_params p = pasada_sampler_default_params();
  p.temp = temp, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.seed = seed;
  p.repeat_penalty = 1.1f;
  pasada_sampler *s = NULL;
  CHECK(pasada_sampler_create(&p, nv, &s) == PASADA_OK, "sampler: %s", pasada_last_error());
  return s;
}

static void random_logits(float *l, int32_t n) {
  for (int32_t i = 0; i < n; i++) l[i] = (float)(rnd_unit() * 8.0 - 4.0);
}

static void test_logit_bias(int32_t nv) {
  float *l = malloc((size_t)nv * sizeof *l);
  random_logits(l, nv);
  pasada_sampler *s = make_sampler(0.0f, 40, 0.95f, 0.05f, nv, 1);
  int32_t best = -1, t = -1;
  pasada_sampler_sample(s, l, nv, &best);
  int32_t ids[2] = {best, 7};
  float bias[2] = {-100.0f, 100.0f};
  CHECK(pasada_sampler_set_logit_bias(s, ids, bias, 2) == PASADA_OK, "bias: %s",
        pasada_last_error());
  pasada_sampler_sample(s, l, nv, &t);
  CHECK(t == 7, "+100 forces token 7 (got %d, best was %d)", t, best);
  float ban[1] = {-100.0f};
  pasada_sampler_set_logit_bias(s, &best, ban, 1);
  pasada_sampler_sample(s, l, nv, &t);
  CHECK(t != best, "-100 bans the best token");
  /* a bias is added: a small one on the runner-up makes it the best */
  float *m = malloc((size_t)nv * sizeof *m);
  memcpy(m, l, (size_t)nv * sizeof *m);
  m[best] = -INFINITY;
  int32_t second = 0;
  for (int32_t i = 1; i < nv; i++)
    if (m[i] > m[second]) second = i;
  float nudge[1] = {l[best] - l[second] + 0.01f};
  pasada_sampler_set_logit_bias(s, &second, nudge, 1);
  pasada_sampler_sample(s, l, nv, &t);
  CHECK(t == second, "a bias of the gap plus a little makes the runner-up best (%d, want %d)", t,
        second);
  int32_t bad = nv;
  float nan[1] = {NAN};
  CHECK(pasada_sampler_set_logit_bias(s, &bad, bias, 1) == PASADA_ERR_ARG,
        "id outside the vocabulary");
  CHECK(pasada_sampler_set_logit_bias(s, ids, nan, 1) == PASADA_ERR_ARG, "NaN bias");
  pasada_sampler_sample(s, l, nv, &t);
  CHECK(t == second, "a refused bias leaves the old one");
  CHECK(pasada_sampler_set_logit_bias(s, NULL, NULL, 0) == PASADA_OK, "clear");
  pasada_sampler_sample(s, l, nv, &t);
  CHECK(t == best, "cleared bias: the best again");
  pasada_sampler_free(s);
  free(l);
  free(m);
}

/* The sampler under a grammar on random logits: greedy picks the argmax
 * of the masked logits; draws are always allowed; the distribution is the
 * chain's over the masked logits. */
static void test_sampler_grammar(const pasada_tokenizer *tok) {
  pasada_grammar *g = compile(tok, grammars[0]);
  if (!g) return;
  const pa_gvocab *v = g->vocab;
  const int32_t nv = v->n_vocab;
  float *l = malloc((size_t)nv * sizeof *l), *masked = malloc((size_t)nv * sizeof *masked);
  float *p1 = malloc((size_t)nv * sizeof *p1), *p2 = malloc((size_t)nv * sizeof *p2);
  uint64_t *bits = calloc(((size_t)nv + 63) / 64, 8);
  pa_gmatcher *ref;
  pa_gmatcher_create(g, &ref);
  const struct {
    float temp, top_p, min_p;
    int32_t top_k;
  } cfg[] = {{0.0f, 1.0f, 0.0f, 0}, {1.0f, 1.0f, 0.0f, 0}, {0.8f, 0.95f, 0.05f, 40},
             {1.2f, 0.9f, 0.0f, 0}, {0.7f, 1.0f, 0.1f, 0}, {1.0f, 1.0f, 0.0f, 1}};
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    pasada_sampler *s =
        make_sampler(cfg[c].temp, cfg[c].top_k, cfg[c].top_p, cfg[c].min_p, nv, 42 + c);
    pasada_sampler *plain =
        make_sampler(cfg[c].temp, cfg[c].top_k, cfg[c].top_p, cfg[c].min_p, nv, 42 + c);
    CHECK(pasada_sampler_set_grammar(s, g) == PASADA_OK, "set grammar: %s", pasada_last_error());
    int32_t bias_id[1] = {(int32_t)(rng() % (uint64_t)nv)};
    float bias[1] = {2.5f};
    pasada_sampler_set_logit_bias(s, bias_id, bias, 1);
    pasada_sampler_set_logit_bias(plain, bias_id, bias, 1);
    pa_gmatcher_reset(ref);
    for (int step = 0; step < 40; step++) {
      random_logits(l, nv);
      /* the reference: the bias, then -infinity outside the mask, then the
       * plain sampler's chain (its penalties see the same tokens) */
      CHECK(pa_gmatcher_mask(ref, bits) > 0, "reference mask");
      memcpy(masked, l, (size_t)nv * sizeof *l);
      for (int32_t i = 0; i < nv; i++)
        if (!(bits[i >> 6] >> (i & 63) & 1)) masked[i] = -INFINITY;
      CHECK(pa_sampler_distribution(s, l, nv, p1) == PASADA_OK, "distribution: %s",
            pasada_last_error());
      CHECK(pa_sampler_distribution(plain, masked, nv, p2) == PASADA_OK, "plain distribution");
      bool same = true;
      for (int32_t i = 0; i < nv && same; i++) same = p1[i] == p2[i];
      CHECK(same,
            "config %zu step %d: the distribution differs from the chain over the masked logits", c,
            step);
      if (step == 3 && cfg[c].temp > 0.0f && cfg[c].top_k != 1) {
        /* the draws follow the distribution, whichever way they are made
         * (rejection against the grammar or the mask) */
        const int draws = test_reps(20000, 4000);
        int *count = calloc((size_t)nv, sizeof *count);
        for (int k = 0; k < draws; k++) {
          int32_t t = -1;
          pasada_sampler_sample(s, l, nv, &t);
          if (t >= 0) count[t]++;
        }
        for (int32_t i = 0; i < nv; i++) {
          const double f = (double)count[i] / draws, q = p1[i];
          CHECK(!count[i] || q > 0, "config %zu: token %d drawn with probability 0", c, i);
          CHECK(fabs(f - q) <= 5.0 * sqrt(q * (1 - q) / draws) + 2.0 / draws,
                "config %zu: token %d drawn %.4f, p %.4f", c, i, f, q);
        }
        free(count);
      }
      int32_t t = -1;
      CHECK(pasada_sampler_sample(s, l, nv, &t) == PASADA_OK, "sample: %s", pasada_last_error());
      CHECK(t >= 0 && (bits[t >> 6] >> (t & 63) & 1), "config %zu: drawn token %d is not allowed",
            c, t);
      if (cfg[c].temp <= 0.0f || cfg[c].top_k == 1) {
        /* greedy: the plain chain's pick over the masked logits (its own
         * bias and penalties), whichever path the grammar's sampler took */
        int32_t best = -1;
        CHECK(pasada_sampler_sample(plain, masked, nv, &best) == PASADA_OK, "plain sample");
        CHECK(t == best, "greedy: %d, the masked argmax is %d", t, best);
      }
      if (pa_gvocab_is_eog(v, t)) break;
      pasada_sampler_accept(s, t);
      pasada_sampler_accept(plain, t);
      pa_gmatcher_accept(ref, t);
    }
    pasada_sampler_free(s);
    pasada_sampler_free(plain);
  }
  pa_gmatcher_free(ref);
  free(l), free(masked), free(p1), free(p2), free(bits);
  pasada_grammar_free(g);
}

/* Accept, reset, removal, end and errors. */
static void test_sampler_semantics(const pasada_tokenizer *tok) {
  pasada_grammar *g = compile(tok, "root ::= \"ab\"");
  if (!g) return;
  const pa_gvocab *v = g->vocab;
  const int32_t nv = v->n_vocab;
  pasada_sampler *s = make_sampler(0.0f, 0, 1.0f, 0.0f, nv, 1);
  float *l = calloc((size_t)nv, sizeof *l);
  CHECK(!pasada_sampler_grammar_can_end(s) && !pasada_sampler_grammar_must_end(s),
        "no grammar: no end");
  pasada_sampler_set_grammar(s, g);
  int32_t a = pa_tokenizer_find(tok, "a"), b = pa_tokenizer_find(tok, "b"),
          byte_a = pa_tokenizer_find(tok, "<0x61>");
  CHECK(a >= 0 && b >= 0 && byte_a >= 0, "synthetic vocabulary has a, b, <0x61>");
  /* greedy wants the control token "{" (same text as nothing allowed) */
  l[SYN_CONTROL] = 10.0f;
  l[a] = 1.0f;
  l[byte_a] = 0.5f;
  int32_t t = -1;
  CHECK(pasada_sampler_sample(s, l, nv, &t) == PASADA_OK && t == a,
        "control token refused, 'a' picked (%d)", t);
  pasada_sampler_accept(s, t);
  CHECK(!pasada_sampler_grammar_can_end(s), "after 'a': not yet");
  pasada_sampler_accept(s, b);
  CHECK(pasada_sampler_grammar_can_end(s) && pasada_sampler_grammar_must_end(s),
        "after 'ab': must end");
  l[SYN_EOS] = -5.0f;
  CHECK(pasada_sampler_sample(s, l, nv, &t) == PASADA_OK && t == SYN_EOS,
        "only the end is left (%d)", t);
  pasada_sampler_reset(s);
  CHECK(!pasada_sampler_grammar_can_end(s), "reset restarts the grammar");
  CHECK(pasada_sampler_sample(s, l, nv, &t) == PASADA_OK && t == a, "after reset 'a' again");
  pasada_sampler_accept(s, SYN_EOS); /* not allowed here */
  CHECK(pasada_sampler_sample(s, l, nv, &t) == PASADA_ERR_ARG &&
            strstr(pasada_last_error(), "not allowed"),
        "a refused accept fails the next sample: %s", pasada_last_error());
  pasada_sampler_set_grammar(s, NULL);
  CHECK(pasada_sampler_sample(s, l, nv, &t) == PASADA_OK && t == SYN_CONTROL,
        "grammar removed: plain argmax");
  pasada_sampler *other = make_sampler(0.0f, 0, 1.0f, 0.0f, nv + 1, 1);
  CHECK(pasada_sampler_set_grammar(other, g) == PASADA_ERR_ARG,
        "another vocabulary size is refused");
  pasada_sampler_free(other);
  /* a grammar no token can continue: an error, not a wrong token */
  pasada_grammar *none = compile(tok, "root ::= \"\\U0001F600\"");
  if (none) {
    pasada_sampler_set_grammar(s, none);
    int st = pasada_sampler_sample(s, l, nv, &t);
    /* the byte tokens spell it: allowed; only when none could would it fail */
    CHECK(st == PASADA_OK && t == pa_tokenizer_find(tok, "<0xF0>"),
          "the emoji's first byte token (%d)", t);
    pasada_sampler_set_grammar(s, NULL);
    pasada_grammar_free(none);
  }
  pasada_sampler_free(s);
  free(l);
  pasada_grammar_free(g);
}

/* The tokens a matcher allows now, as ids (at most cap). */
static int32_t allowed_ids(pa_gmatcher *m, int32_t nv, int32_t *out, int32_t cap) {
  uint64_t *bits = calloc(((size_t)nv + 63) / 64, 8);
  int32_t n = 0;
  CHECK(pa_gmatcher_mask(m, bits) >= 0, "mask: %s", pasada_last_error());
  for (int32_t id = 0; id < nv; id++)
    if (bits[id >> 6] >> (id & 63) & 1) {
      if (n < cap) out[n] = id;
      n++;
    }
  free(bits);
  return n;
}

/* The grammar gbnf compiled for tok (*g) and a matcher of it; NULL where
 * either fails. close_matcher frees both. */
static pa_gmatcher *open_matcher(const pasada_tokenizer *tok, const char *gbnf, pasada_grammar **g) {
  pa_gmatcher *m = NULL;
  *g = compile(tok, gbnf);
  if (*g && pa_gmatcher_create(*g, &m) != PASADA_OK) m = NULL;
  return m;
}

static void close_matcher(pa_gmatcher *m, pasada_grammar *g) {
  pa_gmatcher_free(m);
  pasada_grammar_free(g);
}

static void expect_grammar_error(const pasada_tokenizer *tok, const char *gbnf, const char *part) {
  pasada_grammar *g = NULL;
  int st = pasada_grammar_create(tok, gbnf, strlen(gbnf), NULL, &g);
  CHECK(st == PASADA_ERR_ARG && !g, "'%s' should fail", gbnf);
  CHECK(strstr(pasada_last_error(), part), "'%s': message '%s' lacks '%s'", gbnf,
        pasada_last_error(), part);
  pasada_grammar_free(g);
}

/* Token references (<[id]>, <text>) on the synthetic vocabulary (ids: 0
 * <unk>, 1 <s> control, 2 </s> end, 3 "{" control, 4 + b the byte tokens):
 * a special token is allowed only where the grammar names it, and then
 * alone, whatever text tokens spell the same characters; an end token named
 * mid-grammar is taken there without ending it; a text token's reference
 * matches its text; malformed references are errors naming the problem. */
static void test_token_refs(const pasada_tokenizer *tok) {
  const int32_t nv = pasada_tokenizer_n_vocab(tok), byte = 4;
  int32_t ids[8];
  pa_gmatcher *m = NULL;
  pasada_grammar *g;
  m = open_matcher(tok, "root ::= \"a\" <[3]> \"b\"\n", &g);
  if (m) {
    CHECK(pa_gmatcher_accept(m, byte + 'a') == PASADA_OK, "accept 'a'");
    CHECK(allowed_ids(m, nv, ids, 8) == 1 && ids[0] == 3, "after 'a': only the control token 3");
    CHECK(!pa_gmatcher_allows(m, byte + '{'), "the byte token '{' spells no control token");
    CHECK(pa_gmatcher_accept(m, 3) == PASADA_OK, "accept the referenced control token");
    CHECK(pa_gmatcher_allows(m, byte + 'b') && !pa_gmatcher_can_end(m), "then 'b'");
    CHECK(pa_gmatcher_accept(m, byte + 'b') == PASADA_OK && pa_gmatcher_can_end(m), "end");
  }
  close_matcher(m, g);
  /* by text: <s> is token 1; the end token 2 named mid-grammar */
  m = open_matcher(tok, "root ::= <s> \"x\" </s> \"y\"\n", &g);
  if (m) {
    CHECK(allowed_ids(m, nv, ids, 8) == 1 && ids[0] == 1, "first: only <s>");
    CHECK(pa_gmatcher_accept(m, 1) == PASADA_OK && pa_gmatcher_accept(m, byte + 'x') == PASADA_OK,
          "<s> x");
    CHECK(allowed_ids(m, nv, ids, 8) == 1 && ids[0] == 2 && !pa_gmatcher_can_end(m),
          "after x: only </s>, as a reference");
    CHECK(pa_gmatcher_accept(m, 2) == PASADA_OK && !pa_gmatcher_must_end(m) &&
              pa_gmatcher_allows(m, byte + 'y'),
          "</s> taken mid-grammar, then y");
  }
  close_matcher(m, g);
  /* a text token's reference is its text: any spelling of it */
  char text_ref[64];
  snprintf(text_ref, sizeof text_ref, "root ::= <[%d]> <[%d]>\n", byte + 'a', byte + 'b');
  m = open_matcher(tok, text_ref, &g);
  if (m) {
    CHECK(pa_gmatcher_accept_bytes(m, (const uint8_t *)"ab", 2) && pa_gmatcher_can_end(m),
          "<[byte a]> <[byte b]> matches the text ab");
  }
  close_matcher(m, g);
  expect_grammar_error(tok, "root ::= <nosuch>\n", "<nosuch> is not a token");
  expect_grammar_error(tok, "root ::= <[99999999]>\n", "outside the vocabulary");
  expect_grammar_error(tok, "root ::= <[1x]>\n", "takes a token id");
  expect_grammar_error(tok, "root ::= <s\n", "unterminated token reference");
  pa_gast ast;
  CHECK(pa_gbnf_parse("root ::= <s>\n", 12, &ast) == PASADA_ERR_ARG &&
            strstr(pasada_last_error(), "need a model's vocabulary"),
        "without a vocabulary a token reference is an error");
}

/* Negated token references (!<[id]>, !<text>): one whole token other than
 * the named one, end-of-generation tokens excepted; a multi-byte token is
 * taken whole; two negations of different ids allow any token; the
 * llama.cpp idiom (!<[x]>)* <[x]> runs to the token x. */
static void test_negated_refs(const pasada_tokenizer *tok) {
  const int32_t nv = pasada_tokenizer_n_vocab(tok), byte = 4, eog = 2;
  int32_t ids[8];
  pa_gmatcher *m = NULL;
  /* a word token of several bytes, none of them 'b' first */
  int32_t word = -1;
  char piece[64];
  for (int32_t id = 260; id < nv && word < 0; id++) {
    size_t n = pasada_token_to_piece(tok, id, false, piece, sizeof piece);
    if (n >= 3 && n < sizeof piece && piece[0] != 'b') word = id;
  }
  CHECK(word >= 0, "the synthetic vocabulary has a word of 3+ bytes");
  pasada_grammar *g;
  m = open_matcher(tok, "root ::= \"a\" !<[3]> \"b\"\n", &g);
  if (m) {
    CHECK(allowed_ids(m, nv, ids, 8) >= 1 && pa_gmatcher_allows(m, byte + 'a') &&
              !pa_gmatcher_allows(m, 3),
          "first: 'a' only");
    CHECK(pa_gmatcher_accept(m, byte + 'a') == PASADA_OK, "accept 'a'");
    const int32_t n = allowed_ids(m, nv, ids, 8);
    CHECK(n == nv - 2, "after 'a': every token but 3 and the end token (%d of %d)", n, nv);
    CHECK(!pa_gmatcher_allows(m, 3) && !pa_gmatcher_allows(m, eog) &&
              pa_gmatcher_allows(m, 1) && pa_gmatcher_allows(m, word),
          "allows: not 3, not the end; control token 1 and a word yes");
    CHECK(pa_gmatcher_accept(m, word) == PASADA_OK, "a word of several bytes, as one token");
    CHECK(allowed_ids(m, nv, ids, 8) >= 1 && pa_gmatcher_allows(m, byte + 'b') &&
              !pa_gmatcher_allows(m, word) && !pa_gmatcher_can_end(m),
          "then 'b' only");
    CHECK(pa_gmatcher_accept(m, byte + 'b') == PASADA_OK && pa_gmatcher_can_end(m), "end");
    pa_gmatcher_reset(m);
    CHECK(pa_gmatcher_accept(m, byte + 'a') == PASADA_OK && pa_gmatcher_accept(m, 3) != PASADA_OK,
          "the excluded token is refused");
    pa_gmatcher_reset(m);
    CHECK(pa_gmatcher_accept(m, byte + 'a') == PASADA_OK && pa_gmatcher_accept(m, eog) != PASADA_OK,
          "the end token is no negation's match");
  }
  close_matcher(m, g);
  /* anything up to the control token 3, which ends it */
  m = open_matcher(tok, "root ::= ( !<[3]> )* <[3]>\n", &g);
  if (m) {
    CHECK(allowed_ids(m, nv, ids, 8) == nv - 1 && !pa_gmatcher_allows(m, eog),
          "every token but the end one");
    CHECK(pa_gmatcher_accept(m, byte + 'x') == PASADA_OK && pa_gmatcher_accept(m, word) == PASADA_OK &&
              pa_gmatcher_accept(m, 1) == PASADA_OK && !pa_gmatcher_can_end(m),
          "text, a word, a control token: still inside");
    CHECK(pa_gmatcher_accept(m, 3) == PASADA_OK && pa_gmatcher_must_end(m), "3 ends it");
  }
  close_matcher(m, g);
  /* two negations of different ids: any token; by name: <s> is token 1 */
  m = open_matcher(tok, "root ::= !<s> | !<[3]>\n", &g);
  if (m) {
    CHECK(allowed_ids(m, nv, ids, 8) == nv - 1, "!<s> | !<[3]>: every token but the end one");
    CHECK(pa_gmatcher_accept(m, 1) == PASADA_OK && pa_gmatcher_must_end(m), "<s> via !<[3]>");
  }
  close_matcher(m, g);
  /* a negation beside text: the text's tokens both ways */
  m = open_matcher(tok, "root ::= \"a\" \"c\" | !<s> \"d\"\n", &g);
  if (m) {
    CHECK(allowed_ids(m, nv, ids, 8) == nv - 2, "every token but <s> and the end one");
    CHECK(pa_gmatcher_accept(m, byte + 'a') == PASADA_OK && pa_gmatcher_allows(m, byte + 'c') &&
              pa_gmatcher_allows(m, byte + 'd') && allowed_ids(m, nv, ids, 8) == 2,
          "after 'a': 'c' (the text) or 'd' (after the negation)");
  }
  close_matcher(m, g);
  expect_grammar_error(tok, "root ::= !<[99999999]>\n", "outside the vocabulary");
  expect_grammar_error(tok, "root ::= !<nosuch>\n", "<nosuch> is not a token");
  expect_grammar_error(tok, "root ::= !<s\n", "unterminated token reference");
}

int main(void) {
  test_seed("test_grammar_mask");
  pa_tokenizer *tok = synthetic_vocab(400);
  if (!tok) return 1;
  const int walks = test_reps(4, 1);
  for (size_t i = 0; i < sizeof grammars / sizeof grammars[0]; i++) {
    printf("synthetic vocabulary, grammar %zu:\n", i);
    walk_grammar(tok, grammars[i], walks, 40, 0);
  }
  test_walk_after_judged();
  test_logit_bias(pa_tokenizer_n_vocab(tok));
  test_sampler_grammar(tok);
  test_sampler_semantics(tok);
  test_token_refs(tok);
  test_negated_refs(tok);
  pasada_model *model = smollm2_vocab();
  if (model) {
    const pasada_tokenizer *real = pasada_model_tokenizer(model);
    for (size_t i = 0; i < sizeof grammars / sizeof grammars[0]; i++) {
      if (i >= 3 && i < 6) continue; /* the synthetic vocabulary's are enough */
      printf("SmolLM2 vocabulary, grammar %zu:\n", i);
      walk_grammar(real, grammars[i], 1, test_reps(12, 3), 1500);
    }
    pasada_model_free(model);
  }
  pa_tokenizer_free(tok);
  if (failures) fprintf(stderr, "test_grammar_mask: %d failures\n", failures);
  return failures ? 1 : 0;
}
