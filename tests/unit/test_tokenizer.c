/* test_tokenizer.c: the tokenizer on small hand-made vocabularies written as
 * GGUF files: byte-level BPE merge order and pre-tokenization, SentencePiece
 * scores and byte fallback, special-token matching, streaming UTF-8
 * detokenization, the validation of malformed tokenizer metadata, and the
 * chat templates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "test_check.h"
#include "test_util.h"

/* ---- building vocabularies ---- */

/* Writes the writer's keys to a temporary GGUF and loads its tokenizer (the
 * GGUF is closed again: the tokenizer must not depend on it). */
static int load(gguf_writer *w, pa_tokenizer **out) {
  char path[] = "/tmp/pasada-test-tokenizer-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  close(fd);
  int rc = gguf_writer_write(w, path, 3);
  gguf_writer_free(w);
  gguf_file *f = NULL;
  if (!rc) rc = gguf_open(path, &f);
  *out = NULL;
  if (!rc) rc = pa_tokenizer_load(f, out);
  gguf_close(f);
  unlink(path);
  return rc;
}

/* GPT-2's byte map, written independently of bpe.c. */
static void gpt2_spell(const char *raw, char *out) {
  int map[256], n = 0;
  for (int b = 0; b < 256; b++) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map[b] = printable ? b : 0x100 + n++;
  }
  for (; *raw; raw++) {
    int cp = map[(unsigned char)*raw];
    if (cp < 0x80)
      *out++ = (char)cp;
    else
      *out++ = (char)(0xC0 | (cp >> 6)), *out++ = (char)(0x80 | (cp & 0x3F));
  }
  *out = '\0';
}

/* A byte-level vocabulary: the 256 bytes, then `extra` tokens (raw text),
 * then specials; merges given as raw "left right" pairs. */
static gguf_writer *bpe_vocab(const char *pre, const char *const *extra, int n_extra,
                              const char *const *merges, int n_merges) {
  static char store[512][64];
  const char *tokens[512];
  int32_t types[512];
  int n = 0;
  for (int b = 0; b < 256; b++) {
    char raw[2] = {(char)b, 0};
    if (b == 0) { /* "\0" cannot go through a C string: spell it by hand */
      strcpy(store[n], "\xC4\x80");
    } else {
      gpt2_spell(raw, store[n]);
    }
    tokens[n] = store[n], types[n] = PA_TOKEN_NORMAL, n++;
  }
  for (int i = 0; i < n_extra; i++)
    gpt2_spell(extra[i], store[n]), tokens[n] = store[n], types[n++] = 1;
  const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im"};
  for (int i = 0; i < 4; i++) tokens[n] = specials[i], types[n++] = PA_TOKEN_CONTROL;
  tokens[n] = "<user>", types[n++] = PA_TOKEN_USER_DEFINED;
  char merge_store[64][160];
  const char *merge_ptrs[64];
  for (int i = 0; i < n_merges; i++) {
    char l[32], r[32], sl[64], sr[64];
    sscanf(merges[i], "%31s %31s", l, r);
    for (char *p = l; *p; p++)
      if (*p == '_') *p = ' ';
    for (char *p = r; *p; p++)
      if (*p == '_') *p = ' ';
    gpt2_spell(l, sl), gpt2_spell(r, sr);
    snprintf(merge_store[i], sizeof merge_store[i], "%s %s", sl, sr);
    merge_ptrs[i] = merge_store[i];
  }
  gguf_writer *w = gguf_writer_create();
  gguf_writer_set_string(w, "general.architecture", "llama");
  gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2");
  if (pre) gguf_writer_set_string(w, "tokenizer.ggml.pre", pre);
  gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
  gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n);
  gguf_writer_set_string_array(w, "tokenizer.ggml.merges", merge_ptrs, (uint64_t)n_merges);
  gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 256 + (uint32_t)n_extra + 2);
  return w;
}

static int32_t id_of(const pa_tokenizer *t, const char *raw) {
  char spelled[256];
  gpt2_spell(raw, spelled);
  return pa_tokenizer_find(t, spelled);
}

static size_t encode(const pa_tokenizer *t, const char *text, bool parse_special, int32_t *ids,
                     size_t cap) {
  int32_t *out;
  size_t n;
  int rc = pa_tokenize(t, text, strlen(text), false, parse_special, &out, &n);
  CHECK(rc == 0, "tokenize '%s': %s", text, pa_last_error());
  if (rc) return 0;
  memcpy(ids, out, (n < cap ? n : cap) * sizeof(int32_t));
  free(out);
  return n;
}

static bool same(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
  return na == nb && memcmp(a, b, na * sizeof(int32_t)) == 0;
}

/* ---- byte-level BPE ---- */

static void test_bpe_merge_order(void) {
  const char *extra[] = {"ab", "bc", "abc", "aa", "aaaa", " a", " ab"};
  const char *merges[] = {"a b", "b c", "ab c", "a a", "aa aa", "_ a", "_a b"};
  pa_tokenizer *t;
  int rc = load(bpe_vocab("gpt2", extra, 7, merges, 7), &t);
  CHECK(rc == 0, "load: %s", pa_last_error());
  if (rc) return;
  int32_t ids[64];
  size_t n = encode(t, "abc", false, ids, 64);
  int32_t want1[] = {id_of(t, "abc")};
  CHECK(same(ids, n, want1, 1), "abc -> abc (a+b first, then ab+c)");
  n = encode(t, "aaa", false, ids, 64);
  int32_t want2[] = {id_of(t, "aa"), id_of(t, "a")};
  CHECK(same(ids, n, want2, 2), "aaa -> aa a (leftmost pair first on equal ranks)");
  n = encode(t, "aaaaa", false, ids, 64);
  int32_t want3[] = {id_of(t, "aaaa"), id_of(t, "a")};
  CHECK(same(ids, n, want3, 2), "aaaaa -> aaaa a");
  /* " ab" is one pre-token (the GPT-2 regex keeps the space with the word),
   * but a+b (rank 0) merges before space+a (rank 5): " ab" is never reached. */
  n = encode(t, "c ab", false, ids, 64);
  int32_t want4[] = {id_of(t, "c"), id_of(t, " "), id_of(t, "ab")};
  CHECK(same(ids, n, want4, 3), "c ab -> c, ' ', ab (n=%zu)", n);
  n = encode(t, "c a", false, ids, 64);
  int32_t want4b[] = {id_of(t, "c"), id_of(t, " a")};
  CHECK(same(ids, n, want4b, 2), "c a -> c, ' a' (n=%zu)", n);
  /* Every byte maps to its GPT-2 spelling (the map written independently
   * above), and back. */
  for (int b = 1; b < 256; b++) {
    char raw[2] = {(char)b, 0};
    int32_t *one;
    size_t n1;
    rc = pa_tokenize(t, raw, 1, false, false, &one, &n1);
    CHECK(rc == 0 && n1 == 1 && one[0] == id_of(t, raw), "byte 0x%02x", b);
    char piece[8];
    CHECK(rc == 0 && pa_token_to_piece(t, one[0], false, piece, 8) == 1 && piece[0] == raw[0],
          "byte 0x%02x decodes back", b);
    if (!rc) free(one);
  }
  /* Bytes with no merges stay single bytes, even invalid UTF-8. */
  n = encode(t, "\xff\xfe", false, ids, 64);
  int32_t want5[] = {id_of(t, "\xff"), id_of(t, "\xfe")};
  CHECK(same(ids, n, want5, 2), "invalid UTF-8 is encoded byte by byte");
  char *s = pa_detokenize(t, ids, n, false);
  CHECK(s && memcmp(s, "\xff\xfe", 3) != 0 && strcmp(s, "\xEF\xBF\xBD\xEF\xBF\xBD") == 0,
        "invalid bytes decode to U+FFFD each");
  free(s);
  /* A long word costs O(n log n): 200k bytes of "a" (a multiple of 4;
   * PASADA_TEST_SCALE takes a share of them). */
  size_t big = (size_t)test_reps(50000, 1000) * 4;
  char *text = malloc(big + 1);
  memset(text, 'a', big);
  text[big] = 0;
  int32_t *out;
  double t0 = pa_time_s();
  rc = pa_tokenize(t, text, big, false, false, &out, &n);
  double dt = pa_time_s() - t0;
  CHECK(rc == 0 && n == big / 4, "%zu a -> %zu aaaa tokens (got %zu)", big, big / 4, n);
  CHECK(dt < 1.0, "long word took %.3f s", dt);
  char *back = rc ? NULL : pa_detokenize(t, out, n, false);
  CHECK(back && strcmp(back, text) == 0, "long word round-trips");
  free(back);
  if (!rc) free(out);
  free(text);
  pa_tokenizer_free(t);
}

static void test_pretokenizers(void) {
  const char *extra[] = {" 1", "12", "123", "'S"};
  const char *merges[] = {"_ 1", "1 2", "12 3", "' S"};
  const char *pres[] = {"default", "smollm", "llama-bpe", "qwen2"};
  /* "x 1234": GPT-2 keeps " 1234" together (x, " 1", 2, 3, 4); smollm and
   * qwen2 cut every digit (x, " ", 1, 2, 3, 4); llama-bpe cuts digits in
   * threes and the space goes alone (x, " ", 123, 4). */
  size_t want_n[] = {5, 6, 4, 6};
  for (int p = 0; p < 4; p++) {
    pa_tokenizer *t;
    int rc = load(bpe_vocab(pres[p], extra, 4, merges, 4), &t);
    CHECK(rc == 0, "load %s: %s", pres[p], pa_last_error());
    if (rc) continue;
    int32_t ids[64];
    size_t n = encode(t, "x 1234", false, ids, 64);
    CHECK(n == want_n[p], "%s: 'x 1234' gave %zu tokens", pres[p], n);
    if (p == 0) CHECK(n == 5 && ids[1] == id_of(t, " 1"), "default: x, ' 1', 2, 3, 4");
    if (p == 2) {
      int32_t want[] = {id_of(t, "x"), id_of(t, " "), id_of(t, "123"), id_of(t, "4")};
      CHECK(same(ids, n, want, 4), "llama-bpe: x, ' ', 123, 4");
    }
    /* Contractions are case-insensitive in llama-bpe and qwen2 only: there
     * "'S" is one pre-token and merges; GPT-2 cuts ' and S apart. */
    n = encode(t, "IT'S", false, ids, 64);
    CHECK(n == (p >= 2 ? 3u : 4u), "%s: IT'S gave %zu tokens", pres[p], n);
    pa_tokenizer_free(t);
  }
  pa_tokenizer *t;
  int rc = load(bpe_vocab("no-such-pre", NULL, 0, NULL, 0), &t);
  CHECK(rc == PASADA_ERR_UNSUPPORTED && strstr(pa_last_error(), "no-such-pre"),
        "unknown pre-tokenizer named: %s", pa_last_error());
}

static void test_special_matching(void) {
  pa_tokenizer *t;
  int rc = load(bpe_vocab("gpt2", NULL, 0, NULL, 0), &t);
  CHECK(rc == 0, "load: %s", pa_last_error());
  if (rc) return;
  int32_t start = pa_tokenizer_find(t, "<|im_start|>"), end = pa_tokenizer_find(t, "<|im_end|>");
  int32_t im = pa_tokenizer_find(t, "<|im"), user = pa_tokenizer_find(t, "<user>");
  int32_t ids[64];
  size_t n = encode(t, "<|im_start|>x<|im_end|>", true, ids, 64);
  int32_t want[] = {start, id_of(t, "x"), end};
  CHECK(same(ids, n, want, 3), "specials parsed, longest match (<|im_start|> over <|im)");
  n = encode(t, "<|imx", true, ids, 64);
  CHECK(n >= 1 && ids[0] == im, "<|im alone where nothing longer matches");
  n = encode(t, "<|im_start|>", false, ids, 64);
  CHECK(n > 1 && ids[0] != start, "parse_special off: special text stays text");
  n = encode(t, "a<user>b", false, ids, 64);
  int32_t want2[] = {id_of(t, "a"), user, id_of(t, "b")};
  CHECK(same(ids, n, want2, 3), "user-defined tokens match even without parse_special");
  CHECK(pa_tokenizer_is_eog(t, end) &&
            pa_tokenizer_is_eog(t, pa_tokenizer_find(t, "<|endoftext|>")),
        "EOG: eos, <|im_end|>, <|endoftext|>");
  CHECK(!pa_tokenizer_is_eog(t, start), "<|im_start|> is not EOG");
  char *s = pa_detokenize(t, want, 3, false);
  CHECK(s && strcmp(s, "x") == 0, "control tokens dropped: '%s'", s);
  free(s);
  s = pa_detokenize(t, want, 3, true);
  CHECK(s && strcmp(s, "<|im_start|>x<|im_end|>") == 0, "control tokens rendered: '%s'", s);
  free(s);
  pa_tokenizer_free(t);
}

/* ---- SentencePiece ---- */

static gguf_writer *spm_vocab(bool add_space_prefix) {
  static char bytes[256][8];
  const char *tokens[300];
  float scores[300];
  int32_t types[300];
  int n = 0;
  const char *head[] = {"<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>"};
  int head_types[] = {PA_TOKEN_UNKNOWN, PA_TOKEN_CONTROL, PA_TOKEN_CONTROL, PA_TOKEN_CONTROL,
                      PA_TOKEN_CONTROL};
  for (int i = 0; i < 5; i++) tokens[n] = head[i], scores[n] = 0, types[n++] = head_types[i];
  for (int b = 0; b < 256; b++) {
    snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
    tokens[n] = bytes[b], scores[n] = 0, types[n++] = PA_TOKEN_BYTE;
  }
  const struct {
    const char *t;
    float s;
  } pieces[] = {{"\xE2\x96\x81", -1},
                {"a", -2},
                {"b", -3},
                {"c", -4},
                {"ab", -5},
                {"bc", -4.5f},
                {"\xE2\x96\x81"
                 "a",
                 -6},
                {"\xE2\x96\x81"
                 "ab",
                 -7},
                {"\xE2\x82\xAC", -8} /* € */,
                {"  ", -9} /* user-defined double space */};
  for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
    tokens[n] = pieces[i].t, scores[n] = pieces[i].s;
    types[n++] = strcmp(pieces[i].t, "  ") == 0 ? PA_TOKEN_USER_DEFINED : PA_TOKEN_NORMAL;
  }
  gguf_writer *w = gguf_writer_create();
  gguf_writer_set_string(w, "general.architecture", "gemma3");
  gguf_writer_set_string(w, "tokenizer.ggml.model", "llama");
  gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
  gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (uint64_t)n);
  gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n);
  gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
  gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
  gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
  gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", add_space_prefix);
  return w;
}

static void test_spm(void) {
  pa_tokenizer *t;
  int rc = load(spm_vocab(false), &t);
  CHECK(rc == 0, "load: %s", pa_last_error());
  if (rc) return;
  int32_t ids[64];
  int32_t a = pa_tokenizer_find(t, "a"), bc = pa_tokenizer_find(t, "bc");
  int32_t sp_ab = pa_tokenizer_find(t, "\xE2\x96\x81"
                                       "ab");
  size_t n = encode(t, "abc", false, ids, 64);
  int32_t want1[] = {a, bc};
  CHECK(same(ids, n, want1, 2), "abc -> a bc (bc scores higher than ab)");
  n = encode(t, "x ab", false, ids, 64);
  int32_t want2[] = {pa_tokenizer_find(t, "<0x78>"), sp_ab};
  CHECK(same(ids, n, want2, 2), "x falls back to <0x78>; ' ab' -> ▁ab");
  n = encode(t, "\xC3\xA9\xE2\x82\xAC", false, ids, 64); /* é€ */
  int32_t want3[] = {pa_tokenizer_find(t, "<0xC3>"), pa_tokenizer_find(t, "<0xA9>"),
                     pa_tokenizer_find(t, "\xE2\x82\xAC")};
  CHECK(same(ids, n, want3, 3), "é -> two byte tokens, € is a piece");
  n = encode(t, "a  b", false, ids, 64);
  int32_t want4[] = {a, pa_tokenizer_find(t, "  "), pa_tokenizer_find(t, "b")};
  CHECK(same(ids, n, want4, 3), "user-defined '  ' matched whole");
  n = encode(t, "<start_of_turn>a", true, ids, 64);
  CHECK(n == 2 && ids[0] == 3 && ids[1] == a, "control token parsed");
  int32_t *out;
  rc = pa_tokenize(t, "ab", 2, true, false, &out, &n);
  CHECK(rc == 0 && n == 2 && out[0] == 1, "add_special prepends BOS");
  if (!rc) free(out);
  char *s = pa_detokenize(t, want2, 2, false);
  CHECK(s && strcmp(s, "x ab") == 0, "decode: '%s'", s);
  free(s);
  pa_tokenizer_free(t);

  /* add_space_prefix: a "▁" before the text, dropped again when decoding. */
  rc = load(spm_vocab(true), &t);
  CHECK(rc == 0, "load: %s", pa_last_error());
  if (rc) return;
  n = encode(t, "ab", false, ids, 64);
  CHECK(n == 1 && ids[0] == sp_ab, "prefix space: ab -> ▁ab");
  s = pa_detokenize(t, ids, n, false);
  CHECK(s && strcmp(s, "ab") == 0, "prefix space dropped when decoding: '%s'", s);
  free(s);
  pa_tokenizer_free(t);
}

/* ---- streaming detokenizer ---- */

static void test_stream(void) {
  pa_tokenizer *t;
  int rc = load(spm_vocab(false), &t);
  CHECK(rc == 0, "load: %s", pa_last_error());
  if (rc) return;
  int32_t e2 = pa_tokenizer_find(t, "<0xE2>"), x82 = pa_tokenizer_find(t, "<0x82>");
  int32_t xac = pa_tokenizer_find(t, "<0xAC>"), a = pa_tokenizer_find(t, "a");
  int32_t f0 = pa_tokenizer_find(t, "<0xF0>"), x9f = pa_tokenizer_find(t, "<0x9F>");
  int32_t e0 = pa_tokenizer_find(t, "<0xE0>"), x80 = pa_tokenizer_find(t, "<0x80>");
  struct {
    int32_t ids[8];
    int n;
    const char *chunks[9]; /* per push, then the flush */
  } cases[] = {
      {{e2, x82, xac, a}, 4, {"", "", "\xE2\x82\xAC", "a", ""}},
      {{e2, a},
       2,
       {"",
        "\xEF\xBF\xBD"
        "a",
        ""}},
      {{e2, x82}, 2, {"", "", "\xEF\xBF\xBD"}},
      {{x82, a}, 2, {"\xEF\xBF\xBD", "a", ""}},
      {{f0, x9f, e2, x82, xac}, 5, {"", "", "\xEF\xBF\xBD", "", "\xE2\x82\xAC", ""}},
      {{a, 1, a}, 3, {"a", "", "a", ""}},
      /* E0 80: E0 alone is the maximal subpart (80 cannot follow it), then
       * 80 is a byte no character starts with: each its own U+FFFD (the
       * held-back 80 must not stall the detokenizer; a case
       * tests/fuzz/fuzz_openai.c found) */
      {{e0, x80, a},
       3,
       {"",
        "\xEF\xBF\xBD\xEF\xBF\xBD",
        "a",
        ""}},
      {{f0, x9f, x80, x80, x80, a}, 6, {"", "", "", "\xF0\x9F\x80\x80", "\xEF\xBF\xBD", "a", ""}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    pa_detok d;
    pa_detok_init(&d, t, false);
    char buf[256], all[256] = "";
    for (int i = 0; i <= cases[c].n; i++) {
      size_t k = i < cases[c].n ? pa_detok_push(&d, cases[c].ids[i], buf, sizeof buf)
                                : pa_detok_flush(&d, buf, sizeof buf);
      buf[k] = 0;
      CHECK(strcmp(buf, cases[c].chunks[i]) == 0, "case %zu chunk %d: '%s'", c, i, buf);
      strcat(all, buf);
    }
    char *whole = pa_detokenize(t, cases[c].ids, (size_t)cases[c].n, false);
    CHECK(whole && strcmp(whole, all) == 0, "case %zu: stream equals whole decode", c);
    free(whole);
  }
  pa_tokenizer_free(t);
}

/* ---- WordPiece (bert) ---- */

static void expect_error(gguf_writer *w, const char *needle, const char *what);

/* A vocabulary in llama.cpp's spelling: word-initial pieces with U+2581,
 * continuations bare, the special tokens as they are. unk < 0: none. */
static gguf_writer *wpm_vocab(int32_t unk) {
  const char *tokens[] = {"[PAD]",
                          "[UNK]",
                          "[CLS]",
                          "[SEP]",
                          "\xE2\x96\x81un",
                          "aff",
                          "able",
                          "\xE2\x96\x81,",
                          "\xE2\x96\x81"
                          "cafe",
                          "\xE2\x96\x81\xE4\xB8\xAD",
                          "\xE2\x96\x81"
                          "a",
                          "b"};
  int32_t types[12];
  for (int i = 0; i < 12; i++) types[i] = i < 4 ? PA_TOKEN_CONTROL : PA_TOKEN_NORMAL;
  gguf_writer *w = gguf_writer_create();
  gguf_writer_set_string(w, "general.architecture", "bert");
  gguf_writer_set_string(w, "tokenizer.ggml.model", "bert");
  gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", tokens, 12);
  gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 12);
  gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
  gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3);
  if (unk >= 0) gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
  return w;
}

static void test_wordpiece(void) {
  pa_tokenizer *t = NULL;
  CHECK(load(wpm_vocab(1), &t) == 0, "wordpiece vocabulary loads: %s", pa_last_error());
  if (!t) return;
  const struct {
    const char *text;
    int32_t ids[12];
    int n;
  } cases[] = {
      /* [CLS] un ##aff ##able , [SEP]: longest match first, punctuation split */
      {"Unaffable,", {2, 4, 5, 6, 7, 3}, 6},
      /* accents stripped and lowercased: CAFÉ -> cafe; a CJK ideograph on its own */
      {"CAF\xC3\x89\xE4\xB8\xAD", {2, 8, 9, 3}, 4},
      /* a word no piece continues is [UNK] whole (unaffablex); a ab */
      {"unaffablex a ab", {2, 1, 10, 10, 11, 3}, 6},
      /* control characters dropped, tabs and newlines split */
      {"a\x07"
       "b\t\na",
       {2, 10, 11, 10, 3},
       5},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = pa_tokenize(t, cases[c].text, strlen(cases[c].text), true, true, &ids, &n);
    bool same =
        rc == 0 && n == (size_t)cases[c].n && memcmp(ids, cases[c].ids, n * sizeof *ids) == 0;
    CHECK(same, "wordpiece case %zu: rc %d, %zu ids (first %d)", c, rc, n, n ? ids[0] : -1);
    free(ids);
  }
  /* a word of 101 characters is [UNK] (100 at most) */
  char longw[102];
  memset(longw, 'a', 101);
  longw[101] = 0;
  int32_t *ids = NULL;
  size_t n = 0;
  CHECK(pa_tokenize(t, longw, 101, false, false, &ids, &n) == 0 && n == 1 && ids[0] == 1,
        "101 characters: [UNK]");
  free(ids);
  pa_tokenizer_free(t);
  expect_error(wpm_vocab(-1), "unknown_token_id", "wordpiece without an unknown token");
}

/* ---- validation ---- */

static void expect_error(gguf_writer *w, const char *needle, const char *what) {
  pa_tokenizer *t = NULL;
  int rc = load(w, &t);
  CHECK(rc != 0 && strstr(pa_last_error(), needle), "%s: rc %d, message '%s'", what, rc,
        pa_last_error());
  pa_tokenizer_free(t);
}

static void test_validation(void) {
  gguf_writer *w = spm_vocab(false);
  float few[3] = {0};
  gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, few, 3);
  expect_error(w, "tokenizer.ggml.scores", "scores shorter than tokens");

  w = spm_vocab(false);
  int32_t types[2] = {1, 1};
  gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 2);
  expect_error(w, "tokenizer.ggml.token_type", "token_type shorter than tokens");

  w = spm_vocab(false);
  gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 100000);
  expect_error(w, "bos_token_id", "bos out of range");

  w = spm_vocab(false);
  gguf_writer_set_i32(w, "tokenizer.ggml.eos_token_id", -1);
  expect_error(w, "eos_token_id", "negative eos");

  w = spm_vocab(false);
  gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 271);
  expect_error(w, "padding_token_id", "pad out of range");

  w = spm_vocab(false);
  gguf_writer_set_string(w, "tokenizer.ggml.scores", "not an array");
  expect_error(w, "tokenizer.ggml.scores", "scores of the wrong type");

  w = spm_vocab(false);
  const char *strs[] = {"x"};
  gguf_writer_set_string_array(w, "tokenizer.ggml.token_type", strs, 1);
  expect_error(w, "tokenizer.ggml.token_type", "token_type of strings");

  w = spm_vocab(false);
  int32_t bad_types[271];
  for (int i = 0; i < 271; i++) bad_types[i] = i == 7 ? 42 : 1;
  gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, bad_types, 271);
  expect_error(w, "token_type[7]", "token type out of range");

  w = spm_vocab(false);
  gguf_writer_set_string(w, "tokenizer.ggml.model", "rwkv");
  expect_error(w, "'rwkv'", "unknown tokenizer model");

  w = spm_vocab(false);
  uint32_t ints[3] = {1, 2, 3};
  gguf_writer_set_array(w, "tokenizer.ggml.tokens", GGUF_TYPE_UINT32, ints, 3);
  expect_error(w, "tokenizer.ggml.tokens", "tokens of integers");

  const char *bad_merge[] = {"a zz"};
  expect_error(bpe_vocab("gpt2", NULL, 0, bad_merge, 1), "merges[0]", "merge part not a token");
  w = bpe_vocab("gpt2", NULL, 0, NULL, 0);
  const char *no_space[] = {"ab"};
  gguf_writer_set_string_array(w, "tokenizer.ggml.merges", no_space, 1);
  expect_error(w, "merges[0]", "merge without a space");
  w = bpe_vocab("gpt2", NULL, 0, NULL, 0);
  gguf_writer_set_array(w, "tokenizer.ggml.merges", GGUF_TYPE_UINT32, ints, 3);
  expect_error(w, "tokenizer.ggml.merges", "merges of integers");
}

/* ---- chat templates ---- */

static void test_chat(void) {
  pa_chat_message conv[] = {
      {"system", "  Be brief.\n"}, {"user", "\n Hi \t"}, {"assistant", "Hello."}, {"user", "Bye"}};
  pa_chat_format chatml = pa_chat_format_plain(PA_CHAT_CHATML);
  strcpy(chatml.default_system, "You are helpful.");
  char *s = pa_chat_render_format(&chatml, conv + 1, 1, true);
  CHECK(s && strcmp(s, "<|im_start|>system\nYou are helpful.<|im_end|>\n"
                       "<|im_start|>user\n\n Hi \t<|im_end|>\n<|im_start|>assistant\n") == 0,
        "chatml with default system: '%s'", s);
  free(s);
  s = pa_chat_render_format(&chatml, conv, 2, false);
  CHECK(s && strcmp(s, "<|im_start|>system\n  Be brief.\n<|im_end|>\n"
                       "<|im_start|>user\n\n Hi \t<|im_end|>\n") == 0,
        "chatml with its own system: '%s'", s);
  free(s);
  s = pa_chat_render(PA_CHAT_GEMMA, conv, 4, true);
  CHECK(s && strcmp(s, "<start_of_turn>user\n  Be brief.\n\n\nHi<end_of_turn>\n"
                       "<start_of_turn>model\nHello.<end_of_turn>\n"
                       "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n") == 0,
        "gemma: '%s'", s);
  free(s);
  pa_chat_message bad[] = {{"user", "a"}, {"user", "b"}};
  s = pa_chat_render(PA_CHAT_GEMMA, bad, 2, true);
  CHECK(!s && strstr(pa_last_error(), "alternate"), "gemma rejects user, user");
  free(s);
  /* pa_chat_check answers what rendering would: the server tells a
   * client's bad conversation (400) from its own failures (500) by it */
  pa_chat_message starts_assistant[] = {{"system", "s"}, {"assistant", "a"}, {"user", "b"}};
  CHECK(pa_chat_check(PA_CHAT_GEMMA, conv, 4) == PASADA_OK, "gemma accepts system, user, ...");
  CHECK(pa_chat_check(PA_CHAT_GEMMA, bad, 2) == PASADA_ERR_ARG &&
            strstr(pa_last_error(), "message 1 is 'user'"),
        "gemma check rejects user, user: %s", pa_last_error());
  CHECK(pa_chat_check(PA_CHAT_GEMMA, starts_assistant, 3) == PASADA_ERR_ARG &&
            strstr(pa_last_error(), "message 1 is 'assistant'"),
        "gemma check rejects a first turn of the assistant: %s", pa_last_error());
  s = pa_chat_render(PA_CHAT_GEMMA, starts_assistant, 3, true);
  CHECK(!s, "gemma render rejects what the check rejects");
  free(s);
  CHECK(pa_chat_check(PA_CHAT_CHATML, bad, 2) == PASADA_OK &&
            pa_chat_check(PA_CHAT_LLAMA3, starts_assistant, 3) == PASADA_OK,
        "chatml and llama3 take any order");
  CHECK(pa_chat_check(PA_CHAT_NONE, conv, 4) == PASADA_ERR_ARG, "no template: an error");
  s = pa_chat_render(PA_CHAT_LLAMA3, conv, 2, true);
  CHECK(s && strcmp(s, "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n") == 0,
        "llama3: '%s'", s);
  free(s);
  pa_chat_template tmpl;
  CHECK(pa_chat_from_name("gemma", &tmpl) == 0 && tmpl == PA_CHAT_GEMMA, "from name");
  CHECK(pa_chat_from_name("vicuna", &tmpl) != 0 && strstr(pa_last_error(), "vicuna"),
        "unknown name rejected");
}

/* Writes a GGUF with the given architecture, template (NULL: none) and
 * tokens, and runs pa_chat_detect_format on it. */
static int detect(const char *arch, const char *tmpl, bool im_start_token, pa_chat_format *fmt) {
  const char *tokens[] = {"a", im_start_token ? "<|im_start|>" : "b"};
  gguf_writer *w = gguf_writer_create();
  gguf_writer_set_string(w, "general.architecture", arch);
  gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2");
  gguf_writer_set_string_array(w, "tokenizer.ggml.tokens", tokens, 2);
  if (tmpl) gguf_writer_set_string(w, "tokenizer.chat_template", tmpl);
  char path[] = "/tmp/pasada-test-chat-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  close(fd);
  int rc = gguf_writer_write(w, path, 3);
  gguf_writer_free(w);
  gguf_file *f = NULL;
  if (!rc) rc = gguf_open(path, &f);
  if (!rc) rc = pa_chat_detect_format(f, NULL, NULL, fmt);
  gguf_close(f);
  unlink(path);
  return rc;
}

static void test_chat_detect(void) {
  pa_chat_format fmt;
  /* Qwen 2.5's shape: the default system turn is one literal among
   * expressions; the newline is the Jinja escape \n. */
  const char *qwen =
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
      "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou "
      "are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
      "{%- endif %}";
  int rc = detect("qwen2", qwen, true, &fmt);
  CHECK(rc == 0 && fmt.kind == PA_CHAT_CHATML &&
            strcmp(fmt.default_system,
                   "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.") == 0,
        "qwen default system: rc %d '%s'", rc, fmt.default_system);
  rc = detect("qwen3", "{{- '<|im_start|>' + message.role + '\\n' }}", true, &fmt);
  CHECK(rc == 0 && fmt.kind == PA_CHAT_CHATML && fmt.default_system[0] == 0, "plain chatml");
  rc = detect("gemma3", "{{ bos_token }}<start_of_turn>", false, &fmt);
  CHECK(rc == 0 && fmt.kind == PA_CHAT_GEMMA, "gemma by marker");
  rc = detect("llama", "<|start_header_id|>", false, &fmt);
  CHECK(rc == 0 && fmt.kind == PA_CHAT_LLAMA3 && fmt.date[0] == 0, "llama3 by marker");
  rc = detect("llama", "<|start_header_id|> Cutting Knowledge Date", false, &fmt);
  CHECK(rc == 0 && fmt.kind == PA_CHAT_LLAMA3 && strcmp(fmt.date, "26 Jul 2024") == 0, "3.1");
  rc = detect("llama", "{{ '[INST]' }}", false, &fmt);
  CHECK(rc == PASADA_ERR_UNSUPPORTED && strstr(pa_last_error(), "--chat-template"),
        "unknown template: %s", pa_last_error());
  /* No template: by architecture. */
  rc = detect("gemma3", NULL, false, &fmt);
  CHECK(rc == 0 && fmt.kind == PA_CHAT_GEMMA, "gemma3 default");
  rc = detect("qwen2", NULL, false, &fmt);
  CHECK(rc == 0 && fmt.kind == PA_CHAT_CHATML, "qwen2 default");
  rc = detect("llama", NULL, true, &fmt);
  CHECK(rc == 0 && fmt.kind == PA_CHAT_CHATML, "llama with <|im_start|>");
  rc = detect("llama", NULL, false, &fmt);
  CHECK(rc == PASADA_ERR_UNSUPPORTED && strstr(pa_last_error(), "--chat-template") &&
            strstr(pa_last_error(), "'llama'"),
        "llama without a template: %s", pa_last_error());
}

/* A loaded model's file has no token list left (gguf_drop_string_arrays):
 * the architecture default still finds <|im_start|> through the tokenizer. */
static void test_chat_detect_dropped(void) {
  const char *none[] = {NULL};
  gguf_writer *w = bpe_vocab(NULL, none, 0, none, 0);
  char path[] = "/tmp/pasada-test-chat-drop-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  if (fd < 0) return;
  close(fd);
  int rc = gguf_writer_write(w, path, 3);
  gguf_writer_free(w);
  gguf_file *f = NULL;
  pa_tokenizer *t = NULL;
  if (!rc) rc = gguf_open(path, &f);
  unlink(path);
  if (!rc) rc = pa_tokenizer_load(f, &t);
  CHECK(rc == 0, "load: %s", pa_last_error());
  if (!rc) {
    gguf_drop_string_arrays(f);
    pa_chat_format fmt;
    rc = pa_chat_detect_format(f, t, NULL, &fmt);
    CHECK(rc == 0 && fmt.kind == PA_CHAT_CHATML, "llama with <|im_start|>, through the tokenizer");
    rc = pa_chat_detect_format(f, NULL, NULL, &fmt);
    CHECK(rc == PASADA_ERR_UNSUPPORTED, "no token list and no tokenizer: not chatml");
  }
  pa_tokenizer_free(t);
  gguf_close(f);
}

int main(void) {
  test_bpe_merge_order();
  test_pretokenizers();
  test_special_matching();
  test_spm();
  test_stream();
  test_validation();
  test_wordpiece();
  test_chat();
  test_chat_detect();
  test_chat_detect_dropped();
  if (failures)
    fprintf(stderr, "test_tokenizer: %d check(s) failed\n", failures);
  else
    printf("test_tokenizer: all checks passed\n");
  return failures ? 1 : 0;
}
