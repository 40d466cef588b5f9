/* quant_tool: runs the reference quantizers and dequantizers of src/quant on
 * raw files, for tests/e2e/test_quant.py to compare with the `gguf` package.
 *
 *   quant_tool dequant TYPE IN.bin OUT.f32      raw blocks -> float32 LE
 *   quant_tool quant TYPE IN.f32 OUT.bin        float32 LE -> raw blocks
 *   quant_tool dequant-tensor MODEL.gguf NAME OUT.f32
 *
 * TYPE is a name (Q4_K, f16, ...) or a GGML type number. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "format/gguf.h"
#include "quant/quant.h"

static int fail(const char *fmt, const char *arg) {
  fprintf(stderr, "quant_tool: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  return 1;
}

static const pa_type_traits *parse_type(const char *s, pa_type *type) {
  char *end;
  unsigned long number = strtoul(s, &end, 10);
  if (*s != '\0' && *end == '\0') {
    *type = (pa_type)number;
    return number < PA_TYPE_COUNT ? pa_type_get((uint32_t)number) : NULL;
  }
  for (uint32_t t = 0; t < PA_TYPE_COUNT; t++) {
    const pa_type_traits *tr = pa_type_get(t);
    if (tr != NULL && strcasecmp(tr->name, s) == 0) {
      *type = (pa_type)t;
      return tr;
    }
  }
  return NULL;
}

/* Reads a whole file into a malloc'd buffer (suitably aligned for any block). */
static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  void *buf = NULL;
  long len = -1;
  if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
  if (len >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    buf = malloc((size_t)len + 1);
    if (buf != NULL && fread(buf, 1, (size_t)len, f) != (size_t)len) {
      free(buf);
      buf = NULL;
    }
  }
  fclose(f);
  *size = (size_t)len;
  return buf;
}

static int write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) return fail("cannot create %s", path);
  size_t written = fwrite(data, 1, size, f);
  if (fclose(f) != 0 || written != size) return fail("cannot write %s", path);
  return 0;
}

static int cmd_dequant(const pa_type_traits *tr, const char *in, const char *out) {
  size_t size;
  void *src = read_file(in, &size);
  if (src == NULL) return fail("cannot read %s", in);
  if (size % tr->type_size != 0) {
    free(src);
    return fail("%s: size is not a whole number of blocks", in);
  }
  int64_t n = (int64_t)(size / tr->type_size) * tr->block_size;
  float *dst = malloc((size_t)n * sizeof(float) + 1);
  if (dst == NULL) {
    free(src);
    return fail("out of memory for %s", in);
  }
  tr->to_float(src, dst, n);
  int rc = write_file(out, dst, (size_t)n * sizeof(float));
  free(src);
  free(dst);
  return rc;
}

static int cmd_quant(const pa_type_traits *tr, const char *in, const char *out) {
  if (tr->from_float == NULL) return fail("type %s has no quantizer", tr->name);
  size_t size;
  float *src = read_file(in, &size);
  if (src == NULL) return fail("cannot read %s", in);
  int64_t n = (int64_t)(size / sizeof(float));
  if (size % sizeof(float) != 0 || n % tr->block_size != 0) {
    free(src);
    return fail("%s: element count is not a multiple of the block size", in);
  }
  size_t out_size = (size_t)(n / tr->block_size) * tr->type_size;
  void *dst = malloc(out_size + 1);
  if (dst == NULL) {
    free(src);
    return fail("out of memory for %s", in);
  }
  tr->from_float(src, dst, n);
  int rc = write_file(out, dst, out_size);
  free(src);
  free(dst);
  return rc;
}

/* Dequantizes a whole tensor of a GGUF file, read through our own reader. */
static int cmd_dequant_tensor(const char *path, const char *name, const char *out) {
  gguf_file *f;
  if (gguf_open(path, &f) != 0) return fail("%s", pa_last_error());
  int rc = 1;
  const gguf_tensor *t = gguf_get_tensor(f, name);
  const pa_type_traits *tr = t ? pa_type_get(t->type) : NULL;
  if (t == NULL) {
    fail("no tensor named %s", name);
  } else if (tr == NULL) {
    fail("tensor %s has a type without traits", name);
  } else {
    int64_t n = 1;
    for (uint32_t i = 0; i < GGUF_MAX_DIMS; i++) n *= t->ne[i]; /* checked by the reader */
    float *dst = malloc((size_t)n * sizeof(float) + 1);
    if (dst == NULL) {
      fail("out of memory for %s", name);
    } else if ((uint64_t)(n / tr->block_size) * tr->type_size != t->nbytes) {
      fail("tensor %s: byte size does not match its shape", name);
      free(dst);
    } else {
      tr->to_float(t->data, dst, n);
      rc = write_file(out, dst, (size_t)n * sizeof(float));
      free(dst);
    }
  }
  gguf_close(f);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr,
            "usage: quant_tool dequant TYPE IN.bin OUT.f32\n"
            "       quant_tool quant TYPE IN.f32 OUT.bin\n"
            "       quant_tool dequant-tensor MODEL.gguf TENSOR OUT.f32\n");
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "dequant") == 0 || strcmp(cmd, "quant") == 0) {
    pa_type type;
    const pa_type_traits *tr = parse_type(argv[2], &type);
    if (tr == NULL) return fail("unknown type %s", argv[2]);
    return cmd[0] == 'd' ? cmd_dequant(tr, argv[3], argv[4]) : cmd_quant(tr, argv[3], argv[4]);
  }
  if (strcmp(cmd, "dequant-tensor") == 0) return cmd_dequant_tensor(argv[2], argv[3], argv[4]);
  return fail("unknown command %s", cmd);
}
