/* tokenizer.h: text <-> token ids from a GGUF file's tokenizer.ggml.* data.
 *
 * Two models: byte-level BPE ("gpt2", with the pre-tokenizer that
 * tokenizer.ggml.pre names) and SentencePiece-style ("llama": scores,
 * byte fallback). Special/control tokens are matched in the text when
 * parse_special is set. Decoding is streamed through pa_detok, which never
 * emits a partial UTF-8 character. */
#ifndef PASADA_TOKENIZER_H
#define PASADA_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"

typedef struct pa_tokenizer pa_tokenizer;

/* Token attributes from tokenizer.ggml.token_type. */
enum {
  PA_TOKEN_NORMAL = 1,
  PA_TOKEN_UNKNOWN = 2,
  PA_TOKEN_CONTROL = 3,
  PA_TOKEN_USER_DEFINED = 4,
  PA_TOKEN_UNUSED = 5,
  PA_TOKEN_BYTE = 6
};

/* Validates and loads the vocabulary (tokens, scores, types, merges, special
 * ids, add_bos/add_eos flags, pre-tokenizer). Errors name the key at fault
 * (mismatched array lengths, special ids out of range, unknown model or
 * pre-tokenizer). */
int pa_tokenizer_load(const gguf_file *f, pa_tokenizer **out);
void pa_tokenizer_free(pa_tokenizer *t);

int32_t pa_tokenizer_n_vocab(const pa_tokenizer *t);
int32_t pa_tokenizer_bos(const pa_tokenizer *t); /* -1 when none */
int32_t pa_tokenizer_eos(const pa_tokenizer *t);
bool pa_tokenizer_add_bos(const pa_tokenizer *t);
bool pa_tokenizer_add_eos(const pa_tokenizer *t);
/* End of generation: eos, eot (<|im_end|>, <end_of_turn>, <|eot_id|>...). */
bool pa_tokenizer_is_eog(const pa_tokenizer *t, int32_t id);
/* Looks up a token by its exact text; -1 when absent. */
int32_t pa_tokenizer_find(const pa_tokenizer *t, const char *text);
const char *pa_tokenizer_model_name(const pa_tokenizer *t); /* "gpt2" / "llama" */
const char *pa_tokenizer_pre_name(const pa_tokenizer *t);
int pa_tokenizer_token_type(const pa_tokenizer *t, int32_t id);

/* Tokenizes `len` bytes of `text` (any bytes: invalid UTF-8 is encoded
 * byte by byte where the vocabulary can). add_special: prepend BOS / append
 * EOS as the model's flags say. parse_special: the text of control tokens
 * becomes those tokens (otherwise it is plain text); user-defined tokens are
 * always matched whole, as Hugging Face and llama.cpp do. Matching is
 * leftmost-longest. *out is malloc'd (caller frees; never NULL on success),
 * *n_out its length. Thread-safe: the tokenizer is read-only after load. */
int pa_tokenize(const pa_tokenizer *t, const char *text, size_t len, bool add_special,
                bool parse_special, int32_t **out, size_t *n_out);

/* The bytes a token decodes to on its own (a piece may be part of a UTF-8
 * character). Control tokens decode to "" unless render_special. Writes up
 * to cap bytes to buf (no NUL), returns the full length. The one
 * position-dependent rule, dropping the leading space an add_space_prefix
 * vocabulary puts before the first word (as Hugging Face's decoder does), is
 * applied by pa_detok and pa_detokenize, which know the position. */
size_t pa_token_to_piece(const pa_tokenizer *t, int32_t id, bool render_special, char *buf,
                         size_t cap);

/* Detokenizes a whole sequence into a malloc'd NUL-terminated string. */
char *pa_detokenize(const pa_tokenizer *t, const int32_t *ids, size_t n, bool render_special);

/* Streaming detokenizer: holds back bytes of an incomplete UTF-8 character.
 * prev is -1 until the stream has produced its first byte. */
typedef struct {
  const pa_tokenizer *tok;
  bool render_special;
  int32_t prev;
  char pending[8];
  int n_pending;
} pa_detok;
void pa_detok_init(pa_detok *d, const pa_tokenizer *t, bool render_special);
/* Appends the complete characters now available to buf (cap bytes),
 * returns bytes written. pa_detok_max_output(t) bytes always suffice for one
 * token (computed at load from the vocabulary: about the longest token, more
 * where tokens hold loose bytes that may become U+FFFD; 90 for SmolLM2, 57
 * for Gemma 3); a smaller cap truncates. */
size_t pa_detok_push(pa_detok *d, int32_t id, char *buf, size_t cap);
/* Flushes what is left (invalid trailing bytes become U+FFFD). */
size_t pa_detok_flush(pa_detok *d, char *buf, size_t cap);

/* ---- chat templates ---- */
typedef enum {
  PA_CHAT_NONE = 0,
  PA_CHAT_CHATML, /* SmolLM2, Qwen */
  PA_CHAT_GEMMA,
  PA_CHAT_LLAMA3,
} pa_chat_template;

typedef struct {
  const char *role; /* "system", "user", "assistant" */
  const char *content;
} pa_chat_message;

/* Picks the template from tokenizer.chat_template (by recognising its
 * markers: <|im_start|> chatml, <start_of_turn> gemma, <|start_header_id|>
 * llama3) or, when the file has none, from the architecture (gemma*: gemma;
 * qwen2/qwen3: chatml; llama with an <|im_start|> token: chatml). Otherwise
 * an error naming the issue and suggesting --chat-template. arch NULL:
 * general.architecture. tok: the file's loaded tokenizer, or NULL to read
 * the token list from the file (gone from a loaded model's file). */
int pa_chat_detect(const gguf_file *f, const pa_tokenizer *tok, const char *arch,
                   pa_chat_template *out);
int pa_chat_from_name(const char *name, pa_chat_template *out); /* "chatml", "gemma", "llama3" */
const char *pa_chat_name(pa_chat_template t);
/* Renders messages (and the assistant's opening when add_generation_prompt)
 * into a malloc'd string, in the family's plain form (no default system
 * prompt). NULL on error (pa_last_error says why, e.g. Gemma's roles must
 * alternate user/assistant).
 *
 * BOS: templates that start with the BOS token (Gemma, Llama 3) are rendered
 * WITHOUT it; tokenize the result with add_special = true (and parse_special
 * = true) so the tokenizer adds the one BOS the model's add_bos flag asks
 * for. That gives the ids Hugging Face's apply_chat_template(tokenize=True)
 * gives, with BOS never doubled. */
char *pa_chat_render(pa_chat_template t, const pa_chat_message *msgs, size_t n,
                     bool add_generation_prompt);
/* Whether template t can render the conversation (Gemma's roles must
 * alternate): PASADA_OK, or PASADA_ERR_ARG with the reason; rendering then
 * fails only for want of memory. */
int pa_chat_check(pa_chat_template t, const pa_chat_message *msgs, size_t n);

/* What a file's template adds to its family's plain form. */
typedef struct {
  pa_chat_template kind;
  /* chatml: a system turn inserted when the first message is not "system"
   * (SmolLM2: "You are a helpful AI assistant named SmolLM, ..."); "" none. */
  char default_system[512];
  /* llama3: the 3.1+ system header "Cutting Knowledge Date: December 2023\n
   * Today Date: <date>\n\n"; "" = the 3.0 form without it. */
  char date[32];
} pa_chat_format;

/* pa_chat_detect, plus the default system prompt of a chatml template and
 * the dated header of a Llama 3.1+ template ("26 Jul 2024"), read from
 * tokenizer.chat_template. arch NULL: general.architecture. */
int pa_chat_detect_format(const gguf_file *f, const pa_tokenizer *tok, const char *arch,
                          pa_chat_format *out);
/* The plain form of a family (what pa_chat_from_name gives). */
pa_chat_format pa_chat_format_plain(pa_chat_template t);
char *pa_chat_render_format(const pa_chat_format *fmt, const pa_chat_message *msgs, size_t n,
                            bool add_generation_prompt);

/* ---- additions for tools and tests ---- */
/* The token's text exactly as the file spells it (NULL when id is out of
 * range). */
const char *pa_tokenizer_token_text(const pa_tokenizer *t, int32_t id);
/* pa_detokenize, also giving the length (the text may contain NUL bytes). */
char *pa_detokenize_len(const pa_tokenizer *t, const int32_t *ids, size_t n, bool render_special,
                        size_t *len);
/* An upper bound of what one pa_detok_push can write (bytes). */
size_t pa_detok_max_output(const pa_tokenizer *t);

#endif
