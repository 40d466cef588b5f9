/* cmd_devices.c: `pasada devices`: the compute devices --device can name,
 * the CPU first, then each Vulkan device with what its shaders can do, and
 * which one `--device vulkan` picks; as a table or one JSON object. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/base.h"
#include "cli.h"

static const char DEVICES_HELP[] =
    "usage: pasada devices [--json]\n"
    "\n"
    "Lists the compute devices that --device names. First the CPU: its model, the\n"
    "threads it offers, the best instruction set pasada uses on it and the kernel\n"
    "table that runs. Then each Vulkan device, in the Vulkan loader's order, as\n"
    "vulkan:N: its name, type (discrete, integrated, virtual, cpu or other), the\n"
    "Vulkan version it implements, its device-local memory, its subgroup size, and\n"
    "whether its shaders have 16-bit float and 8-bit integer arithmetic and\n"
    "cooperative matrices (VK_KHR_cooperative_matrix). A device without what\n"
    "pasada's shaders need says what it lacks (not usable: ...).\n"
    "\n"
    "The last line names the device `--device vulkan` runs on: the first usable\n"
    "discrete GPU, else integrated, else virtual. A CPU implementation of Vulkan\n"
    "(Mesa's lavapipe, named llvmpipe) is used only when named: --device vulkan:N.\n"
    "When this build has no Vulkan, or the Vulkan loader is missing, a line says\n"
    "so instead of the Vulkan devices (the CPU is still a device: exit status 0).\n"
    "\n"
    "options:\n"
    "  --json       one JSON object on stdout instead of the table\n"
    "  -h, --help   show this help\n"
    "\n"
    "exit status: 0 success, 1 runtime error, 2 usage error\n";

enum { OPT_DEVICES_JSON = 2600 };

/* What the CPU line shows. */
typedef struct {
  char name[128]; /* the processor's model name, or "CPU" */
  long threads;   /* online logical processors */
  const char *isa, *kernels;
} cpu_line;

/* The "model name" of /proc/cpuinfo into buf; false when there is none. */
static bool cpu_model_name(char *buf, size_t n) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[512];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    const char *v = strchr(line, ':');
    if (!v) continue;
    v += 1 + strspn(v + 1, " \t");
    size_t len = strcspn(v, "\r\n");
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
    if (len == 0) continue;
    snprintf(buf, n, "%.*s", (int)len, v);
    found = true;
  }
  fclose(f);
  return found;
}

static void describe_cpu(cpu_line *c) {
  if (!cpu_model_name(c->name, sizeof c->name)) snprintf(c->name, sizeof c->name, "CPU");
  c->threads = sysconf(_SC_NPROCESSORS_ONLN);
  c->isa = pa_cpu_describe();
  c->kernels = pa_kernels_best()->name;
}

/* The Vulkan devices (malloc'd into *out, *n of them), or the reason there
 * are none to list in *err (then *out is NULL). Returns CLI_OK, or the exit
 * status after printing when out of memory. */
static int list_vulkan(pa_device_info **out, int *n, char *err, size_t err_n) {
  *out = NULL;
  *n = 0;
  err[0] = 0;
  pa_device_info first[16];
  int count = 0;
  if (pa_vulkan_devices(first, 16, &count) != PASADA_OK) {
    snprintf(err, err_n, "%s", pasada_last_error());
    return CLI_OK;
  }
  if (count <= 0) return CLI_OK;
  pa_device_info *all = malloc((size_t)count * sizeof *all);
  if (!all) return cli_fail("out of memory for %d Vulkan devices", count);
  if (count <= 16) {
    memcpy(all, first, (size_t)count * sizeof *all);
  } else {
    int again = 0;
    if (pa_vulkan_devices(all, count, &again) != PASADA_OK) {
      snprintf(err, err_n, "%s", pasada_last_error());
      free(all);
      return CLI_OK;
    }
    if (again < count) count = again;
  }
  *out = all;
  *n = count;
  return CLI_OK;
}

/* The device `--device vulkan` picks: the first usable one whose type is
 * discrete, then integrated, then virtual; -1 when there is none (a "cpu"
 * or "other" device is never picked by default). */
static int default_gpu(const pa_device_info *d, int n) {
  static const char *const order[] = {"discrete", "integrated", "virtual"};
  for (size_t t = 0; t < sizeof order / sizeof order[0]; t++)
    for (int i = 0; i < n; i++)
      if (d[i].usable && !strcmp(d[i].type, order[t])) return i;
  return -1;
}

static double gib(uint64_t bytes) {
  return (double)bytes / (double)(1ull << 30);
}
static const char *yes_no(bool b) {
  return b ? "yes" : "no";
}

/* Prints s without its trailing spaces, then a newline. */
static void put_line(const char *s) {
  size_t n = strlen(s);
  while (n > 0 && s[n - 1] == ' ') n--;
  printf("%.*s\n", (int)n, s);
}

static void print_table(const cpu_line *c, const pa_device_info *d, int n, int pick,
                        const char *err) {
  char line[1024];
  /* column widths: the widest value of each */
  int w_dev = 9, w_name = 0, w_type = 0, w_api = 0, w_mem = 0;
  for (int i = 0; i < n; i++) {
    int len = snprintf(NULL, 0, "vulkan:%d", d[i].index);
    if (len > w_dev) w_dev = len;
    if ((len = (int)strlen(d[i].name)) > w_name) w_name = len;
    if ((len = (int)strlen(d[i].type)) > w_type) w_type = len;
    if ((len = (int)strlen(d[i].api)) > w_api) w_api = len;
    if ((len = snprintf(NULL, 0, "%.1f", gib(d[i].memory))) > w_mem) w_mem = len;
  }
  snprintf(line, sizeof line, "%-*s %s, %ld threads  %s  kernels %s", w_dev, "cpu", c->name,
           c->threads, c->isa, c->kernels);
  put_line(line);
  if (err[0]) {
    snprintf(line, sizeof line, "%-*s %s", w_dev, "vulkan", err);
    put_line(line);
    return;
  }
  if (n == 0) {
    snprintf(line, sizeof line, "%-*s no devices", w_dev, "vulkan");
    put_line(line);
  }
  for (int i = 0; i < n; i++) {
    char dev[24];
    snprintf(dev, sizeof dev, "vulkan:%d", d[i].index);
    int k = snprintf(line, sizeof line,
                     "%-*s %-*s  %-*s  Vulkan %-*s  %*.1f GiB  subgroup %-3u  fp16 %-3s  int8 %-3s "
                     " coopmat %-3s",
                     w_dev, dev, w_name, d[i].name, w_type, d[i].type, w_api, d[i].api, w_mem,
                     gib(d[i].memory), (unsigned)d[i].subgroup, yes_no(d[i].fp16),
                     yes_no(d[i].int8), yes_no(d[i].coopmat));
    if (k > 0 && (size_t)k < sizeof line && !d[i].usable)
      k += snprintf(line + k, sizeof line - (size_t)k, "  (not usable: %s)",
                    d[i].missing[0] ? d[i].missing : "?");
    if (k > 0 && (size_t)k < sizeof line && i == pick)
      snprintf(line + k, sizeof line - (size_t)k, "  (--device vulkan)");
    put_line(line);
  }
  if (pick >= 0)
    printf("--device vulkan: vulkan:%d (%s)\n", d[pick].index, d[pick].name);
  else
    printf("--device vulkan: no GPU (a CPU Vulkan device is used only when named: vulkan:N)\n");
}

/* The same as one JSON object; NULL when out of memory. */
static char *to_json(const cpu_line *c, const pa_device_info *d, int n, int pick, const char *err) {
  cJSON *root = cJSON_CreateObject();
  cJSON *cpu = cJSON_AddObjectToObject(root, "cpu");
  cJSON_AddStringToObject(cpu, "device", "cpu");
  cJSON_AddStringToObject(cpu, "name", c->name);
  cJSON_AddNumberToObject(cpu, "threads", (double)c->threads);
  cJSON_AddStringToObject(cpu, "isa", c->isa);
  cJSON_AddStringToObject(cpu, "kernels", c->kernels);
  cJSON *vk = cJSON_AddObjectToObject(root, "vulkan");
  cJSON_AddBoolToObject(vk, "built", pa_vulkan_built());
  if (err[0])
    cJSON_AddStringToObject(vk, "error", err);
  else
    cJSON_AddNullToObject(vk, "error");
  cJSON *list = cJSON_AddArrayToObject(vk, "devices");
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    char dev[24];
    snprintf(dev, sizeof dev, "vulkan:%d", d[i].index);
    cJSON_AddStringToObject(o, "device", dev);
    cJSON_AddNumberToObject(o, "index", d[i].index);
    cJSON_AddStringToObject(o, "name", d[i].name);
    cJSON_AddStringToObject(o, "type", d[i].type);
    cJSON_AddStringToObject(o, "api", d[i].api);
    cJSON_AddNumberToObject(o, "memory", (double)d[i].memory);
    cJSON_AddNumberToObject(o, "subgroup", d[i].subgroup);
    cJSON_AddBoolToObject(o, "fp16", d[i].fp16);
    cJSON_AddBoolToObject(o, "int8", d[i].int8);
    cJSON_AddBoolToObject(o, "coopmat", d[i].coopmat);
    cJSON_AddBoolToObject(o, "usable", d[i].usable);
    if (d[i].usable)
      cJSON_AddNullToObject(o, "missing");
    else
      cJSON_AddStringToObject(o, "missing", d[i].missing);
    cJSON_AddItemToArray(list, o);
  }
  if (pick >= 0) {
    char dev[24];
    snprintf(dev, sizeof dev, "vulkan:%d", d[pick].index);
    cJSON_AddStringToObject(vk, "default", dev);
  } else {
    cJSON_AddNullToObject(vk, "default");
  }
  char *s = cJSON_Print(root); /* NULL when any allocation above failed */
  cJSON_Delete(root);
  return s;
}

int cmd_devices(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, 0, OPT_DEVICES_JSON}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *cmd = "devices";
  bool json = false;
  opterr = 0;
  optind = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        fputs(DEVICES_HELP, stdout);
        return CLI_OK;
      case OPT_DEVICES_JSON:
        json = true;
        break;
      default:
        return cli_getopt_error(cmd, c, argv);
    }
  }
  if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);

  cpu_line cpu;
  describe_cpu(&cpu);
  pa_device_info *devs = NULL;
  int n = 0;
  char err[512];
  int rc = list_vulkan(&devs, &n, err, sizeof err);
  if (rc) return rc;
  const int pick = default_gpu(devs, n);
  if (json) {
    char *s = to_json(&cpu, devs, n, pick, err);
    if (s) {
      puts(s);
      cJSON_free(s);
    } else {
      rc = cli_fail("out of memory writing the JSON list");
    }
  } else {
    print_table(&cpu, devs, n, pick, err);
  }
  free(devs);
  if (rc == CLI_OK && fflush(stdout) != 0) rc = cli_fail("writing to stdout failed");
  return rc;
}
