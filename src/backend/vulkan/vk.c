/* vk.c: the Vulkan loader, devices, memory and pipelines (vk.h). */
#include "backend/vulkan/vk.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "base/env.h"

/* ---- the loader and an instance ---- */

typedef struct {
  void *lib;
  PFN_vkGetInstanceProcAddr gipa;
  VkInstance inst;
  pa_vk_fns f;
} instance;

static void instance_drop(instance *in) {
  if (in->inst && in->f.vkDestroyInstance) in->f.vkDestroyInstance(in->inst, NULL);
  /* the loader stays loaded (dlopen again only counts up): drivers keep
   * process-wide state that unloading them would leak */
  memset(in, 0, sizeof *in);
}

static int instance_make(instance *in) {
  memset(in, 0, sizeof *in);
  const char *named = pa_env_vulkan_loader();
  const char *names[] = {"libvulkan.so.1", "libvulkan.so"};
  if (named) {
    in->lib = dlopen(named, RTLD_NOW | RTLD_LOCAL);
    if (!in->lib)
      return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: cannot open the loader PASADA_VULKAN_LOADER names (%s)", named);
  }
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !in->lib; i++) in->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!in->lib)
    return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: no Vulkan loader on this machine (libvulkan.so.1: install "
                    "the GPU's driver, or Debian's libvulkan1 and mesa-vulkan-drivers)");
  in->gipa = (PFN_vkGetInstanceProcAddr)dlsym(in->lib, "vkGetInstanceProcAddr");
  PFN_vkCreateInstance create = in->gipa ? (PFN_vkCreateInstance)in->gipa(NULL, "vkCreateInstance") : NULL;
  if (!create) {
    instance_drop(in);
    return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: the loader has no vkCreateInstance");
  }
  const VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "pasada",
                                 .pEngineName = "pasada", .apiVersion = VK_API_VERSION_1_2};
  const VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  const VkResult r = create(&ci, NULL, &in->inst);
  if (r != VK_SUCCESS) {
    in->inst = NULL;
    instance_drop(in);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
      return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: the loader found no driver (install the GPU's Vulkan driver, "
                      "or Mesa's: mesa-vulkan-drivers)");
    return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: no instance (vkCreateInstance failed: %d)", (int)r);
  }
#define PA_VK_LOAD(fn) in->f.fn = (PFN_##fn)in->gipa(in->inst, #fn);
  PA_VK_INSTANCE_FNS(PA_VK_LOAD)
#undef PA_VK_LOAD
#define PA_VK_CHECK(fn) if (!in->f.fn) { instance_drop(in); return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: the loader lacks " #fn); }
  PA_VK_INSTANCE_FNS(PA_VK_CHECK)
#undef PA_VK_CHECK
  return PASADA_OK;
}

/* One instance per process, made when first needed and kept until exit:
 * the loader unloads a driver with the last instance, and drivers keep
 * process state that unloading leaks. Read-only once made; a failure is
 * kept too, and repeated with its message. */
static instance g_inst;
static int g_inst_rc;
static char g_inst_err[256];
static pthread_once_t g_inst_once = PTHREAD_ONCE_INIT;

static void instance_init(void) {
  g_inst_rc = instance_make(&g_inst);
  if (g_inst_rc) snprintf(g_inst_err, sizeof g_inst_err, "%s", pasada_last_error());
}

static int instance_open(instance *in) {
  pthread_once(&g_inst_once, instance_init);
  if (g_inst_rc) return pa_error(g_inst_rc, "%s", g_inst_err);
  *in = g_inst;
  return PASADA_OK;
}

/* the process's instance stays; only the caller's copy goes */
static void instance_close(instance *in) { memset(in, 0, sizeof *in); }

/* ---- a physical device's description ---- */

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(e[i].extensionName, name)) return true;
  return false;
}

static void missing(pa_device_info *di, const char *what) {
  if (di->usable) {
    di->usable = false;
    snprintf(di->missing, sizeof di->missing, "%s", what);
  } else {
    const size_t l = strlen(di->missing);
    snprintf(di->missing + l, sizeof di->missing - l, ", %s", what);
  }
}

static void describe(const instance *in, VkPhysicalDevice p, int index, pa_device_info *di) {
  memset(di, 0, sizeof *di);
  di->index = index;
  VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 pr = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
  in->f.vkGetPhysicalDeviceProperties2(p, &pr);
  const VkPhysicalDeviceProperties *P = &pr.properties;
  snprintf(di->name, sizeof di->name, "%s", P->deviceName);
  snprintf(di->api, sizeof di->api, "%u.%u.%u", VK_API_VERSION_MAJOR(P->apiVersion),
           VK_API_VERSION_MINOR(P->apiVersion), VK_API_VERSION_PATCH(P->apiVersion));
  const char *type = "other";
  switch (P->deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: type = "discrete"; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: type = "integrated"; break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: type = "virtual"; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: type = "cpu"; break;
    default: break;
  }
  snprintf(di->type, sizeof di->type, "%s", type);
  di->subgroup = sg.subgroupSize;
  VkPhysicalDeviceMemoryProperties mp;
  in->f.vkGetPhysicalDeviceMemoryProperties(p, &mp);
  for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
    if ((mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mp.memoryHeaps[h].size > di->memory)
      di->memory = mp.memoryHeaps[h].size;
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                          .pNext = &f12};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
  const bool v12 = VK_API_VERSION_MINOR(P->apiVersion) >= 2 || VK_API_VERSION_MAJOR(P->apiVersion) > 1;
  if (v12) in->f.vkGetPhysicalDeviceFeatures2(p, &f);
  di->fp16 = f12.shaderFloat16;
  di->int8 = f12.shaderInt8;
  uint32_t n_ext = 0;
  in->f.vkEnumerateDeviceExtensionProperties(p, NULL, &n_ext, NULL);
  VkExtensionProperties *ext = pa_calloc(n_ext ? n_ext : 1, sizeof *ext);
  if (ext) in->f.vkEnumerateDeviceExtensionProperties(p, NULL, &n_ext, ext);
  di->coopmat = ext && has_ext(ext, n_ext, "VK_KHR_cooperative_matrix");
  pa_free(ext);
  di->usable = true;
  if (!v12) missing(di, "Vulkan 1.2");
  if (v12 && !f12.bufferDeviceAddress) missing(di, "buffer device addresses");
  if (!f.features.shaderInt64) missing(di, "64-bit integers");
  if (!f.features.shaderInt16) missing(di, "16-bit integers");
  if (v12 && !f11.storageBuffer16BitAccess) missing(di, "16-bit storage");
  if (v12 && !f12.storageBuffer8BitAccess) missing(di, "8-bit storage");
  if (!(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
      !(sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT))
    missing(di, "subgroup arithmetic in compute shaders");
}

bool pa_vulkan_built(void) { return true; }

int pa_vulkan_devices(pa_device_info *out, int cap, int *n) {
  *n = 0;
  instance in;
  int rc = instance_open(&in);
  if (rc) return rc;
  uint32_t count = 0;
  in.f.vkEnumeratePhysicalDevices(in.inst, &count, NULL);
  VkPhysicalDevice *pd = pa_calloc(count ? count : 1, sizeof *pd);
  if (!pd) {
    instance_close(&in);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  in.f.vkEnumeratePhysicalDevices(in.inst, &count, pd);
  for (uint32_t i = 0; i < count && (int)i < cap; i++) describe(&in, pd[i], (int)i, &out[i]);
  *n = (int)count;
  pa_free(pd);
  instance_close(&in);
  return PASADA_OK;
}

/* ---- opening one ---- */

static int type_rank(const char *t) {
  return !strcmp(t, "discrete") ? 0 : !strcmp(t, "integrated") ? 1 : !strcmp(t, "virtual") ? 2 : 9;
}

static uint32_t find_memory(const VkPhysicalDeviceMemoryProperties *mp, uint32_t want, uint32_t avoid) {
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
    if ((mp->memoryTypes[i].propertyFlags & want) == want && !(mp->memoryTypes[i].propertyFlags & avoid)) return i;
  return UINT32_MAX;
}

void pa_vk_close(pa_vk_dev *d) {
  if (!d) return;
  if (d->dev) {
    d->f.vkDeviceWaitIdle(d->dev);
    for (int i = 0; i < d->n_pipes; i++) d->f.vkDestroyPipeline(d->dev, d->pipes[i].pipe, NULL);
    if (d->layout) d->f.vkDestroyPipelineLayout(d->dev, d->layout, NULL);
    if (d->upload_pool) d->f.vkDestroyCommandPool(d->dev, d->upload_pool, NULL);
    d->f.vkDestroyDevice(d->dev, NULL);
  }
  instance in = {.lib = d->lib, .gipa = d->gipa, .inst = d->inst, .f = d->f};
  instance_close(&in);
  pthread_mutex_destroy(&d->lock);
  pa_free(d);
}

int pa_vk_open(int device, pa_vk_dev **out) {
  *out = NULL;
  instance in;
  int rc = instance_open(&in);
  if (rc) return rc;
  uint32_t count = 0;
  in.f.vkEnumeratePhysicalDevices(in.inst, &count, NULL);
  VkPhysicalDevice pd[16];
  if (count > 16) count = 16;
  if (count) in.f.vkEnumeratePhysicalDevices(in.inst, &count, pd);
  pa_device_info info[16];
  for (uint32_t i = 0; i < count; i++) describe(&in, pd[i], (int)i, &info[i]);
  int pick = -1;
  if (device >= 0) {
    if ((uint32_t)device >= count) {
      instance_close(&in);
      return pa_error(PASADA_ERR_ARG, "--device vulkan:%d: this machine has %u Vulkan device%s (pasada devices)",
                      device, count, count == 1 ? "" : "s");
    }
    if (!info[device].usable) {
      instance_close(&in);
      return pa_error(PASADA_ERR_UNSUPPORTED, "--device vulkan:%d (%s) lacks %s, which pasada's shaders need",
                      device, info[device].name, info[device].missing);
    }
    pick = device;
  } else {
    for (uint32_t i = 0; i < count; i++)
      if (info[i].usable && type_rank(info[i].type) < 9 &&
          (pick < 0 || type_rank(info[i].type) < type_rank(info[pick].type)))
        pick = (int)i;
    if (pick < 0) {
      int cpu = -1;
      for (uint32_t i = 0; i < count && cpu < 0; i++)
        if (!strcmp(info[i].type, "cpu")) cpu = (int)i;
      instance_close(&in);
      if (cpu >= 0)
        return pa_error(PASADA_ERR_UNSUPPORTED, "--device vulkan: no GPU on this machine (vulkan:%d, %s, runs on the "
                        "CPU and is used only when named: --device vulkan:%d)", cpu, info[cpu].name, cpu);
      return pa_error(PASADA_ERR_UNSUPPORTED, "--device vulkan: no usable Vulkan GPU on this machine (pasada devices)");
    }
  }
  pa_vk_dev *d = pa_calloc(1, sizeof *d);
  if (!d) {
    instance_close(&in);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  pthread_mutex_init(&d->lock, NULL);
  d->lib = in.lib, d->gipa = in.gipa, d->inst = in.inst, d->f = in.f;
  d->phys = pd[pick];
  d->info = info[pick];

  /* a queue family with compute */
  uint32_t nq = 0;
  d->f.vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &nq, NULL);
  VkQueueFamilyProperties qf[32];
  if (nq > 32) nq = 32;
  d->f.vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &nq, qf);
  d->queue_family = UINT32_MAX;
  for (uint32_t i = 0; i < nq && d->queue_family == UINT32_MAX; i++)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) d->queue_family = i;
  if (d->queue_family == UINT32_MAX) {
    pa_vk_close(d);
    return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan device %s has no compute queue", info[pick].name);
  }
  VkPhysicalDeviceProperties props;
  d->f.vkGetPhysicalDeviceProperties(d->phys, &props);
  d->timestamp_ns = qf[d->queue_family].timestampValidBits ? props.limits.timestampPeriod : 0.0f;

  const float prio = 1.0f;
  const VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                       .queueFamilyIndex = d->queue_family, .queueCount = 1,
                                       .pQueuePriorities = &prio};
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                          .bufferDeviceAddress = VK_TRUE, .storageBuffer8BitAccess = VK_TRUE,
                                          .shaderInt8 = d->info.int8, .shaderFloat16 = d->info.fp16};
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                          .pNext = &f12, .storageBuffer16BitAccess = VK_TRUE};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
  f2.features.shaderInt64 = VK_TRUE;
  f2.features.shaderInt16 = VK_TRUE;
  const VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f2,
                                  .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
  VkResult r = d->f.vkCreateDevice(d->phys, &dci, NULL, &d->dev);
  if (r != VK_SUCCESS) {
    d->dev = NULL;
    pa_vk_close(d);
    return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan device %s: vkCreateDevice failed (%d)", info[pick].name, (int)r);
  }
  PFN_vkGetDeviceProcAddr gdpa = d->f.vkGetDeviceProcAddr;
#define PA_VK_LOAD(fn)                                 \
  d->f.fn = (PFN_##fn)gdpa(d->dev, #fn);              \
  if (!d->f.fn) d->f.fn = (PFN_##fn)d->gipa(d->inst, #fn);
  PA_VK_DEVICE_FNS(PA_VK_LOAD)
#undef PA_VK_LOAD
#define PA_VK_CHECK(fn) if (!d->f.fn) { pa_vk_close(d); return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: the driver lacks " #fn); }
  PA_VK_DEVICE_FNS(PA_VK_CHECK)
#undef PA_VK_CHECK
  d->f.vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);

  VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 pr2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
  d->f.vkGetPhysicalDeviceProperties2(d->phys, &pr2);
  d->max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : (1ull << 30);
  VkPhysicalDeviceMemoryProperties mp;
  d->f.vkGetPhysicalDeviceMemoryProperties(d->phys, &mp);
  const uint32_t HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  d->mem_device = find_memory(&mp, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  d->mem_host = find_memory(&mp, HV | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
  if (d->mem_host == UINT32_MAX) d->mem_host = find_memory(&mp, HV, 0);
  if (d->mem_device == UINT32_MAX) d->mem_device = d->mem_host;
  if (d->mem_device == UINT32_MAX || d->mem_host == UINT32_MAX) {
    pa_vk_close(d);
    return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan device %s: no host-visible memory", info[pick].name);
  }
  d->device_mappable = (mp.memoryTypes[d->mem_device].propertyFlags & HV) == HV;

  const VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = PA_VK_PUSH};
  const VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                          .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
  const VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                       .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                       .queueFamilyIndex = d->queue_family};
  if (d->f.vkCreatePipelineLayout(d->dev, &lci, NULL, &d->layout) != VK_SUCCESS ||
      d->f.vkCreateCommandPool(d->dev, &pci, NULL, &d->upload_pool) != VK_SUCCESS) {
    pa_vk_close(d);
    return pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan device %s: no pipeline layout or command pool", info[pick].name);
  }
  pa_log(2, "vulkan: device %d, %s (%s, %s)", pick, d->info.name, d->info.type, d->info.api);
  *out = d;
  return PASADA_OK;
}

/* ---- memory ---- */

int pa_vk_buf_create(pa_vk_dev *d, uint64_t size, bool host, pa_vk_buf *out) {
  memset(out, 0, sizeof *out);
  if (size == 0) size = 256;
  if (size > d->max_alloc)
    return pa_error(PASADA_ERR_NOMEM, "Vulkan device %s: a buffer of %.1f MiB is more than one allocation may hold "
                    "(%.1f MiB)", d->info.name, size / 1048576.0, d->max_alloc / 1048576.0);
  const VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
               VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  if (d->f.vkCreateBuffer(d->dev, &bci, NULL, &out->buf) != VK_SUCCESS)
    return pa_error(PASADA_ERR_NOMEM, "Vulkan device %s: cannot make a buffer of %.1f MiB", d->info.name,
                    size / 1048576.0);
  VkMemoryRequirements req;
  d->f.vkGetBufferMemoryRequirements(d->dev, out->buf, &req);
  const uint32_t type = host ? d->mem_host : d->mem_device;
  const VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                        .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
  const VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fi,
                                   .allocationSize = req.size, .memoryTypeIndex = type};
  if (!(req.memoryTypeBits & (1u << type)) || d->f.vkAllocateMemory(d->dev, &ai, NULL, &out->mem) != VK_SUCCESS) {
    d->f.vkDestroyBuffer(d->dev, out->buf, NULL);
    memset(out, 0, sizeof *out);
    return pa_error(PASADA_ERR_NOMEM, "Vulkan device %s: out of %s memory for %.1f MiB", d->info.name,
                    host ? "host-visible" : "device", size / 1048576.0);
  }
  d->f.vkBindBufferMemory(d->dev, out->buf, out->mem, 0);
  const VkBufferDeviceAddressInfo bai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = out->buf};
  out->addr = d->f.vkGetBufferDeviceAddress(d->dev, &bai);
  out->size = size;
  if (host || d->device_mappable) {
    if (d->f.vkMapMemory(d->dev, out->mem, 0, VK_WHOLE_SIZE, 0, &out->map) != VK_SUCCESS) {
      pa_vk_buf_free(d, out);
      return pa_error(PASADA_ERR_NOMEM, "Vulkan device %s: cannot map %.1f MiB", d->info.name, size / 1048576.0);
    }
  }
  return PASADA_OK;
}

void pa_vk_buf_free(pa_vk_dev *d, pa_vk_buf *b) {
  if (!b->buf) return;
  if (b->map) d->f.vkUnmapMemory(d->dev, b->mem);
  d->f.vkDestroyBuffer(d->dev, b->buf, NULL);
  d->f.vkFreeMemory(d->dev, b->mem, NULL);
  memset(b, 0, sizeof *b);
}

int pa_vk_write(pa_vk_dev *d, pa_vk_buf *dst, uint64_t offset, const void *src, uint64_t n) {
  if (dst->map) {
    memcpy((uint8_t *)dst->map + offset, src, n);
    return PASADA_OK;
  }
  const uint64_t chunk = n < (64ull << 20) ? n : (64ull << 20);
  pa_vk_buf st;
  int rc = pa_vk_buf_create(d, chunk, true, &st);
  if (rc) return rc;
  VkCommandBuffer cb;
  VkFence fence;
  const VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = d->upload_pool,
                                           .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
  const VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  pthread_mutex_lock(&d->lock);
  d->f.vkAllocateCommandBuffers(d->dev, &cai, &cb);
  d->f.vkCreateFence(d->dev, &fci, NULL, &fence);
  for (uint64_t done = 0; done < n && !rc; done += chunk) {
    const uint64_t m = n - done < chunk ? n - done : chunk;
    memcpy(st.map, (const uint8_t *)src + done, m);
    const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                         .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    d->f.vkBeginCommandBuffer(cb, &bi);
    const VkBufferCopy cp = {.srcOffset = 0, .dstOffset = offset + done, .size = m};
    d->f.vkCmdCopyBuffer(cb, st.buf, dst->buf, 1, &cp);
    d->f.vkEndCommandBuffer(cb);
    const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    if (d->f.vkQueueSubmit(d->queue, 1, &si, fence) != VK_SUCCESS ||
        d->f.vkWaitForFences(d->dev, 1, &fence, VK_TRUE, UINT64_MAX) != VK_SUCCESS)
      rc = pa_error(PASADA_ERR_IO, "Vulkan device %s: uploading the weights failed (device lost?)", d->info.name);
    d->f.vkResetFences(d->dev, 1, &fence);
    d->f.vkResetCommandBuffer(cb, 0);
  }
  d->f.vkDestroyFence(d->dev, fence, NULL);
  d->f.vkFreeCommandBuffers(d->dev, d->upload_pool, 1, &cb);
  pthread_mutex_unlock(&d->lock);
  pa_vk_buf_free(d, &st);
  return rc;
}

/* ---- pipelines ---- */

VkPipeline pa_vk_pipeline(pa_vk_dev *d, const char *name) {
  pthread_mutex_lock(&d->lock);
  for (int i = 0; i < d->n_pipes; i++)
    if (!strcmp(d->pipes[i].name, name)) {
      VkPipeline p = d->pipes[i].pipe;
      pthread_mutex_unlock(&d->lock);
      return p;
    }
  const pa_vk_spirv *s = NULL;
  for (int i = 0; i < pa_vk_n_shaders && !s; i++)
    if (!strcmp(pa_vk_shaders[i].name, name)) s = &pa_vk_shaders[i];
  VkPipeline pipe = VK_NULL_HANDLE;
  if (!s || d->n_pipes == PA_VK_MAX_PIPES) {
    pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan: no shader '%s' in this build", name);
  } else {
    VkShaderModule mod;
    const VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = s->bytes,
                                          .pCode = s->code};
    if (d->f.vkCreateShaderModule(d->dev, &mci, NULL, &mod) != VK_SUCCESS) {
      pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan device %s refused shader '%s'", d->info.name, name);
    } else {
      const VkComputePipelineCreateInfo cci = {
          .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
          .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                    .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mod, .pName = "main"},
          .layout = d->layout};
      if (d->f.vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &cci, NULL, &pipe) != VK_SUCCESS) {
        pipe = VK_NULL_HANDLE;
        pa_error(PASADA_ERR_UNSUPPORTED, "Vulkan device %s cannot make pipeline '%s'", d->info.name, name);
      } else {
        snprintf(d->pipes[d->n_pipes].name, sizeof d->pipes[0].name, "%s", name);
        d->pipes[d->n_pipes++].pipe = pipe;
      }
      d->f.vkDestroyShaderModule(d->dev, mod, NULL);
    }
  }
  pthread_mutex_unlock(&d->lock);
  return pipe;
}
