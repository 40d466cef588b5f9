/* vk.h: the Vulkan layer under the GPU backend: the loader opened at run
 * time, one logical device with its compute queue, memory and buffers
 * with device addresses, compute pipelines made from the SPIR-V embedded
 * at build time, and command buffers that are recorded once and submitted
 * again.
 *
 * Shaders take no descriptors: every buffer is passed by its device
 * address (uint64, bytes) in the push constants (PA_VK_PUSH bytes) or in a
 * buffer those name (shaders/common.glsl). A pipeline is one shader
 * variant ("matmul_q4_k"), made the first time it is asked for and kept
 * by the device; the device is shared by every context of a backend, and
 * pa_vk_pipeline may be called from several threads. */
#ifndef PASADA_VK_H
#define PASADA_VK_H

#define VK_NO_PROTOTYPES
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "backend/backend.h"

#define PA_VK_PUSH 128 /* bytes of push constants every pipeline takes */

/* the entry points pasada calls, loaded from the loader */
#define PA_VK_INSTANCE_FNS(X)                                                                            \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                     \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceMemoryProperties) \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice)  \
  X(vkGetDeviceProcAddr)
#define PA_VK_DEVICE_FNS(X)                                                                              \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)                           \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)           \
  X(vkMapMemory) X(vkUnmapMemory) X(vkGetBufferDeviceAddress) X(vkCreateShaderModule)                  \
  X(vkDestroyShaderModule) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                        \
  X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateCommandPool) X(vkDestroyCommandPool)      \
  X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)    \
  X(vkResetCommandBuffer) X(vkCmdBindPipeline) X(vkCmdPushConstants) X(vkCmdDispatch)                  \
  X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkCmdFillBuffer) X(vkCreateFence) X(vkDestroyFence)     \
  X(vkResetFences) X(vkWaitForFences) X(vkQueueSubmit) X(vkDeviceWaitIdle) X(vkCreateQueryPool)        \
  X(vkDestroyQueryPool) X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)

typedef struct {
#define PA_VK_DECL(f) PFN_##f f;
  PA_VK_INSTANCE_FNS(PA_VK_DECL) PA_VK_DEVICE_FNS(PA_VK_DECL)
#undef PA_VK_DECL
} pa_vk_fns;

/* A buffer and its memory: device-local, or host-visible and mapped. */
typedef struct {
  VkBuffer buf;
  VkDeviceMemory mem;
  uint64_t addr; /* device address of byte 0 */
  uint64_t size;
  void *map;     /* host pointer when mapped, else NULL */
} pa_vk_buf;

enum { PA_VK_MAX_PIPES = 64 };

typedef struct pa_vk_dev {
  void *lib; /* the loader (dlopen) */
  PFN_vkGetInstanceProcAddr gipa;
  VkInstance inst;
  VkPhysicalDevice phys;
  VkDevice dev;
  VkQueue queue;
  uint32_t queue_family;
  pa_vk_fns f;
  pa_device_info info;
  uint64_t max_alloc;         /* bytes of one allocation */
  float timestamp_ns;         /* nanoseconds per timestamp tick (0: no timestamps) */
  uint32_t mem_device, mem_host; /* memory type indices: device-local, host-visible coherent */
  bool device_mappable;       /* device-local memory is host-visible too (UMA, lavapipe) */
  VkPipelineLayout layout;    /* push constants only */
  pthread_mutex_t lock;       /* pipes, and the queue (submissions) */
  struct {
    char name[32];
    VkPipeline pipe;
  } pipes[PA_VK_MAX_PIPES];
  int n_pipes;
  VkCommandPool upload_pool;  /* weights' uploads (under lock) */
} pa_vk_dev;

/* The devices (pa_vulkan_devices) and one opened: device -1 is the first
 * real GPU. Errors name the cause in one line. */
int pa_vk_open(int device, pa_vk_dev **out);
void pa_vk_close(pa_vk_dev *d);

/* Memory. host: host-visible, coherent, mapped (else device-local, mapped
 * when the device's memory is host-visible too). */
int pa_vk_buf_create(pa_vk_dev *d, uint64_t size, bool host, pa_vk_buf *out);
void pa_vk_buf_free(pa_vk_dev *d, pa_vk_buf *b);
/* Copies host bytes into a buffer (at offset), waiting until they are
 * there; through a staging buffer unless it is mapped. */
int pa_vk_write(pa_vk_dev *d, pa_vk_buf *dst, uint64_t offset, const void *src, uint64_t n);

/* The pipeline of shader variant `name` (NULL with an error naming it when
 * there is no such SPIR-V or the driver refuses it). */
VkPipeline pa_vk_pipeline(pa_vk_dev *d, const char *name);

/* The device of a backend made by pa_backend_vulkan_create. */
pa_vk_dev *pa_vk_backend_dev(const pa_backend *be);

/* Timing a context's GPU work (pasada profile --device vulkan): with it
 * on, every command of a pass is followed by a timestamp, and each
 * command's time is added to its shader's total ("matmul_q4_k", "copy"). */
typedef struct {
  char shader[24];
  double ns;     /* total */
  int64_t count; /* commands */
} pa_vk_time;
int pa_vk_timing(pa_bctx *c, bool on);
int pa_vk_times(pa_bctx *c, const pa_vk_time **times); /* returns how many */
void pa_vk_times_reset(pa_bctx *c);

/* SPIR-V embedded at build time (shaders.c, generated). */
typedef struct {
  const char *name;
  const uint32_t *code;
  uint32_t bytes;
} pa_vk_spirv;
extern const pa_vk_spirv pa_vk_shaders[];
extern const int pa_vk_n_shaders;

#endif
