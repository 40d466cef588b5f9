/* fuzz_model.c: libFuzzer target for the whole way a model file goes: open,
 * tokenizer, hyper-parameters, weights (checked, then repacked), a context,
 * three decoded tokens and their logits, and a fixed text tokenized and
 * detokenized. Any input must either be rejected with an error or load and
 * run without leaving a buffer (ASan and UBSan watch), without leaking, and
 * in bounded time.
 *
 * The input edits one of the tiny fixture models (tests/fixtures/tiny, read
 * once at start from PASADA_FUZZ_FIXTURES or the source tree), so that the
 * mutations land in the header (metadata and tensor table), where a loader
 * can go wrong, rather than in the tensor bytes that are most of the file:
 *   byte 0: bits 0-1 pick the model; bit 7 set: bytes 1-3 (24 bits, little
 *           endian) give a length the file is cut to (modulo its size + 1);
 *   then each 4 bytes overwrite one byte of the header: a 24-bit position
 *           (modulo the header's size), then the value.
 * The edited file is handed to pasada_model_load by path, through a memfd. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "format/gguf.h"
#include "pasada.h"

#ifndef PASADA_FIXTURES_DIR
#define PASADA_FIXTURES_DIR "tests/fixtures"
#endif

enum { N_MODELS = 4 };
static const char *const names[N_MODELS] = {"llama", "qwen2", "qwen3", "gemma3"};
static uint8_t *file[N_MODELS];
static size_t file_size[N_MODELS], header_size[N_MODELS];
static volatile float sink;

static void die(const char *what, const char *path) {
  fprintf(stderr, "fuzz_model: %s %s\n", what, path);
  exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *dir = getenv("PASADA_FUZZ_FIXTURES");
  if (!dir || !*dir) dir = PASADA_FIXTURES_DIR;
  for (int i = 0; i < N_MODELS; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny/%s.gguf", dir, names[i]);
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    if (fseek(f, 0, SEEK_END) != 0) die("cannot seek", path);
    const long n = ftell(f);
    if (n <= 0 || fseek(f, 0, SEEK_SET) != 0) die("cannot size", path);
    file[i] = malloc((size_t)n);
    if (!file[i] || fread(file[i], 1, (size_t)n, f) != (size_t)n) die("cannot read", path);
    fclose(f);
    file_size[i] = (size_t)n;
    gguf_file *g = NULL;
    if (gguf_open_memory(file[i], file_size[i], path, &g) != PASADA_OK)
      die("not a valid model:", path);
    header_size[i] = (size_t)g->data_offset;
    gguf_close(g);
    if (header_size[i] == 0 || header_size[i] > file_size[i]) die("odd header in", path);
  }
  return 0;
}

/* A context of 16 positions on one thread; three tokens, the last one's
 * logits read whole; then a text through the tokenizer and back. */
static void run(pasada_model *m) {
  const pasada_tokenizer *tok = pasada_model_tokenizer(m);
  static const char text[] = "Hello, world! <|im_start|> 123 \xc3\xa9t\xc3\xa9 \xe2\x82\xac\n\tend";
  int32_t *ids = NULL;
  size_t n_ids = 0;
  if (pasada_tokenize(tok, text, sizeof text - 1, true, true, &ids, &n_ids) == PASADA_OK) {
    char *back = NULL;
    if (pasada_detokenize(tok, ids, n_ids, true, &back, NULL) == PASADA_OK && *back)
      sink += (float)(unsigned char)back[0];
    pasada_text_free(back);
    pasada_text_free(ids);
  }
  const int32_t n_vocab = pasada_model_n_vocab(m);
  if (n_vocab <= 0) return;
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = 16;
  cp.n_seq_max = 1;
  cp.n_batch = 4;
  cp.n_threads = 1;
  pasada_context *c = NULL;
  if (pasada_context_create(m, &cp, &c) != PASADA_OK) return;
  const int32_t token[3] = {0, 1 % n_vocab, n_vocab - 1}, pos[3] = {0, 1, 2}, seq[3] = {0, 0, 0};
  const pasada_batch b = {.n_tokens = 3, .token = token, .pos = pos, .seq_id = seq};
  if (pasada_decode(c, &b) == PASADA_OK) {
    const float *l = pasada_get_logits(c, 2);
    if (!l) abort(); /* the last token's logits were asked for */
    for (int32_t i = 0; i < n_vocab; i++) sink += l[i];
  }
  pasada_context_free(c);
}

/* 24 bits, little endian */
static size_t u24(const uint8_t *p) {
  return (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const int k = data[0] & (N_MODELS - 1);
  uint8_t *buf = malloc(file_size[k]);
  if (!buf) return 0;
  memcpy(buf, file[k], file_size[k]);
  size_t len = file_size[k], at = 1;
  if ((data[0] & 0x80) && size >= 4) {
    len = u24(data + 1) % (file_size[k] + 1);
    at = 4;
  }
  for (; at + 4 <= size; at += 4) {
    buf[u24(data + at) % header_size[k]] = data[at + 3];
  }
  const int fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
  if (fd < 0) abort();
  for (size_t done = 0; done < len;) {
    const ssize_t w = write(fd, buf + done, len - done);
    if (w <= 0) abort();
    done += (size_t)w;
  }
  free(buf);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  pasada_model *m = NULL;
  if (pasada_model_load(path, NULL, &m) == PASADA_OK) {
    run(m);
    pasada_model_free(m);
  } else if (m) {
    abort(); /* a failed load hands back no model */
  }
  close(fd);
  return 0;
}
