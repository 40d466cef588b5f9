/* pretok_regex.h: what the reader of tokenizer.json (format/hf_tokenizer.c)
 * shares with the pre-tokenizers (pretok.c): the regexes a Hugging Face
 * pre_tokenizer spells without a Split (ByteLevel's own, Digits'), and the
 * lookup of a llama.cpp pre-tokenizer name by the regexes it runs. */
#ifndef PASADA_PRETOK_REGEX_H
#define PASADA_PRETOK_REGEX_H

#include <stdbool.h>
#include <stddef.h>

/* GPT-2 (also the word splitter of Hugging Face's ByteLevel pre-tokenizer). */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* Every digit alone (Hugging Face's Digits(individual_digits=true)). */
#define RE_DIGIT "\\p{N}"

/* The first name of the pre-tokenizer (pretok.c's table) that runs exactly
 * the n regexes re[], in order, each split again by the next, into
 * name[cap]: preferably one whose BPE ignores merges as ignore_merges says
 * (tokenizer.json's model.ignore_merges), else one that does not. Regexes
 * compare character for character, except that \r, \n and \t match the
 * escapes that spell them. false when none does. */
bool pa_pretok_name_of(const char *const *re, int n, bool ignore_merges, char *name, size_t cap);
/* "gpt2, llama-bpe, ... (and N more names of these families)", for errors */
const char *pa_pretok_supported(void);

#endif
