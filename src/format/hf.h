/* hf.h: Hugging Face model folders (config.json, tokenizer.json,
 * tokenizer_config.json and *.safetensors, sharded or not) read as the GGUF
 * view the loader consumes: llama.cpp's keys, tensor names and conventions,
 * the weights memory-mapped where the stored bytes serve as they are. */
#ifndef PASADA_HF_H
#define PASADA_HF_H

#include <stdbool.h>

#include "format/gguf.h"

/* True when `path` is a directory (a model folder rather than a file). */
bool hf_is_dir(const char *path);

/* Opens the model folder `dir` as a gguf_file view (gguf_close frees it):
 *  - metadata: general.architecture from config.json's architectures /
 *    model_type (llama incl. Mistral and Mixtral, qwen2, qwen3, qwen3moe,
 *    gemma2, gemma3, phi3, gpt-oss, qwen35, bert), the
 *    hyper-parameters under llama.cpp's keys, tokenizer.ggml.* from
 *    tokenizer.json (byte-level BPE: tokens, types, merges, the
 *    pre-tokenizer recognised from its definition) and tokenizer_config.json
 *    (bos/eos/pad/unk, add_bos/add_eos, chat_template; or chat_template.jinja);
 *  - tensors under llama.cpp's names: matrices of F32, F16 or BF16 point into
 *    the mapped safetensors files as stored; llama's Q/K rows are permuted to
 *    GGML's RoPE pairing, Gemma's and Qwen3.5's norms stored as 1 + w,
 *    every 1-D tensor as F32, the experts stacked (per-expert matrices) or
 *    split and transposed (gpt-oss's fused x @ W products; its MXFP4 blocks
 *    repacked), Qwen3.5's linear layers in llama.cpp's order, in memory of
 *    the view's own.
 * Every file is checked (safetensors.h); a malformed or unsupported folder is
 * one error naming the file and the problem. */
int hf_open(const char *dir, gguf_file **out);

/* Quantizes the matrices of folders opened from then on to the type named
 * (a tensor type with a reference quantizer: Q8_0, Q4_K, Q6_K, F16, ...,
 * case-insensitive) at load, with the reference quantizers of src/quant;
 * matrices whose rows are not a whole number of its blocks stay as stored.
 * NULL: as stored (the default). A process-wide setting for the command
 * line (--quantize), set before any model loads; an unknown name is an
 * error listing the types. */
int hf_set_load_type(const char *name); /* trailing slashes of dir ignored */

#endif
