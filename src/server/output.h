/* output.h: what a chat model generated, split into the parts the APIs
 * return: the visible content, the reasoning (the text between a family's
 * thinking markers, <think>...</think> and the like), and tool calls in the
 * family's own syntax (Hermes/Qwen <tool_call>{...}</tool_call>, Llama 3.x
 * JSON, Mistral [TOOL_CALLS], gpt-oss harmony channels, DeepSeek's markers,
 * ...). The parse is re-run on the text so far at each streaming step, so it
 * must be cheap and must never release text that could still turn out to be
 * the start of a marker. */
#ifndef PASADA_SERVER_OUTPUT_H
#define PASADA_SERVER_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "server/server.h"

/* How a model family writes reasoning and tool calls. */
typedef enum {
  SRV_OUT_PLAIN = 0, /* no tool-call syntax known: everything is content */
  SRV_OUT_HERMES,    /* <tool_call>{"name":..,"arguments":{..}}</tool_call> (Qwen 2.5/3, Hermes,
                        SmolLM3) */
  SRV_OUT_LLAMA3,    /* {"name":..,"parameters":{..}} as the whole message; <|python_tag|> */
  SRV_OUT_MISTRAL,   /* [TOOL_CALLS][{"name":..,"arguments":{..}}] or [TOOL_CALLS]name[ARGS]{..} */
  SRV_OUT_GPT_OSS,   /* harmony: <|channel|>analysis / commentary to=functions.NAME / final */
  SRV_OUT_DEEPSEEK,  /* <｜tool▁calls▁begin｜>... */
  SRV_OUT_QWEN3_CODER, /* <tool_call><function=NAME><parameter=P>..</parameter></function></tool_call>
                        */
  SRV_OUT_GRANITE,     /* <|tool_call|>[{..}] */
  SRV_OUT_FUNCTIONARY,   /* >>>name\n{..} / <function=name>{..}</function> */
  SRV_OUT_COMMAND_R,     /* Action: ```json [...]``` */
  SRV_OUT_GEMMA,         /* Gemma 4: <|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|> */
  SRV_OUT_KIMI,          /* <|tool_calls_section_begin|> ... */
  SRV_OUT_GLM,           /* <tool_call>name\n<arg_key>k</arg_key><arg_value>v</arg_value> */
  SRV_OUT_MINIMAX,       /* <minimax:tool_call><invoke name=..><parameter name=..> */
  SRV_OUT_DEEPSEEK_DSML, /* <｜DSML｜function_calls|tool_calls><｜DSML｜invoke name=..> (V3.2, V4)
                          */
  SRV_OUT_FUNCTIONARY_V32, /* >>>all\ntext>>>name\n{..} (the prompt ends in ">>>") */
  SRV_OUT_FIREFUNCTION,    /* functools[{"name":..,"arguments":{..}}] */
  SRV_OUT_COMMAND_R_PLUS,  /* Action:\n```json\n[{"tool_name":..,"parameters":{..}}]``` */
  SRV_OUT_MINIMAX_M1,      /* <tool_calls>\n{..}\n{..}\n</tool_calls> */
  SRV_OUT_APRIEL,          /* reasoning, [BEGIN FINAL RESPONSE], <tool_calls>[..]</tool_calls> */
  SRV_OUT_NEMOTRON,        /* <TOOLCALL>[..]</TOOLCALL> */
  SRV_OUT_SOLAR, /* <|tool_calls|><|tool_call:begin|>id<|tool_call:name|>..<|tool_call:args|>{..} */
  SRV_OUT_LFM2,  /* <|tool_call_start|>[name(k='v', ..)]<|tool_call_end|> */
  SRV_OUT_GIGACHAT, /* <|function_call|>{..} / function call<|role_sep|>{..} */
  SRV_OUT_MINICPM,  /* <function name=..><param name=..>v</param></function> */
  SRV_OUT_ATEM,     /* to=self / to=NAME<|message|><atem:function_calls>.. / to=user */
  SRV_OUT_COUNT
} srv_out_format;

/* The format and the reasoning markers of a model, from its chat template's
 * source (and the architecture name when the template says nothing). */
typedef struct {
  srv_out_format format;
  char think_open[32];  /* "<think>"; "" when the family has no reasoning markers (a
                           close marker alone: the output always starts reasoning) */
  char think_close[32]; /* "</think>" */
  int variant;          /* the form a family with two writes (the parser reads both; the tool
                           grammar needs one): Mistral 1 name[ARGS]{..} (0 the JSON array),
                           DeepSeek 1 V3.1's name<sep>{..} (0 R1's fenced JSON), DSML 1
                           tool_calls (0 function_calls), GigaChat 1 "function call" role (0
                           <|function_call|>) */
  /* The model's vocabulary, or NULL: where set, tool grammars name the
   * markers that are special tokens of it (control, end-of-generation) by
   * token reference, so a forced call writes the token the model was
   * trained with, not its text spelled in pieces. */
  const pasada_tokenizer *vocab;
} srv_out_style;

void srv_out_style_detect(const char *template_src, const char *arch, srv_out_style *out);
const char *srv_out_format_name(srv_out_format f); /* "hermes", ... */

typedef struct {
  char id[40];     /* "call_" + 16 hex digits from (id_seed, index), unique in the
                      response; 9 alphanumerics for Mistral, whose templates need them */
  char *name;      /* the function's name */
  char *arguments; /* JSON text of an object (OpenAI's `arguments` string) */
} srv_tool_call;

typedef struct {
  char *content; /* NUL-terminated, never NULL after a successful parse */
  size_t n_content;
  char *reasoning; /* NUL-terminated, never NULL after a successful parse */
  size_t n_reasoning;
  srv_tool_call *calls;
  int n_calls;
} srv_output;

typedef struct {
  bool final;        /* the generation has ended: release everything, close what is open */
  bool tools;        /* the request offered tools: parse tool calls (else all is content) */
  bool in_reasoning; /* the prompt ended inside an opened reasoning block (the
                        template's generation prompt wrote think_open) */
  unsigned id_seed;  /* tool-call ids are derived from it, so re-parses agree */
  const struct cJSON *tool_defs; /* the request's tools (OpenAI shape) or NULL: types the
                                values of XML-style parameters (a string stays a string) */
} srv_out_opts;

/* Parses text[0..n). Until `final`, the content and reasoning stop before
 * anything that may still become a marker, and only complete tool calls are
 * listed; each later parse of a longer text extends the earlier one
 * (content and reasoning are prefixes of the later ones, calls keep their
 * order and ids). Returns false only when out of memory. */
bool srv_output_parse(const srv_out_style *st, const char *text, size_t n, const srv_out_opts *o,
                      srv_output *out);
void srv_output_free(srv_output *out);

/* The GBNF grammar (start rule `root`, malloc'd) of this family's tool
 * calls to the functions of `tools` (OpenAI's [{type, function: {name,
 * parameters}}]), or only to `only_name` when not NULL, for tool_choice
 * "required" or a named function: optional whitespace and reasoning block
 * (with `in_reasoning`, the prompt opened it: its text and close marker
 * come first), then one call, or with `parallel` one or more, in the syntax
 * srv_output_parse reads, the arguments following each function's
 * `parameters` schema (server/json_schema.h; LFM2's and Gemma 4's plain
 * strings and booleans in their own spelling). NULL with a 400 in *e for a
 * family whose calls no grammar writes (plain), a name not
 * in tools, a function or parameter name the syntax cannot carry, a schema
 * the grammar cannot follow. */
char *srv_tool_grammar(const srv_out_style *st, const struct cJSON *tools, const char *only_name,
                       bool parallel, bool in_reasoning, srv_error *e);

#endif
