/* pasada.h: the public C API of the pasada inference engine (libpasada).
 *
 * Load a GGUF model, create a context (KV cache + scratch), submit batches of
 * tokens from one or more sequences, read logits, sample, and turn tokens back
 * into text.
 *
 * Errors: every function that can fail returns a pasada_status (PASADA_OK is
 * 0) and gives its results through pointers; the reason is in
 * pasada_last_error(). Functions that return a value directly cannot fail:
 * accessors, and lookups that say "none" in their value (-1, NULL, 0) as
 * documented beside them.
 *
 * Memory: what the library allocates for the caller has its own release
 * function: pasada_model_free, pasada_context_free, pasada_sampler_free,
 * pasada_detok_free; strings and token arrays are released with
 * pasada_text_free. Pointers the library returns as const (the tokenizer,
 * logits, metadata keys, names) belong to the object they come from.
 *
 * Threads: a model is immutable once loaded: it, its tokenizer and its
 * metadata may be shared by any number of threads, and several contexts may
 * be created on one model and used at the same time, each by one thread at a
 * time. A context, a sampler and a streaming detokenizer are used by one
 * thread at a time (calls on one of them from several threads need the
 * caller's lock; pasada_parallel_for runs the caller's function on the
 * context's own threads). The tokenizer functions (const pasada_tokenizer)
 * and the functions without an object (chat rendering, names, defaults) may
 * run concurrently from any threads. pasada_last_error is per thread: it
 * describes the last failure of the calling thread. A model is freed after
 * every context made on it. Models and contexts on different threads share
 * no mutable state: each gives the bits it gives alone
 * (tests/tools/two_models.c, also run under ThreadSanitizer). */
#ifndef PASADA_H
#define PASADA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The version of this header; pasada_version() gives the library's. The
 * build reads them from here (CMakeLists.txt). */
#define PASADA_VERSION_MAJOR 0
#define PASADA_VERSION_MINOR 1
#define PASADA_VERSION_PATCH 0
#define PASADA_VERSION_STRING "0.1.0"

/* Marks the functions the shared library exports (it is built with hidden
 * visibility: nothing else is exported). */
#ifndef PASADA_API
#if defined(__GNUC__) || defined(__clang__)
#define PASADA_API __attribute__((visibility("default")))
#else
#define PASADA_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  PASADA_OK = 0,
  PASADA_ERR_IO = 1,          /* file cannot be opened, read or mapped */
  PASADA_ERR_FORMAT = 2,      /* malformed or truncated file */
  PASADA_ERR_UNSUPPORTED = 3, /* valid but not supported (architecture, type) */
  PASADA_ERR_NOMEM = 4,
  PASADA_ERR_ARG = 5,         /* invalid argument from the caller */
  PASADA_ERR_CONTEXT_FULL = 6 /* the KV cache has no room for the batch */
} pasada_status;

/* The message of the calling thread's last failure (never NULL). */
PASADA_API const char *pasada_last_error(void);
/* The library's version, "MAJOR.MINOR.PATCH". */
PASADA_API const char *pasada_version(void);

typedef struct pa_model pasada_model;
typedef struct pa_context pasada_context;
typedef struct pa_tokenizer pasada_tokenizer;
typedef struct pa_sampler pasada_sampler;

/* ---- models ---- */
typedef struct {
  bool vocab_only;       /* load the tokenizer only (no tensors needed) */
  bool keep_file_layout; /* do not prepare the weights for the backend at load
                            (a model that will not run: `info`); false: prepare */
  /* The backend that runs the model and prepares its weights at load:
   * NULL or "cpu" (the fastest kernels this CPU has), "cpu:TABLE" (one
   * kernel table: scalar, avx2, avx512, avx512_vnni, amx), "ref" (the
   * reference: weights dequantized to F32 as they are read, float
   * activations, double sums, plain C; slow, for verification). */
  const char *backend;
} pasada_model_params;

PASADA_API pasada_model_params pasada_model_default_params(void);
PASADA_API int pasada_model_load(const char *path, const pasada_model_params *params,
                                 pasada_model **out);
PASADA_API void pasada_model_free(pasada_model *model);
PASADA_API const pasada_tokenizer *pasada_model_tokenizer(const pasada_model *model);
PASADA_API int32_t pasada_model_n_vocab(const pasada_model *model);
PASADA_API int32_t pasada_model_n_ctx_train(const pasada_model *model);
PASADA_API const char *pasada_model_arch(const pasada_model *model);
/* The width of the model's hidden states: the length of its embeddings. */
PASADA_API int32_t pasada_model_n_embd(const pasada_model *model);
/* Whether the model has recurrent (linear-attention) layers (qwen35): a
 * sequence then carries a state beside its KV positions, so truncation
 * inside a sequence and prefix reuse work only at prefixes whose state
 * the context kept (see pasada_seq_truncate). */
PASADA_API bool pasada_model_is_recurrent(const pasada_model *model);
/* Writes a human-readable description (architecture, hyper-parameters,
 * tokenizer, tensor types with counts and bytes) to `file`. */
PASADA_API int pasada_model_print_info(const pasada_model *model, FILE *file);

/* The model file's metadata: its keys in file order and each value as text.
 * A value is written as: integers in decimal, floats in the fewest digits
 * that read back the same, true / false, a string as it is, an array as
 * [a, b, c] with its strings in double quotes (escaped as in JSON). The
 * token list and the merges, which the loaded model keeps only in its
 * tokenizer, read "[N strings]": look tokens up through the tokenizer. */
PASADA_API int64_t pasada_model_meta_count(const pasada_model *model);
/* The i-th key (0 <= i < count) in *out, owned by the model. */
PASADA_API int pasada_model_meta_key(const pasada_model *model, int64_t i, const char **out);
/* The value of `key` as text in *out (release it with pasada_text_free);
 * PASADA_ERR_ARG when the file has no such key. */
PASADA_API int pasada_model_meta_value(const pasada_model *model, const char *key, char **out);

/* ---- contexts and batches ---- */
/* What the KV cache stores: DEFAULT is the backend's choice: F16 on "cpu"
 * (half the memory and the bytes attention reads; values rounded to nearest
 * even), F32 on "ref". Q8: 8-bit integers with one float scale per
 * position and KV head (about half of F16's memory; values rounded to
 * the nearest multiple of max |x| / 127 of their head's row). */
typedef enum { PASADA_KV_DEFAULT = 0, PASADA_KV_F32 = 1, PASADA_KV_F16 = 2, PASADA_KV_Q8 = 3 } pasada_kv_type;
/* "f32" / "f16" / "q8" -> the type; PASADA_ERR_ARG for anything else */
PASADA_API int pasada_kv_type_from_name(const char *name, pasada_kv_type *out);
PASADA_API const char *pasada_kv_type_name(pasada_kv_type type); /* "f32", "f16", "q8", "default" */

/* How an embedding context pools a sequence's final hidden states (the
 * residual stream after the output norm) into one vector: NONE (the
 * default) is a language-model context that computes logits; LAST is the
 * last token's (Qwen3-Embedding and other decoder embedders), MEAN the mean
 * over every token, CLS the first token's (position 0). The values are
 * those of GGUF's {arch}.pooling_type, which pasada_model_pooling reads. */
typedef enum {
  PASADA_POOLING_NONE = 0,
  PASADA_POOLING_MEAN = 1,
  PASADA_POOLING_CLS = 2,
  PASADA_POOLING_LAST = 3
} pasada_pooling;
/* "none" / "mean" / "cls" / "last" -> the pooling; PASADA_ERR_ARG otherwise */
PASADA_API int pasada_pooling_from_name(const char *name, pasada_pooling *out);
PASADA_API const char *pasada_pooling_name(pasada_pooling pooling);
/* The pooling the model file declares ({arch}.pooling_type), or
 * PASADA_POOLING_NONE when it declares none (or one pasada lacks). */
PASADA_API pasada_pooling pasada_model_pooling(const pasada_model *model);

typedef struct {
  int32_t n_ctx;     /* positions per sequence (0: min(model's training context, 4096)) */
  int32_t n_seq_max; /* sequences that can be live at once */
  int32_t n_batch;   /* most tokens in one forward pass */
  int32_t n_threads; /* 0: all cores */
  int32_t kv_block_size; /* positions per KV block, a multiple of 16 (0: 16) */
  int64_t kv_blocks;     /* blocks in the pool (0: enough for n_seq_max full sequences) */
  pasada_kv_type kv_type; /* the cache's values (PASADA_KV_DEFAULT: see above) */
  /* The backend this context runs on: NULL (the model's), or another that
   * reads the weights as the model's backend prepared them (the CPU
   * backends and "ref" read each other's), by the names of
   * pasada_model_params.backend. A GPU backend runs only models loaded on
   * it: naming one here for another model is PASADA_ERR_ARG. */
  const char *backend;
  /* Embeddings: with a pooling other than NONE, pasada_decode computes no
   * logits; it pools the final hidden states of every token of the batch
   * into its sequence's embedding (pasada_get_embeddings), and
   * pasada_get_logits gives NULL. A sequence's pool restarts at its
   * position 0. embd_normalize: the pooled vector is divided by its L2
   * norm (the default params set it). */
  pasada_pooling pooling;
  bool embd_normalize;
  /* A model with recurrent layers (pasada_model_is_recurrent): how far
   * pasada_seq_truncate can take a sequence back, whatever the snapshots
   * hold (speculative decoding's rejected drafts). A forward pass that
   * gives a sequence two or more tokens, positions a..b, copies its
   * recurrent state after each of the last n_rollback of them (from
   * max(a, b + 1 - n_rollback) to b); truncating to one past any such
   * position restores it, until the sequence's state is replaced (a
   * truncation that drops it or restores a snapshot, prefix reuse) or a
   * later pass of several tokens moves the kept range. One-token passes
   * copy nothing and keep the range. Costs n_seq_max * n_rollback states
   * of memory and a copy per token kept. 0 (the default): none; at most
   * PASADA_ROLLBACK_MAX; ignored for other models. */
  int32_t n_rollback;
} pasada_context_params;
#define PASADA_ROLLBACK_MAX 64

PASADA_API pasada_context_params pasada_context_default_params(void);
PASADA_API int pasada_context_create(pasada_model *model, const pasada_context_params *params,
                                     pasada_context **out);
PASADA_API void pasada_context_free(pasada_context *ctx);
PASADA_API int32_t pasada_context_n_ctx(const pasada_context *ctx);
/* The backend the context runs on ("cpu", "cpu:avx2", "ref"). */
PASADA_API const char *pasada_context_backend(const pasada_context *ctx);

/* A batch of tokens, each with its sequence, its position in that sequence,
 * and whether its logits are wanted. Positions of one sequence must continue
 * that sequence's cache (pos == cached length for the first token, then +1). */
typedef struct {
  int32_t n_tokens;
  const int32_t *token;
  const int32_t *pos;
  const int32_t *seq_id;
  const int8_t *want_logits; /* NULL: only the last token's logits */
} pasada_batch;

PASADA_API int pasada_decode(pasada_context *ctx, const pasada_batch *batch);
/* Logits of the i-th token of the last batch that asked for them, n_vocab
 * floats; NULL if that token's logits were not requested. */
PASADA_API const float *pasada_get_logits(const pasada_context *ctx, int32_t i);
/* The embedding of sequence `seq` in an embedding context: its tokens'
 * final hidden states since its position 0 pooled as the context's pooling
 * says (and L2-normalised when the context's embd_normalize), n_embd floats
 * into out. PASADA_ERR_ARG for a context without pooling, a sequence out of
 * range, or one with no tokens decoded since its start. */
PASADA_API int pasada_get_embeddings(const pasada_context *ctx, int32_t seq, float *out);
/* Runs fn(arg, i) for every i in [0, n) on the context's threads (the
 * calling one included) and returns when all have run: for work between
 * forward passes that is independent per sequence, such as sampling each
 * of a batch's sequences from its logits. fn must not call back into the
 * context except to read (pasada_get_logits). */
PASADA_API void pasada_parallel_for(pasada_context *ctx, void (*fn)(void *arg, int32_t i),
                                    void *arg, int32_t n);
/* Drops sequence `seq` from position `p0` on (p0 = 0: the whole sequence,
 * whose KV blocks go back to the pool or to the prefix cache). A model with
 * recurrent layers (pasada_model_is_recurrent) truncates to 0 < p0 <
 * length only where pasada_context_params.n_rollback kept the state after
 * position p0 - 1, or where a snapshot of exactly those p0 tokens exists;
 * otherwise it keeps the longest prefix of those p0 tokens that a snapshot
 * covers, or drops the whole sequence when none does: read
 * pasada_seq_length after. Either way it first keeps a snapshot of the
 * sequence's state at its full length. */
PASADA_API void pasada_seq_truncate(pasada_context *ctx, int32_t seq, int32_t p0);
/* A model with recurrent layers: keeps sequence `seq`'s state at its
 * current length as a snapshot (with the tokens it covers), so that a
 * later truncation inside the sequence can go back to it and a prompt that
 * extends those tokens reuses them (pasada_seq_reuse_prefix). The context
 * keeps two snapshots per sequence slot, least recently used first to go.
 * Take one where a conversation's prompt ends: the next turn re-renders the
 * answer, whose tokens may differ from those generated. Costs one copy of
 * the state. PASADA_OK, and nothing done, for other models;
 * PASADA_ERR_ARG for a sequence out of range. */
PASADA_API int pasada_seq_snapshot(pasada_context *ctx, int32_t seq);
PASADA_API int32_t pasada_seq_length(const pasada_context *ctx, int32_t seq);

/* ---- paged KV cache and prefix reuse ----
 * The KV cache is a pool of fixed-size blocks (kv_block_size positions each);
 * every sequence has a block table. Full blocks of a sequence's prompt are
 * registered in a prefix cache keyed by the tokens they hold (and all tokens
 * before them); blocks no sequence uses stay cached until the pool needs
 * them, then the least recently used go first. */
typedef struct {
  int32_t block_size;      /* positions per block */
  int32_t n_blocks;        /* in the pool */
  int32_t n_free;          /* neither used by a sequence nor cached */
  int32_t n_cached;        /* unused by any sequence but holding a reusable prefix */
  int64_t bytes;           /* memory of the whole pool */
  pasada_kv_type type;     /* PASADA_KV_F32, PASADA_KV_F16 or PASADA_KV_Q8 */
} pasada_kv_stats;
PASADA_API void pasada_kv_get_stats(const pasada_context *ctx, pasada_kv_stats *out);
/* Blocks a sequence of length n_tokens needs, and whether that many can be
 * taken now (free + evictable cached blocks), for admission control. */
PASADA_API int32_t pasada_kv_blocks_needed(const pasada_context *ctx, int32_t n_tokens);
PASADA_API int32_t pasada_kv_blocks_available(const pasada_context *ctx);
/* For an empty sequence `seq`: attaches the longest cached prefix of
 * tokens[0..n): whole cached blocks, then the leading positions of a block
 * that follows the same prefix (cached, or another sequence's), copied;
 * never all n tokens, so at least one token is left to decode for logits.
 * The values reused are those the sequence would compute itself (a
 * position's K and V depend only on the tokens up to it). Returns the
 * number of positions now cached; decoding continues at that position.
 * A model with recurrent layers reuses only a prefix whose state the
 * context kept (a sequence it truncated, e.g. the previous turn of a
 * conversation that the prompt continues) and whose KV positions are all
 * still cached; otherwise nothing. */
PASADA_API int32_t pasada_seq_reuse_prefix(pasada_context *ctx, int32_t seq, const int32_t *tokens,
                                           int32_t n);
/* Changes of the prefix cache's full blocks, for a server that publishes
 * them (a cache-aware router learns what each replica holds): STORED when
 * a full block enters the prefix cache (its hash, its parent's hash, 0 for
 * a sequence's first block, and its block_size tokens), REMOVED when it
 * leaves (evicted, or rewritten). A block's hash covers its tokens and
 * every token before it. The callback runs on the thread calling
 * pasada_decode / pasada_seq_* and must be quick; tokens are valid during
 * the call only. fn NULL: no callback. */
enum { PASADA_KV_EVENT_STORED = 1, PASADA_KV_EVENT_REMOVED = 2 };
typedef struct {
  int kind;
  uint64_t block_hash, parent_hash;
  const int32_t *tokens;
  int32_t n_tokens;
} pasada_kv_event;
typedef void (*pasada_kv_event_fn)(void *user, const pasada_kv_event *ev);
PASADA_API void pasada_kv_set_event_callback(pasada_context *ctx, pasada_kv_event_fn fn, void *user);
/* The hashes (and parent hashes, when parents is non-NULL) of the full
 * blocks the prefix cache holds, at most max of them; returns how many it
 * holds. Not safe against a concurrent pasada_decode on the context. */
PASADA_API int32_t pasada_kv_cached_blocks(const pasada_context *ctx, uint64_t *hashes,
                                           uint64_t *parents, int32_t max);

/* ==== text and sampling ====
 * Text <-> tokens through a model's tokenizer (pasada_model_tokenizer), chat
 * templates, and the token sampler. Strings and token arrays these
 * functions return are released with pasada_text_free. */

/* ---- tokenizer ---- */
PASADA_API int32_t pasada_tokenizer_n_vocab(const pasada_tokenizer *tok);
PASADA_API int32_t pasada_tokenizer_bos(const pasada_tokenizer *tok); /* -1 when none */
PASADA_API int32_t pasada_tokenizer_eos(const pasada_tokenizer *tok); /* -1 when none */
/* The model's add_bos and add_eos flags. */
PASADA_API bool pasada_tokenizer_add_bos(const pasada_tokenizer *tok);
PASADA_API bool pasada_tokenizer_add_eos(const pasada_tokenizer *tok);
/* End of generation: eos and the end-of-turn tokens (<|im_end|>, <end_of_turn>...). */
PASADA_API bool pasada_tokenizer_is_eog(const pasada_tokenizer *tok, int32_t id);
/* The id of the token whose text is exactly `text`; -1 when absent. */
PASADA_API int32_t pasada_tokenizer_find(const pasada_tokenizer *tok, const char *text);

/* Tokenizes `len` bytes of `text` into an array (*out, *n_out; release it
 * with pasada_text_free).
 * add_special: prepend BOS / append EOS as the model's flags say.
 * parse_special: the text of control tokens becomes those tokens (otherwise
 * it is tokenized as plain text). */
PASADA_API int pasada_tokenize(const pasada_tokenizer *tok, const char *text, size_t len,
                               bool add_special, bool parse_special, int32_t **out, size_t *n_out);
/* The bytes of one token on its own (a SentencePiece leading space kept);
 * control tokens are "" unless render_special. Writes at most cap bytes,
 * returns the full length (no NUL terminator). */
PASADA_API size_t pasada_token_to_piece(const pasada_tokenizer *tok, int32_t id,
                                        bool render_special, char *buf, size_t cap);
/* A whole sequence as a NUL-terminated string in *out (release it with
 * pasada_text_free); its length in *out_len unless NULL (the text holds a
 * NUL byte where a token's bytes do). */
PASADA_API int pasada_detokenize(const pasada_tokenizer *tok, const int32_t *ids, size_t n,
                                 bool render_special, char **out, size_t *out_len);
/* Releases a string or token array the library returned (NULL: nothing). */
PASADA_API void pasada_text_free(void *p);

/* Streaming detokenizer: push tokens one at a time as they are generated; it
 * returns only complete UTF-8 characters, holding back the bytes of a
 * character split across tokens. */
typedef struct pasada_detok pasada_detok;
#define PASADA_DETOK_PIECE_MAX 256 /* a buffer this large always holds one push */
PASADA_API int pasada_detok_create(const pasada_tokenizer *tok, bool render_special,
                                   pasada_detok **out);
PASADA_API void pasada_detok_free(pasada_detok *d);
/* Writes the text now complete to buf (at most cap bytes); returns its length. */
PASADA_API size_t pasada_detok_push(pasada_detok *d, int32_t id, char *buf, size_t cap);
/* Writes what is held back (an incomplete character becomes U+FFFD). */
PASADA_API size_t pasada_detok_flush(pasada_detok *d, char *buf, size_t cap);
/* Starts a new stream (drops what is held back). */
PASADA_API void pasada_detok_reset(pasada_detok *d);

/* ---- chat templates ---- */
typedef enum {
  PASADA_CHAT_NONE = 0,
  PASADA_CHAT_CHATML, /* <|im_start|>role ... <|im_end|>: SmolLM2, Qwen */
  PASADA_CHAT_GEMMA,  /* <start_of_turn>user ... <end_of_turn> */
  PASADA_CHAT_LLAMA3, /* <|start_header_id|>role<|end_header_id|> ... <|eot_id|> */
} pasada_chat_template;

typedef struct {
  const char *role; /* "system", "user" or "assistant" */
  const char *content;
} pasada_chat_message;

/* The model's template, recognised from tokenizer.chat_template or, when the
 * file has none, from its architecture. Fails (naming it) when unrecognised. */
PASADA_API int pasada_chat_detect(const pasada_model *model, pasada_chat_template *out);
/* "chatml", "gemma", "llama3". */
PASADA_API int pasada_chat_from_name(const char *name, pasada_chat_template *out);
PASADA_API const char *pasada_chat_name(pasada_chat_template tmpl);
/* The conversation as text for the model in *out (release it with
 * pasada_text_free), ending with the assistant's opening when
 * add_generation_prompt. Fails as pasada_chat_check does. */
PASADA_API int pasada_chat_render(pasada_chat_template tmpl, const pasada_chat_message *msgs,
                                  size_t n, bool add_generation_prompt, char **out);
/* Whether the template can render the conversation: PASADA_OK, or
 * PASADA_ERR_ARG naming what it rejects (Gemma: roles must alternate
 * user/assistant after an optional system message). A conversation that
 * passes renders unless memory runs out. */
PASADA_API int pasada_chat_check(pasada_chat_template tmpl, const pasada_chat_message *msgs,
                                 size_t n);
/* Like pasada_chat_render, with what the model's own template adds to its
 * family's plain form when tmpl is the model's family (SmolLM2's default
 * system prompt, Llama 3.1's dated header). */
PASADA_API int pasada_chat_render_model(const pasada_model *model, pasada_chat_template tmpl,
                                        const pasada_chat_message *msgs, size_t n,
                                        bool add_generation_prompt, char **out);

/* ---- Jinja templates ----
 * A model's own chat template (tokenizer.chat_template) rendered as Hugging
 * Face transformers' apply_chat_template renders it: jinja2's sandbox with
 * trim_blocks and lstrip_blocks, loop controls, tojson (json.dumps with
 * ensure_ascii=False), raise_exception(msg), strftime_now(fmt) (the local
 * time; PASADA_TEMPLATE_NOW=SECONDS fixes it) and {% generation %}. A
 * template is untrusted input: a render stops with an error past 8 MiB of
 * output, 256 MiB of values, 20 million steps or 100 nested macro calls. */
typedef struct pa_template pasada_template;
/* Parses a Jinja template; a syntax error fails with PASADA_ERR_FORMAT and
 * pasada_last_error() naming the line ("template line 12: unexpected 'endfor'"). */
PASADA_API int pasada_template_parse(const char *src, size_t len, pasada_template **out);
/* Renders with the variables of a JSON object (messages, tools,
 * add_generation_prompt, bos_token, eos_token, anything else) into *out
 * (pasada_text_free). raise_exception, an undefined operation, or a limit
 * reached fails with PASADA_ERR_ARG naming the template line. A parsed
 * template is immutable: renders may run concurrently from several threads. */
PASADA_API int pasada_template_render(const pasada_template *t, const char *context_json, size_t len,
                                      char **out);
PASADA_API void pasada_template_free(pasada_template *t);
/* The model's template source (tokenizer.chat_template) and the text of its
 * BOS and EOS tokens ("" when it has none), each released with
 * pasada_text_free; PASADA_ERR_ARG when the model has no template. */
PASADA_API int pasada_model_chat_template(const pasada_model *model, char **tmpl, char **bos,
                                          char **eos);

/* ---- sampler ----
 * Each call to pasada_sampler_sample runs, in order: the penalties over the
 * last repeat_last_n accepted tokens (repetition: a positive logit is
 * divided by repeat_penalty, a negative one multiplied; then
 * logit -= count * frequency_penalty + (count > 0) * presence_penalty),
 * top-k, top-p (over the top-k candidates, renormalised), min-p (keep the
 * tokens with p >= min_p * p_max), temperature, and a draw from the
 * sampler's own seeded generator (xoshiro256**). temp <= 0 is greedy: the
 * highest logit after the penalties, ties to the lowest id. A value of 0
 * disables top_k; 1 disables top_p; 0 disables min_p. */
#define PASADA_SEED_RANDOM UINT64_MAX /* seed from the clock */

typedef struct {
  float temp;              /* 0.8 */
  int32_t top_k;           /* 40 */
  float top_p;             /* 0.95 */
  float min_p;             /* 0.05 */
  float repeat_penalty;    /* 1.0 (off) */
  int32_t repeat_last_n;   /* 64; 0: no penalties; -1: every accepted token */
  float presence_penalty;  /* 0 */
  float frequency_penalty; /* 0 */
  uint64_t seed;           /* PASADA_SEED_RANDOM */
} pasada_sampler_params;

PASADA_API pasada_sampler_params pasada_sampler_default_params(void);
/* Checks the parameters (PASADA_ERR_ARG naming the field) and sizes every
 * buffer for n_vocab, so sampling never allocates. */
PASADA_API int pasada_sampler_create(const pasada_sampler_params *params, int32_t n_vocab,
                                     pasada_sampler **out);
PASADA_API void pasada_sampler_free(pasada_sampler *s);
/* Picks a token from n_vocab logits (n_vocab must be the sampler's) into
 * *out (-1 on failure). The token is not accepted: call
 * pasada_sampler_accept with it (and with the prompt's tokens, for the
 * penalties to see them). */
PASADA_API int pasada_sampler_sample(pasada_sampler *s, const float *logits, int32_t n_vocab,
                                     int32_t *out);
/* Appends a token to the penalty window; ids outside the vocabulary are ignored. */
PASADA_API void pasada_sampler_accept(pasada_sampler *s, int32_t token);
/* Empties the penalty window and restarts the generator from the seed, so a
 * reset sampler repeats its draws. */
PASADA_API void pasada_sampler_reset(pasada_sampler *s);
/* The seed in use (the drawn one when the parameters said PASADA_SEED_RANDOM). */
PASADA_API uint64_t pasada_sampler_seed(const pasada_sampler *s);

/* ---- logit bias and grammars ----
 * With a logit bias and/or a grammar set, pasada_sampler_sample first adds
 * the bias to the logits, then masks (to -infinity) every token the grammar
 * does not allow after the tokens accepted since it was set, then runs the
 * chain above: the distribution is exactly the chain's over the masked
 * logits. (Greedy checks the best token first, and a chain without top-k,
 * top-p or min-p draws until the grammar allows the token: the mask is
 * computed only when that fails, with the same distribution; a draw may
 * then use several random numbers.) Under a grammar, end-of-generation
 * tokens are allowed exactly
 * where the grammar can end; control tokens never. Setting either sizes
 * every buffer, so sampling still allocates nothing per token except, once
 * per grammar state first met, the grammar's cached token sets. */

/* Adds bias[i] to the logit of token ids[i] (a token named twice gets both;
 * -100 all but bans a token, +100 all but forces it). Copies the arrays;
 * n = 0 clears the bias. PASADA_ERR_ARG for an id outside the vocabulary or
 * a bias that is not finite (nothing changes then). */
PASADA_API int pasada_sampler_set_logit_bias(pasada_sampler *s, const int32_t *ids,
                                             const float *bias, size_t n);

/* A grammar compiled for a tokenizer's vocabulary: llama.cpp's GBNF
 * (`name ::= ...` rules of alternatives |, sequences, groups, * + ? {m}
 * {m,} {m,n}, "literals" with \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH,
 * [classes], [^negated], . any character, # comments). Output is matched as
 * UTF-8 bytes, so a token may end inside a character. */
typedef struct pa_grammar pasada_grammar;
/* Compiles `len` bytes of GBNF whose start rule is `root` (NULL: "root").
 * PASADA_ERR_ARG naming the line, column and problem: syntax, undefined or
 * doubly defined rules, left recursion, a rule that can never complete,
 * limits (1 MiB of text, 4096 rules, repetition bounds of 10000, automaton
 * sizes). Immutable once made: shared by any number of samplers and threads;
 * it must outlive them, and the tokenizer must outlive it. */
PASADA_API int pasada_grammar_create(const pasada_tokenizer *tok, const char *gbnf, size_t len,
                                     const char *root, pasada_grammar **out);
PASADA_API void pasada_grammar_free(pasada_grammar *g);
/* Constrains the sampler with g from the grammar's start (NULL removes the
 * constraint). From then on pasada_sampler_accept advances the grammar with
 * each token, so set it after the prompt's tokens were accepted; a token
 * the grammar does not allow makes the next pasada_sampler_sample fail
 * (PASADA_ERR_ARG naming it), as does a state no token of the vocabulary
 * can continue. pasada_sampler_reset restarts the grammar. PASADA_ERR_ARG
 * when g was made for another vocabulary size. */
PASADA_API int pasada_sampler_set_grammar(pasada_sampler *s, const pasada_grammar *g);
/* Whether the text accepted so far is a complete sentence of the grammar
 * (the end is allowed), and whether nothing but the end is possible. Both
 * false without a grammar. */
PASADA_API bool pasada_sampler_grammar_can_end(const pasada_sampler *s);
PASADA_API bool pasada_sampler_grammar_must_end(const pasada_sampler *s);

/* ==== bench support ====
 * What `pasada bench` needs to turn timings into fractions of the machine's
 * limits: the bytes and multiply-adds one token costs (src/model/model_stats.c). */
typedef struct {
  int32_t n_layer;
  int64_t n_params_layers;     /* elements of every layer matrix (q, k, v, o, gate, up, down; of a
                                  mixture of experts the router and the n_used experts a token
                                  reads, not every expert) */
  int64_t n_params_output;     /* elements of the output matrix (the embedding when tied) */
  int64_t bytes_layers;        /* bytes of those layer matrices, their biases (the n_used experts'
                                  of a mixture) and gpt-oss's attention sinks */
  int64_t bytes_output;        /* bytes of the output matrix */
  int64_t bytes_embd_row;      /* bytes of one row of token_embd */
  int64_t bytes_file_tensors;  /* bytes of every tensor in the file */
  /* the weight type of most layer-matrix bytes ("Q4_K"); mixed is true when
   * layer matrices come in more than one type */
  char main_type[16];
  bool mixed;
  char output_type[16];        /* type of the output matrix */
  /* the layer matrices' dot products run on 8-bit integers (activations are
   * quantized to Q8_0/Q8_1/Q8_K), so the int8-dot peak is their ceiling */
  bool int8_dot;
} pasada_model_stats;
PASADA_API void pasada_model_get_stats(const pasada_model *model, pasada_model_stats *out);
/* For one token at position `pos` (attending over positions 0..pos): the
 * attention FLOPs (q.k and p.v, 2 per multiply-add, every layer and head) and
 * the (layer, position) KV rows it reads, sliding windows taken into account. */
PASADA_API void pasada_model_attention_cost(const pasada_model *model, int64_t pos, double *flops,
                                            int64_t *kv_rows);

#ifdef __cplusplus
}
#endif
#endif
