/* cmd_serve.c: `pasada serve`: argument parsing, start-up (HTTP first, so
 * /health can say "loading"; then the model, the context and the
 * scheduler) and the orderly shutdown on SIGINT / SIGTERM. */
#include "cli/cmd_serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "cli/cli.h"
#include "format/hf.h"
#include "server/chat.h"
#include "server/http.h"
#include "server/kv_events.h"
#include "server/request.h"
#include "runtime/speculative.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: pasada serve -m MODEL [options]\n"
          "  -m, --model PATH        GGUF model or Hugging Face folder to serve\n"
          "  --host HOST             address to listen on (default 127.0.0.1)\n"
          "  --port N                port (default 8080; 0 picks a free one)\n"
          "  --parallel N            sequences decoded together (default 4)\n"
          "  --ctx N                 positions per sequence (default 4096; 0: the model's)\n"
          "  --threads N             compute threads (default: all cores)\n"
          "  --device DEV            run on cpu (the default), vulkan (the first GPU) or\n"
          "                          vulkan:N (device N of `pasada devices`)\n"
          "  --gpu-layers N          with a GPU --device: run the first N layers there,\n"
          "                          the rest on the CPU (default: all layers on the GPU)\n"
          "  --prefill-chunk N       most prompt tokens per step (default 256)\n"
          "  --kv-block-size N       positions per KV block, a multiple of 16 (default 16)\n"
          "  --kv-blocks N           KV blocks in the pool (default: parallel full sequences)\n"
          "  --kv-memory MIB         size the KV pool by memory instead\n"
          "  --quantize T            a Hugging Face folder (-m DIR): quantize its matrices to\n"
          "                          T at load (Q8_0, Q4_K, Q6_K, ...; default: as stored)\n"
          "  --kv-type T             the KV cache's values: f16 (default: half the memory and\n"
          "                          the bytes attention reads), f32, or q8 (8-bit, a scale\n"
          "                          per position and head: about half of f16)\n"
          "  --max-queue N           requests waiting for room before 429 (default 64)\n"
          "  --max-body BYTES        request body limit before 413 (default 4194304)\n"
          "  --max-connections N     open connections (default 256)\n"
          "  --api-key KEY           require 'Authorization: Bearer KEY' or 'x-api-key: KEY'\n"
          "                          (or $PASADA_API_KEY)\n"
          "  --cors-origin ORIGIN    let browser pages of ORIGIN call the API (repeatable or a\n"
          "                          comma list; '*': any origin); default: no CORS headers\n"
          "  --responses-store N     Responses API responses kept for previous_response_id\n"
          "                          (default 256, least recently used evicted; 0: none)\n"
          "  --alias NAME            the model name /v1/models lists (default: the file's)\n"
          "  --chat-template-file F  render chats with the Jinja template in file F\n"
          "                          (default: the model's tokenizer.chat_template)\n"
          "  --chat-template NAME    a built-in template instead: chatml, gemma or llama3\n"
          "  --shutdown-grace S      on SIGTERM, let running requests go on S seconds (default 0)\n"
          "  --lookup                speculative decoding by prompt lookup for requests that\n"
          "                          do not choose (\"speculative\": {\"mode\": ...})\n"
          "  --draft FILE            a draft model of the same vocabulary: requests may ask\n"
          "                          for \"mode\": \"draft\", and it is their default\n"
          "  --mtp                   the model's multi-token-prediction layer (Qwen3.5\n"
          "                          checkpoints ship one): requests may ask for \"mode\":\n"
          "                          \"mtp\", and it is their default unless --draft\n"
          "  --draft-max N           tokens drafted per step, 1 to 32 (default 8 for lookup,\n"
          "                          4 for a draft model, 3 for mtp)\n"
          "  --spec-max-seqs N       draft only while at most N sequences run (default 1:\n"
          "                          larger batches are compute-bound and drafts cost more)\n"
          "  --drain-delay S         on SIGTERM, answer GET /ready with 503 at once but keep\n"
          "                          taking requests S seconds more, so routers stop sending\n"
          "                          before the socket closes (default 0)\n"
          "  --kv-events ENDPOINT    publish the prefix cache's block events as vLLM does\n"
          "                          (ZeroMQ PUB, msgpack batches): tcp://*:5557 binds,\n"
          "                          tcp://HOST:PORT connects to a subscriber that binds\n"
          "  --kv-events-topic T     the events' topic (default kv@HOSTNAME@MODEL)\n"
          "  --kv-events-replay ENDPOINT  keep the latest 10000 event batches and send them\n"
          "                          again to a subscriber that asks from a sequence number\n"
          "                          (vLLM's replay: a ZeroMQ ROUTER bound there)\n"
          "  --embeddings            serve the model's embeddings at /v1/embeddings (its final\n"
          "                          hidden states pooled and L2-normalised); the generating\n"
          "                          endpoints then answer 400\n"
          "  --pooling P             with --embeddings: last, mean or cls (default: the\n"
          "                          model's pooling_type, else last)\n"
          "  --matryoshka            with --embeddings: the model was trained for truncated\n"
          "                          embeddings, so `dimensions` below its width truncates\n"
          "                          and renormalises (otherwise such a request is a 400)\n"
          "  -v, --verbose           log HTTP library messages\n");
}

static bool parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    fprintf(stderr, "pasada serve: %s expects an integer in [%lld, %lld], got '%s'\n", opt, lo, hi,
            s);
    return false;
  }
  *out = v;
  return true;
}

/* The options into *c, --device's value into *device and --gpu-layers' into
 * *gpu_layers. */
static bool parse_args(int argc, char **argv, srv_config *c, const char **device, int32_t *gpu_layers) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      c->verbose = true;
      continue;
    }
    if (!strcmp(a, "--lookup") || !strcmp(a, "--mtp")) {
      *(a[2] == 'l' ? &c->spec_lookup : &c->spec_mtp) = true;
      continue;
    }
    if (!strcmp(a, "--embeddings") || !strcmp(a, "--matryoshka")) {
      if (a[2] == 'e') c->embeddings = true;
      else c->matryoshka = true;
      continue;
    }
    if (!strcmp(a, "--pooling") && i + 1 < argc) {
      pasada_pooling p;
      if (pasada_pooling_from_name(argv[++i], &p) != PASADA_OK || p == PASADA_POOLING_NONE) {
        fprintf(stderr, "pasada serve: --pooling wants last, mean or cls, not '%s'\n", argv[i]);
        return false;
      }
      c->pooling = (int)p;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "pasada serve: unknown option or missing value: %s\n", a);
      return false;
    }
    const char *v = argv[++i];
    long long n = 0;
    if (!strcmp(a, "-m") || !strcmp(a, "--model"))
      c->model_path = v;
    else if (!strcmp(a, "--host"))
      c->host = v;
    else if (!strcmp(a, "--api-key"))
      c->api_key = v;
    else if (!strcmp(a, "--cors-origin")) {
      if (c->n_cors == SRV_MAX_CORS || !*v) {
        fprintf(stderr, "pasada serve: --cors-origin: at most %d, none empty\n", SRV_MAX_CORS);
        return false;
      }
      c->cors[c->n_cors++] = v;
    } else if (!strcmp(a, "--alias"))
      c->model_alias = v;
    else if (!strcmp(a, "--kv-events"))
      c->kv_events = v;
    else if (!strcmp(a, "--kv-events-topic"))
      c->kv_events_topic = v;
    else if (!strcmp(a, "--kv-events-replay"))
      c->kv_events_replay = v;
    else if (!strcmp(a, "--draft"))
      c->draft_path = v;
    else if (!strcmp(a, "--quantize")) {
      if (hf_set_load_type(v) != PASADA_OK) {
        fprintf(stderr, "pasada serve: --quantize: %s\n", pa_last_error());
        return false;
      }
    }
    else if (!strcmp(a, "--chat-template"))
      c->chat_template = v;
    else if (!strcmp(a, "--chat-template-file"))
      c->chat_template_file = v;
    else if (!strcmp(a, "--device")) {
      if (!cli_parse_device(v)) {
        fprintf(stderr, "pasada serve: " CLI_DEVICE_ERROR "\n", v);
        return false;
      }
      *device = v;
    } else if (!strcmp(a, "--gpu-layers")) {
      if (!cli_parse_gpu_layers(v, gpu_layers)) {
        fprintf(stderr, "pasada serve: " CLI_GPU_LAYERS_ERROR "\n", v);
        return false;
      }
    } else if (!strcmp(a, "--port")) {
      if (!parse_int(a, v, 0, 65535, &n)) return false;
      c->port = (int)n;
    } else if (!strcmp(a, "--spec-max-seqs")) {
      if (!parse_int(a, v, 1, 1024, &n)) return false;
      c->spec_max_seqs = (int32_t)n;
    } else if (!strcmp(a, "--draft-max")) {
      if (!parse_int(a, v, 1, PA_SPEC_DRAFT_MAX, &n)) return false;
      c->draft_max = (int32_t)n;
    } else if (!strcmp(a, "--parallel")) {
      if (!parse_int(a, v, 1, 1024, &n)) return false;
      c->parallel = (int)n;
    } else if (!strcmp(a, "--ctx")) {
      if (!parse_int(a, v, 0, 1 << 22, &n)) return false;
      c->n_ctx = (int)n;
    } else if (!strcmp(a, "--threads")) {
      if (!parse_int(a, v, 0, 1024, &n)) return false;
      c->n_threads = (int)n;
    } else if (!strcmp(a, "--prefill-chunk")) {
      if (!parse_int(a, v, 1, 65536, &n)) return false;
      c->prefill_chunk = (int)n;
    } else if (!strcmp(a, "--kv-block-size")) {
      if (!parse_int(a, v, 16, 4096, &n)) return false;
      if (n % 16) {
        fprintf(stderr, "pasada serve: --kv-block-size %lld is not a multiple of 16\n", n);
        return false;
      }
      c->kv_block_size = (int)n;
    } else if (!strcmp(a, "--kv-type")) {
      if (!cli_parse_kv_type(v, &c->kv_type)) {
        fprintf(stderr, "pasada serve: --kv-type wants f16, f32 or q8, not '%s'\n", v);
        return false;
      }
    } else if (!strcmp(a, "--kv-blocks")) {
      if (!parse_int(a, v, 1, 1LL << 40, &n)) return false;
      c->kv_blocks = n;
    } else if (!strcmp(a, "--kv-memory")) {
      if (!parse_int(a, v, 1, 1LL << 30, &n)) return false;
      c->kv_memory_mib = n;
    } else if (!strcmp(a, "--max-queue")) {
      if (!parse_int(a, v, 0, 1 << 20, &n)) return false;
      c->max_queue = (int)n;
    } else if (!strcmp(a, "--max-body")) {
      if (!parse_int(a, v, 1024, 1LL << 32, &n)) return false;
      c->max_body = (size_t)n;
    } else if (!strcmp(a, "--max-connections")) {
      if (!parse_int(a, v, 1, 65536, &n)) return false;
      c->max_connections = (int)n;
    } else if (!strcmp(a, "--responses-store")) {
      if (!parse_int(a, v, 0, 1 << 20, &n)) return false;
      c->responses_store = (int)n;
    } else if (!strcmp(a, "--shutdown-grace")) {
      if (!parse_int(a, v, 0, 86400, &n)) return false;
      c->shutdown_grace = (double)n;
    } else if (!strcmp(a, "--drain-delay")) {
      if (!parse_int(a, v, 0, 3600, &n)) return false;
      c->drain_delay = (double)n;
    } else {
      fprintf(stderr, "pasada serve: unknown option %s (see pasada serve --help)\n", a);
      return false;
    }
  }
  if (!c->model_path) {
    fprintf(stderr, "pasada serve: a model is required (-m MODEL)\n");
    return false;
  }
  if (c->kv_events && !srv_kv_events_available()) {
    fprintf(stderr,
            "pasada serve: --kv-events: this build has no KV-event publisher (configure it with "
            "libzmq and msgpack-c: Debian libzmq3-dev, libmsgpack-dev)\n");
    return false;
  }
  if ((c->kv_events_topic || c->kv_events_replay) && !c->kv_events) {
    fprintf(stderr, "pasada serve: %s needs --kv-events\n",
            c->kv_events_topic ? "--kv-events-topic" : "--kv-events-replay");
    return false;
  }
  return true;
}

/* The model's name as /v1/models lists it: the file name without .gguf. */
static char *model_name(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
  char *s = malloc(n + 1);
  if (s) {
    memcpy(s, base, n);
    s[n] = 0;
  }
  return s;
}

/* The rollback states a model with recurrent layers needs for the
 * speculation cfg enables (pa_spec_rollback_states of --draft-max); 0 for
 * other models or without --lookup / --draft / --mtp. */
static int32_t spec_rollback(const pasada_model *model, const srv_config *cfg) {
  if (!pasada_model_is_recurrent(model) || cfg->embeddings ||
      (!cfg->spec_lookup && !cfg->draft_path && !cfg->spec_mtp))
    return 0;
  /* any mode a request may ask for: up to the largest default length */
  return pa_spec_rollback_states(cfg->draft_max > 0 ? cfg->draft_max
                                                    : pa_spec_default_draft_max(PA_SPEC_LOOKUP));
}

/* The server's context; with --embeddings it first raises cfg's prefill
 * chunk to hold a whole input. */
static int create_context(pasada_model *model, srv_config *cfg, pasada_context **ctx) {
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = cfg->n_ctx;
  cp.n_seq_max = cfg->parallel;
  if (cfg->embeddings) {
    /* every input to embed goes in one step, whole: a chunk holds the
     * longest (bert's context is its 512 learned positions) */
    int32_t n = cfg->n_ctx > 0 ? cfg->n_ctx : pasada_model_n_ctx_train(model);
    if (pasada_model_n_ctx_train(model) < n && !strcmp(pasada_model_arch(model), "bert"))
      n = pasada_model_n_ctx_train(model);
    if (cfg->prefill_chunk < n) cfg->prefill_chunk = n;
  }
  cp.n_batch = cfg->parallel + cfg->prefill_chunk;
  cp.n_threads = cfg->n_threads;
  cp.kv_block_size = cfg->kv_block_size;
  cp.kv_blocks = cfg->kv_blocks;
  cp.kv_type = cfg->kv_type;
  cp.n_rollback = spec_rollback(model, cfg);
  if (cfg->embeddings) {
    cp.pooling = cfg->pooling ? (pasada_pooling)cfg->pooling : pasada_model_pooling(model);
    if (cp.pooling == PASADA_POOLING_NONE) cp.pooling = PASADA_POOLING_LAST;
  }
  int rc = pasada_context_create(model, &cp, ctx);
  if (rc != PASADA_OK || cfg->kv_blocks > 0 || cfg->kv_memory_mib <= 0) return rc;
  /* Size the pool by memory: learn a block's size, then create it again. */
  pasada_kv_stats kv;
  pasada_kv_get_stats(*ctx, &kv);
  pasada_context_free(*ctx);
  *ctx = NULL;
  int64_t per_block = kv.n_blocks > 0 ? kv.bytes / kv.n_blocks : 0;
  if (per_block <= 0) {
    fprintf(stderr, "pasada serve: cannot size the KV pool by memory\n");
    return PASADA_ERR_ARG;
  }
  cp.kv_blocks = cfg->kv_memory_mib * 1024 * 1024 / per_block;
  if (cp.kv_blocks < 1) cp.kv_blocks = 1;
  return pasada_context_create(model, &cp, ctx);
}

/* Starts the KV-event publisher of cfg->kv_events (topic: the option's,
 * else kv@HOSTNAME@MODEL, written to topic) and hooks it to the context's
 * prefix cache. */
static bool start_kv_events(const srv_config *cfg, pasada_context *ctx, const char *model,
                            const char *medium, char *topic, size_t n_topic,
                            srv_kv_events **out) {
  if (cfg->kv_events_topic) {
    snprintf(topic, n_topic, "%s", cfg->kv_events_topic);
  } else {
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(topic, n_topic, "kv@%s@%s", host, model);
  }
  pasada_kv_stats kv;
  pasada_kv_get_stats(ctx, &kv);
  char err[512];
  if (srv_kv_events_start(cfg->kv_events, topic, medium, kv.block_size, cfg->kv_events_replay, out,
                          err, sizeof err) != PASADA_OK) {
    fprintf(stderr, "pasada serve: --kv-events: %s\n", err);
    return false;
  }
  pasada_kv_set_event_callback(ctx, srv_kv_events_on_event, *out);
  fprintf(stderr, "pasada serve: publishing KV events on %s (topic '%s')\n", cfg->kv_events, topic);
  return true;
}

int cmd_serve(int argc, char **argv) {
  srv_config cfg = {.host = "127.0.0.1",
                    .port = 8080,
                    .parallel = 4,
                    .n_ctx = 4096,
                    .prefill_chunk = 256,
                    .max_queue = 64,
                    .max_body = 4u << 20,
                    .max_connections = 256,
                    .responses_store = 256};
  cfg.api_key = getenv("PASADA_API_KEY");
  const char *device = NULL, *backend = NULL;
  int32_t gpu_layers = 0;
  char backend_name[CLI_BACKEND_NAME_MAX];
  if (!parse_args(argc, argv, &cfg, &device, &gpu_layers)) return 2;
  if (!cli_backend_name(device, gpu_layers, backend_name, sizeof backend_name, &backend)) {
    fprintf(stderr, "pasada serve: " CLI_GPU_LAYERS_NEEDS_GPU "\n");
    return 2;
  }

  /* Signals go to sigwait below only: every thread started from here on
   * inherits the mask. A vanished client must not kill the process. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);

  srv_state st = {.cfg = &cfg};
  atomic_init(&st.ready, false);
  atomic_init(&st.draining, false);
  atomic_init(&st.shutting_down, false);
  atomic_init(&st.active, 0);
  st.metrics = srv_metrics_create();
  srv_http *http = NULL;
  if (!st.metrics || srv_http_start(&st, &http) != PASADA_OK) return 1;
  /* an IPv6 address in a URL is bracketed */
  bool v6 = strchr(cfg.host, ':') != NULL;
  fprintf(stderr, "pasada serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", cfg.host,
          v6 ? "]" : "", srv_http_port(http));

  int status = 1;
  pasada_model *model = NULL;
  pasada_context *ctx = NULL;
  srv_sched *sched = NULL;
  pa_spec_draft *draft = NULL;
  pa_spec_mtp *mtp = NULL;
  srv_kv_events *events = NULL;
  char topic[320] = "";
  char *name = cfg.model_alias ? strdup(cfg.model_alias) : model_name(cfg.model_path);
  pasada_model_params mp = pasada_model_default_params();
  mp.backend = backend; /* NULL: the default, cpu */
  if (pasada_model_load(cfg.model_path, &mp, &model) != PASADA_OK) {
    fprintf(stderr, "pasada serve: %s\n", pasada_last_error());
    goto out;
  }
  if (create_context(model, &cfg, &ctx) != PASADA_OK) {
    fprintf(stderr, "pasada serve: %s\n", pasada_last_error());
    goto out;
  }
  srv_model_info *mi = &st.mi;
  mi->model = model;
  mi->tok = pasada_model_tokenizer(model);
  mi->name = name ? name : "model";
  mi->created = srv_unix_time();
  mi->n_ctx = pasada_context_n_ctx(ctx);
  mi->n_vocab = pasada_model_n_vocab(model);
  mi->n_embd = pasada_model_n_embd(model);
  const int32_t rollback = spec_rollback(model, &cfg);
  mi->spec_limit = !pasada_model_is_recurrent(model) ? -1 : rollback > 0 ? rollback - 1 : 0;
  mi->embeddings = cfg.embeddings;
  mi->matryoshka = cfg.matryoshka;
  if (!srv_chat_setup(mi, cfg.chat_template, cfg.chat_template_file)) goto out;
  st.medium = strncmp(pasada_context_backend(ctx), "cpu", 3) == 0 ? "CPU" : "GPU";
  if (cfg.kv_events && !start_kv_events(&cfg, ctx, mi->name, st.medium, topic, sizeof topic, &events))
    goto out;
  st.kv_events_topic = events ? topic : NULL;
  /* the drafters' proposals: temperature 1, no truncation (docs/server.md) */
  pasada_sampler_params dsp = pasada_sampler_default_params();
  dsp.temp = 1.0f, dsp.top_k = 0, dsp.top_p = 1.0f, dsp.min_p = 0.0f;
  if (cfg.draft_path) {
    if (pa_spec_draft_open(cfg.draft_path, model, &mp, cfg.parallel, mi->n_ctx, cfg.n_threads, &dsp,
                           &draft) != PASADA_OK) {
      fprintf(stderr, "pasada serve: %s\n", pasada_last_error());
      goto out;
    }
    mi->has_draft = true;
  }
  /* before anything is decoded: the context keeps the hidden states from now on */
  if (cfg.spec_mtp) {
    if (pa_spec_mtp_open(ctx, cfg.parallel, mi->n_ctx, cfg.n_threads, &dsp, &mtp) != PASADA_OK) {
      fprintf(stderr, "pasada serve: --mtp: %s\n", pasada_last_error());
      goto out;
    }
    mi->has_mtp = true;
  }
  srv_sched_params sp = {.prefill_chunk = cfg.prefill_chunk,
                         .max_queue = cfg.max_queue,
                         .spec_mode = draft             ? PA_SPEC_DRAFT
                                      : mtp             ? PA_SPEC_MTP
                                      : cfg.spec_lookup ? PA_SPEC_LOOKUP
                                                        : PA_SPEC_OFF,
                         .draft_max = cfg.draft_max,
                         .spec_max_seqs = cfg.spec_max_seqs,
                         .spec_limit = mi->spec_limit,
                         .draft = draft,
                         .mtp = mtp};
  if (srv_sched_create(model, ctx, cfg.parallel, &sp, st.metrics, &sched) != PASADA_OK ||
      srv_sched_start(sched) != PASADA_OK) {
    fprintf(stderr, "pasada serve: cannot start the scheduler\n");
    goto out;
  }
  st.sched = sched;
  pasada_kv_stats kv;
  pasada_kv_get_stats(ctx, &kv);
  atomic_store(&st.ready, true);
  fprintf(stderr,
          "pasada serve: ready: model %s (%s) on %s, context %d x %d sequences, KV pool %d blocks "
          "of %d (%.1f MiB, %s), chat template %s\n",
          mi->name, pasada_model_arch(model), pasada_context_backend(ctx), mi->n_ctx, cfg.parallel,
          kv.n_blocks, kv.block_size,
          (double)kv.bytes / (1 << 20), pasada_kv_type_name(kv.type), srv_chat_describe(mi));

  int sig = 0;
  sigwait(&sigs, &sig);
  /* Not ready from now on; the requests routers still send meanwhile are
   * served until the delay ends (or a second signal comes). */
  atomic_store(&st.draining, true);
  if (cfg.drain_delay > 0) {
    fprintf(stderr, "pasada serve: %s: draining for %.0f s (GET /ready answers 503)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", cfg.drain_delay);
    /* a second signal ends the delay early */
    for (double end = srv_now() + cfg.drain_delay, left; (left = end - srv_now()) > 0;) {
      struct timespec ts = {.tv_sec = (time_t)left, .tv_nsec = (long)((left - (time_t)left) * 1e9)};
      int got = sigtimedwait(&sigs, NULL, &ts);
      if (got == SIGINT || got == SIGTERM) break;
    }
  }
  fprintf(stderr, "pasada serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  status = 0;

out:
  /* Stop accepting, end the running requests (their streams get a final
   * chunk and [DONE]), let the connections deliver them, then stop. */
  srv_http_quiesce(http, &st);
  if (sched) {
    srv_sched_shutdown(sched, cfg.shutdown_grace);
    srv_sched_join(sched);
  }
  if (!srv_http_wait_idle(&st, 10.0))
    fprintf(stderr, "pasada serve: some clients did not read their responses in time\n");
  srv_http_stop(http);
  srv_sched_free(sched);
  pa_spec_draft_free(draft);
  pa_spec_mtp_free(mtp);
  if (events) {
    pasada_kv_set_event_callback(ctx, NULL, NULL);
    srv_kv_events_stop(events);
  }
  srv_chat_teardown(&st.mi);
  srv_grammar_cache_clear();
  pasada_context_free(ctx);
  pasada_model_free(model);
  srv_metrics_free(st.metrics);
  free(name);
  if (status == 0) fprintf(stderr, "pasada serve: stopped\n");
  return status;
}
