/* profile_gpu.c: `pasada profile` on a Vulkan device (profile_gpu.h): the
 * GPU time per shader of each phase, from the context's timestamps, and
 * its parts of the table, the JSON and the SVG chart. */
#include "tools/profile_gpu.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

enum { MAX_SHADERS = 128 };

/* The kind of work a shader does, by its name's prefix (the shaders of
 * backend/vulkan/shaders, variants named "<shader>_<type>"); the linear
 * attention's delta_conv and delta_net count as attention, as the model
 * code's profile op names them. */
static const char *shader_kind(const char *s) {
  static const struct {
    const char *prefix, *kind;
  } K[] = {{"matmul", "matmul"}, {"attention", "attention"}, {"kv_store", "kv_store"},
           {"rms_norm", "norm"}, {"rope", "rope"},           {"gate", "activation"},
           {"add", "add"},       {"embed", "embed"},         {"copy", "copy"},
           {"delta", "attention"}};
  for (size_t i = 0; i < sizeof K / sizeof K[0]; i++)
    if (!strncmp(s, K[i].prefix, strlen(K[i].prefix))) return K[i].kind;
  return "other";
}

int pa_profile_gpu_begin(pa_profile_gpu *g, struct pa_context *ctx) {
  int rc = pa_vulkan_backend_info(ctx->be, &g->dev);
  if (!rc) rc = pa_vulkan_context_timing(ctx->bc, true);
  if (!rc) pa_vulkan_context_times_reset(ctx->bc);
  return rc;
}

static int cmp_rows(const void *a, const void *b) {
  const pa_gpu_shader_row *x = a, *y = b;
  return x->gpu_s < y->gpu_s ? 1 : x->gpu_s > y->gpu_s ? -1 : strcmp(x->shader, y->shader);
}

int pa_profile_gpu_end_phase(pa_profile_gpu *g, struct pa_context *ctx, int phase) {
  ctx->be->ops->synchronize(ctx->bc); /* what is still recorded runs, and is timed, now */
  pa_vulkan_shader_time t[MAX_SHADERS];
  int n = pa_vulkan_context_times(ctx->bc, t, MAX_SHADERS);
  if (n > MAX_SHADERS) n = MAX_SHADERS;
  pa_vulkan_context_times_reset(ctx->bc);
  pa_gpu_phase *ph = &g->ph[phase];
  free(ph->rows);
  ph->rows = calloc((size_t)(n > 0 ? n : 1), sizeof *ph->rows);
  if (!ph->rows) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  ph->n_rows = n;
  ph->gpu_s = 0;
  for (int i = 0; i < n; i++) {
    pa_gpu_shader_row *w = &ph->rows[i];
    memcpy(w->shader, t[i].shader, sizeof w->shader);
    w->shader[sizeof w->shader - 1] = 0;
    w->kind = shader_kind(w->shader);
    w->commands = t[i].count;
    w->gpu_s = t[i].ns * 1e-9;
    ph->gpu_s += w->gpu_s;
  }
  qsort(ph->rows, (size_t)n, sizeof *ph->rows, cmp_rows);
  return PASADA_OK;
}

void pa_profile_gpu_discard(struct pa_context *ctx) {
  ctx->be->ops->synchronize(ctx->bc);
  pa_vulkan_context_times_reset(ctx->bc);
}

void pa_profile_gpu_end(struct pa_context *ctx) {
  pa_vulkan_context_timing(ctx->bc, false);
}

void pa_profile_gpu_free(pa_profile_gpu *g) {
  if (!g) return;
  for (int i = 0; i < 2; i++) free(g->ph[i].rows);
  free(g);
}

void pa_profile_gpu_device(char *buf, size_t cap, const pa_profile_gpu *g) {
  snprintf(buf, cap, "vulkan:%d, %s (%s, Vulkan %s)", g->dev.index, g->dev.name, g->dev.type,
           g->dev.api);
}

/* ---- the table ---- */

static double pct(double part, double whole) {
  return whole > 0 ? 100 * part / whole : 0;
}

void pa_profile_gpu_print_phase(FILE *f, const pa_gpu_phase *ph, double wall_s) {
  fprintf(f, "%-24s %-10s %9s %10s %6s %6s %12s\n", "shader", "kind", "commands", "GPU ms", "%GPU",
          "%wall", "us/command");
  for (int i = 0; i < ph->n_rows; i++) {
    const pa_gpu_shader_row *w = &ph->rows[i];
    fprintf(f, "%-24s %-10s %9lld %10.3f %5.1f%% %5.1f%% %12.2f\n", w->shader, w->kind,
            (long long)w->commands, w->gpu_s * 1e3, pct(w->gpu_s, ph->gpu_s), pct(w->gpu_s, wall_s),
            w->commands > 0 ? w->gpu_s * 1e6 / (double)w->commands : 0);
  }
  fprintf(f, "%-24s %-10s %9s %10.3f %5.1f%% %5.1f%%\n", "(all shaders)", "", "", ph->gpu_s * 1e3,
          100.0, pct(ph->gpu_s, wall_s));
  fprintf(
      f,
      "%-24s %-10s %9s %10.3f %6s %5.1f%%   wall time the GPU ran none of the phase's commands\n",
      "(outside the GPU)", "host", "", (wall_s - ph->gpu_s) * 1e3, "",
      pct(wall_s - ph->gpu_s, wall_s));
}

/* ---- JSON ---- */

cJSON *pa_device_info_json(const pa_device_info *dev) {
  cJSON *d = cJSON_CreateObject();
  if (!d) return NULL;
  cJSON_AddStringToObject(d, "api", "vulkan");
  cJSON_AddNumberToObject(d, "index", dev->index);
  cJSON_AddStringToObject(d, "name", dev->name);
  cJSON_AddStringToObject(d, "type", dev->type);
  cJSON_AddStringToObject(d, "version", dev->api);
  cJSON_AddNumberToObject(d, "memory_bytes", (double)dev->memory);
  return d;
}

void pa_profile_gpu_phase_json(cJSON *o, const pa_gpu_phase *ph, double wall_s, int32_t tokens) {
  cJSON_AddNumberToObject(o, "ms_per_token", tokens > 0 ? wall_s * 1e3 / tokens : 0);
  cJSON_AddNumberToObject(o, "gpu_s", ph->gpu_s);
  cJSON_AddNumberToObject(o, "outside_gpu_s", wall_s - ph->gpu_s);
  cJSON_AddNumberToObject(o, "tokenize_s", ph->tokenize_s);
  cJSON_AddNumberToObject(o, "sample_s", ph->sample_s);
  cJSON *a = cJSON_AddArrayToObject(o, "shaders");
  for (int i = 0; a && i < ph->n_rows; i++) {
    const pa_gpu_shader_row *w = &ph->rows[i];
    cJSON *s = cJSON_CreateObject();
    if (!s) continue;
    cJSON_AddStringToObject(s, "name", w->shader);
    cJSON_AddStringToObject(s, "kind", w->kind);
    cJSON_AddNumberToObject(s, "commands", (double)w->commands);
    cJSON_AddNumberToObject(s, "gpu_s", w->gpu_s);
    cJSON_AddNumberToObject(s, "pct_gpu", pct(w->gpu_s, ph->gpu_s));
    cJSON_AddNumberToObject(s, "pct_wall", pct(w->gpu_s, wall_s));
    cJSON_AddItemToArray(a, s);
  }
}

/* ---- SVG ---- */

enum { SVG_BARS = 12 };

void pa_profile_gpu_svg_phase(FILE *f, const pa_gpu_phase *ph, const char *name, int32_t tokens,
                              double wall_s, int y, int width) {
  static const char *KINDS[] = {"matmul",     "attention", "kv_store", "norm", "rope",
                                "activation", "add",       "embed",    "copy", "other"};
  enum { N_KINDS = sizeof KINDS / sizeof KINDS[0], X0 = 190, BW = 520 };
  fprintf(f,
          "<text x=\"20\" y=\"%d\" font-size=\"15\" font-weight=\"bold\">%s: %d tokens, %.1f ms "
          "(%.2f tok/s), "
          "GPU busy %.1f%% of it</text>\n",
          y + 16, name, tokens, wall_s * 1e3, wall_s > 0 ? tokens / wall_s : 0,
          pct(ph->gpu_s, wall_s));
  y += 28;
  /* the wall time: each kind's GPU time, then the time outside the GPU */
  double by_kind[N_KINDS + 1] = {0};
  for (int i = 0; i < ph->n_rows; i++)
    for (int k = 0; k < N_KINDS; k++)
      if (!strcmp(ph->rows[i].kind, KINDS[k])) by_kind[k] += ph->rows[i].gpu_s;
  by_kind[N_KINDS] = wall_s > ph->gpu_s ? wall_s - ph->gpu_s : 0;
  double total = 0;
  for (int k = 0; k <= N_KINDS; k++) total += by_kind[k];
  fprintf(f, "<text x=\"20\" y=\"%d\">by kind (GPU), host</text>\n", y + 18);
  double x = X0;
  for (int k = 0; k <= N_KINDS && total > 0; k++) {
    if (by_kind[k] <= 0) continue;
    const char *kind = k < N_KINDS ? KINDS[k] : "outside the GPU";
    const double w = (width - X0 - 20) * by_kind[k] / total;
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"26\" fill=\"%s\"><title>%s: %.3f ms "
            "(%.1f%%)</title></rect>\n",
            x, y, w, pa_profile_kind_color(k < N_KINDS ? kind : "overhead"), kind, by_kind[k] * 1e3,
            100 * by_kind[k] / total);
    char label[64];
    snprintf(label, sizeof label, "%s %.0f%%", kind, 100 * by_kind[k] / total);
    if (w > 7.0 * (double)strlen(label) + 8)
      fprintf(f, "<text x=\"%.1f\" y=\"%d\" fill=\"white\">%s</text>\n", x + 4, y + 17, label);
    x += w;
  }
  y += 40;
  const double longest = ph->n_rows > 0 && ph->rows[0].gpu_s > 0 ? ph->rows[0].gpu_s : 1;
  for (int i = 0; i < ph->n_rows && i < SVG_BARS; i++) {
    const pa_gpu_shader_row *w = &ph->rows[i];
    const double bw = BW * w->gpu_s / longest;
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", X0 - 8, y + 13);
    pa_profile_svg_text(f, w->shader);
    fprintf(f, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"%s\"/>\n", X0,
            y, bw, pa_profile_kind_color(w->kind));
    fprintf(f,
            "<text x=\"%.1f\" y=\"%d\" fill=\"#222\">%.2f ms GPU, %.1f%% of the wall time, %lld "
            "commands</text>\n",
            X0 + bw + 6, y + 13, w->gpu_s * 1e3, pct(w->gpu_s, wall_s), (long long)w->commands);
    y += 22;
  }
}
