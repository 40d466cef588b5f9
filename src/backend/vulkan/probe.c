/* probe.c: a Vulkan device's own ceilings (probe.h): read bandwidth
 * (shaders/probe_read.comp streams a device buffer far larger than the
 * GPU's caches as 16-byte loads) and the fp32 FMA rate
 * (shaders/probe_fma.comp: independent FMA chains in registers over many
 * workgroups). Each pass is one command buffer of one or more dispatches
 * between two timestamps, submitted and waited for; a ceiling is the best
 * pass. Also the tools' view of a context's per-shader GPU times (vk.h's
 * pa_vk_timing), without Vulkan types. */
#include "backend/vulkan/probe.h"

#include <stdio.h>
#include <string.h>

#include "backend/vulkan/vk.h"
#include "base/base.h"

/* ---- one pass: dispatches between two timestamps ---- */

typedef struct {
  pa_vk_dev *d;
  VkCommandPool pool;
  VkCommandBuffer cb;
  VkFence fence;
  VkQueryPool queries; /* two timestamps; VK_NULL_HANDLE: host clock */
} runner;

static void runner_close(runner *r) {
  pa_vk_dev *d = r->d;
  if (r->queries) d->f.vkDestroyQueryPool(d->dev, r->queries, NULL);
  if (r->fence) d->f.vkDestroyFence(d->dev, r->fence, NULL);
  if (r->pool) d->f.vkDestroyCommandPool(d->dev, r->pool, NULL); /* frees cb */
  memset(r, 0, sizeof *r);
}

static int runner_open(pa_vk_dev *d, runner *r) {
  memset(r, 0, sizeof *r);
  r->d = d;
  const VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                       .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                       .queueFamilyIndex = d->queue_family};
  const VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  bool ok = d->f.vkCreateCommandPool(d->dev, &pci, NULL, &r->pool) == VK_SUCCESS;
  if (ok) {
    const VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = r->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1};
    ok = d->f.vkAllocateCommandBuffers(d->dev, &cai, &r->cb) == VK_SUCCESS;
  }
  if (ok) ok = d->f.vkCreateFence(d->dev, &fci, NULL, &r->fence) == VK_SUCCESS;
  if (!ok) {
    runner_close(r);
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "Vulkan device %s: no command buffer or fence for the probes", d->info.name);
  }
  if (d->timestamp_ns > 0) {
    const VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                       .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                       .queryCount = 2};
    if (d->f.vkCreateQueryPool(d->dev, &qci, NULL, &r->queries) != VK_SUCCESS)
      r->queries = VK_NULL_HANDLE;
  }
  return PASADA_OK;
}

/* Submits what r->cb holds and waits for it. */
static int submit_wait(runner *r) {
  pa_vk_dev *d = r->d;
  const VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &r->cb};
  pthread_mutex_lock(&d->lock); /* the queue is the device's, shared with its contexts */
  VkResult res = d->f.vkQueueSubmit(d->queue, 1, &si, r->fence);
  pthread_mutex_unlock(&d->lock);
  if (res == VK_SUCCESS) res = d->f.vkWaitForFences(d->dev, 1, &r->fence, VK_TRUE, UINT64_MAX);
  d->f.vkResetFences(d->dev, 1, &r->fence);
  d->f.vkResetCommandBuffer(r->cb, 0);
  if (res != VK_SUCCESS)
    return pa_error(PASADA_ERR_IO,
                    "Vulkan device %s: a probe's submission failed (%d; device lost?)",
                    d->info.name, (int)res);
  return PASADA_OK;
}

/* Fills a buffer with a byte pattern, so every page of it is really there
 * (a CPU implementation's untouched memory would read as the zero page). */
static int fill(runner *r, const pa_vk_buf *b) {
  pa_vk_dev *d = r->d;
  const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  d->f.vkBeginCommandBuffer(r->cb, &bi);
  d->f.vkCmdFillBuffer(r->cb, b->buf, 0, VK_WHOLE_SIZE, 0x5a5a5a5au);
  const VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
  d->f.vkCmdPipelineBarrier(r->cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
  d->f.vkEndCommandBuffer(r->cb);
  return submit_wait(r);
}

/* One pass: `dispatches` dispatches of `groups` workgroups of pipe with
 * push constants `push` (n bytes), back to back (they only read, and write
 * nothing that another reads); *seconds from the timestamps before the
 * first and after the last. */
static int pass(runner *r, VkPipeline pipe, const void *push, size_t n, uint32_t groups,
                int dispatches, double *seconds) {
  pa_vk_dev *d = r->d;
  uint8_t pc[PA_VK_PUSH] = {0};
  memcpy(pc, push, n);
  const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  d->f.vkBeginCommandBuffer(r->cb, &bi);
  if (r->queries) {
    d->f.vkCmdResetQueryPool(r->cb, r->queries, 0, 2);
    d->f.vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->queries, 0);
  }
  d->f.vkCmdBindPipeline(r->cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
  d->f.vkCmdPushConstants(r->cb, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, PA_VK_PUSH, pc);
  for (int i = 0; i < dispatches; i++) d->f.vkCmdDispatch(r->cb, groups, 1, 1);
  if (r->queries)
    d->f.vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->queries, 1);
  d->f.vkEndCommandBuffer(r->cb);
  const double t0 = pa_time_s();
  int rc = submit_wait(r);
  const double host = pa_time_s() - t0;
  if (rc) return rc;
  *seconds = host;
  uint64_t ts[2];
  if (r->queries &&
      d->f.vkGetQueryPoolResults(d->dev, r->queries, 0, 2, sizeof ts, ts, sizeof ts[0],
                                 VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS &&
      ts[1] > ts[0])
    *seconds = (double)(ts[1] - ts[0]) * d->timestamp_ns * 1e-9;
  return PASADA_OK;
}

/* ---- the probes ---- */

/* How long the probes run: a CPU implementation is slow and shares the
 * machine with the benchmark, so fewer and smaller passes there. */
typedef struct {
  uint64_t read_max;   /* bytes of the read buffer, at most */
  double pass_s;       /* a pass's target duration */
  int passes;          /* timed passes per ceiling (after a first, untimed one) */
  uint32_t fma_groups; /* workgroups of 256 invocations */
} budget;

static budget budget_for(const pa_vk_dev *d) {
  if (!strcmp(d->info.type, "cpu")) return (budget){64ull << 20, 0.05, 5, 256};
  return (budget){256ull << 20, 0.005, 8, 8192};
}

/* 16-byte vectors a workgroup of probe_read reads (64 KiB): a multiple of
 * the four runs of 256 invocations it reads at each step */
enum { READ_PER_WG = 4096 };
#define MAGIC 0x9e3779b9u

static int measure_read(runner *r, const budget *b, pa_vulkan_ceilings *out) {
  pa_vk_dev *d = r->d;
  VkPipeline pipe = pa_vk_pipeline(d, "probe_read");
  if (!pipe) return PASADA_ERR_UNSUPPORTED; /* message set */
  pa_vk_buf src = {0}, dst = {0};
  uint64_t bytes = b->read_max;
  if (d->info.memory && bytes > d->info.memory / 8) bytes = d->info.memory / 8;
  if (bytes > d->max_alloc) bytes = d->max_alloc;
  const uint64_t chunk = (uint64_t)READ_PER_WG * 16;
  bytes = bytes / chunk * chunk;
  if (bytes < chunk) bytes = chunk;
  /* the largest buffer the device gives, halving down to 16 MiB (the
   * model's weights and a context may already hold most of its memory) */
  int rc = pa_vk_buf_create(d, 256, false, &dst);
  while (!rc) {
    rc = pa_vk_buf_create(d, bytes, false, &src);
    if (!rc || bytes / 2 < (16ull << 20)) break;
    bytes = bytes / 2 / chunk * chunk;
    rc = PASADA_OK;
  }
  if (rc) pa_error_prefix("the read-bandwidth probe: ");
  if (!rc) rc = fill(r, &src);
  struct {
    uint64_t src, dst;
    uint32_t per_wg, magic;
  } push = {src.addr, dst.addr, READ_PER_WG, MAGIC};
  const uint32_t groups = (uint32_t)(bytes / chunk);
  /* a first pass untimed, a second that sizes the timed ones: as many
   * back-to-back reads of the buffer as make a pass last about pass_s (so
   * a launch's fixed cost is small beside it) */
  double s = 0, best = 0;
  if (!rc) rc = pass(r, pipe, &push, sizeof push, groups, 1, &s);
  if (!rc) rc = pass(r, pipe, &push, sizeof push, groups, 1, &s);
  int reps = 1;
  if (!rc && s > 0 && s < b->pass_s) {
    const double want = b->pass_s / s;
    reps = want > 64 ? 64 : (int)want + 1;
  }
  for (int i = 0; i < b->passes && !rc; i++) {
    rc = pass(r, pipe, &push, sizeof push, groups, reps, &s);
    if (!rc && s > 0 && (best == 0 || s < best)) best = s;
  }
  if (!rc) {
    out->read_bytes = bytes;
    out->read_gbs = best > 0 ? (double)bytes * reps / best / 1e9 : 0;
  }
  pa_vk_buf_free(d, &src);
  pa_vk_buf_free(d, &dst);
  return rc;
}

static int measure_fma(runner *r, const budget *b, pa_vulkan_ceilings *out) {
  pa_vk_dev *d = r->d;
  VkPipeline pipe = pa_vk_pipeline(d, "probe_fma");
  if (!pipe) return PASADA_ERR_UNSUPPORTED;
  pa_vk_buf dst = {0};
  int rc = pa_vk_buf_create(d, 256, false, &dst);
  if (rc) {
    pa_error_prefix("the FMA probe: ");
    return rc;
  }
  struct {
    uint64_t dst;
    uint32_t iters;
    float b, c, magic;
  } push = {dst.addr, 64, 0.9999f, 1e-4f, -1.0f}; /* the chains stay in (0, 2): never -1 */
  /* iterations: grown until a pass lasts an eighth of pass_s, then scaled
   * to pass_s */
  double s = 0, best = 0;
  rc = pass(r, pipe, &push, sizeof push, b->fma_groups, 1, &s); /* untimed: a first run */
  for (int k = 0; !rc && k < 12; k++) {
    rc = pass(r, pipe, &push, sizeof push, b->fma_groups, 1, &s);
    if (rc || s >= b->pass_s / 8 || push.iters >= (1u << 22)) break;
    push.iters *= 8;
  }
  if (!rc && s > 0) {
    double it = push.iters * b->pass_s / s;
    push.iters = it < 64 ? 64 : it > (double)(1u << 24) ? (1u << 24) : (uint32_t)it;
  }
  for (int i = 0; i < b->passes && !rc; i++) {
    rc = pass(r, pipe, &push, sizeof push, b->fma_groups, 1, &s);
    if (!rc && s > 0 && (best == 0 || s < best)) best = s;
  }
  if (!rc) {
    const double flop = 64.0 * push.iters * 256.0 * b->fma_groups; /* 32 FMAs an iteration */
    out->fma_gflops = best > 0 ? flop / best / 1e9 : 0;
  }
  pa_vk_buf_free(d, &dst);
  return rc;
}

int pa_vulkan_measure_ceilings(const pa_backend *be, pa_vulkan_ceilings *out) {
  memset(out, 0, sizeof *out);
  if (!pa_backend_is_vulkan(be))
    return pa_error(PASADA_ERR_ARG, "the device ceilings need a Vulkan backend (this one is %s)",
                    be ? be->name : "none");
  pa_vk_dev *d = pa_vk_backend_dev(be);
  out->dev = d->info;
  runner r;
  int rc = runner_open(d, &r);
  if (rc) return rc;
  out->timestamps = r.queries != VK_NULL_HANDLE;
  const budget b = budget_for(d);
  rc = measure_read(&r, &b, out);
  if (!rc) rc = measure_fma(&r, &b, out);
  runner_close(&r);
  return rc;
}

int pa_vulkan_backend_info(const pa_backend *be, pa_device_info *out) {
  memset(out, 0, sizeof *out);
  if (!pa_backend_is_vulkan(be))
    return pa_error(PASADA_ERR_ARG, "backend %s is not a Vulkan one", be ? be->name : "none");
  *out = pa_vk_backend_dev(be)->info;
  return PASADA_OK;
}

/* ---- a context's GPU time per shader ---- */

int pa_vulkan_context_timing(pa_bctx *bc, bool on) {
  return pa_vk_timing(bc, on);
}

int pa_vulkan_context_times(pa_bctx *bc, pa_vulkan_shader_time *out, int cap) {
  const pa_vk_time *t;
  const int n = pa_vk_times(bc, &t);
  for (int i = 0; i < n && i < cap; i++) {
    snprintf(out[i].shader, sizeof out[i].shader, "%s", t[i].shader);
    out[i].ns = t[i].ns;
    out[i].count = t[i].count;
  }
  return n;
}

void pa_vulkan_context_times_reset(pa_bctx *bc) {
  pa_vk_times_reset(bc);
}
