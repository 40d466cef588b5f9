/* pretok.c: pre-tokenizers of byte-level BPE vocabularies.
 *
 * tokenizer.ggml.pre names how the text is cut into words before the merges
 * run. Each name maps to one or more regexes applied in sequence (each splits
 * the pieces the previous one produced; matches and the gaps between them
 * both become pieces, as Hugging Face's Split with "isolated" behaviour; a
 * match of zero width cuts the text where it matches).
 * The regexes are the ones the original tokenizers publish; PCRE2 runs them
 * with Unicode properties (UTF + UCP), JIT-compiled when available. A
 * Hugging Face folder's tokenizer.json names its row by the same regexes
 * (pa_pretok_name_of, pretok_regex.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "base/base.h"
#include "tokenizer/pretok_regex.h"
#include "tokenizer/tokenizer_internal.h"

/* Llama 3 (tiktoken cl100k): digits in groups of up to three. */
#define RE_LLAMA3                                                          \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen 2: as Llama 3 with single digits. */
#define RE_QWEN2                                                      \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen 3.5: as Qwen 2 with combining marks inside words. */
#define RE_QWEN35                                                             \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}" \
  "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Tekken (Mistral NeMo): words split at case changes, single digits. */
#define RE_TEKKEN                                                                              \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"  \
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" \
  "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* GPT-4o (tiktoken o200k; also Llama 4): Tekken's words with contractions,
 * digits in threes. */
#define RE_GPT4O                                                                               \
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"  \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                                                              \
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                                                              \
  "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Llama 3's with runs of spaces cut at powers of two (Jais 2). */
#define RE_JAIS2                                                                                   \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"                         \
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)"      \
  "|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"
/* Qwen 2's without the contractions (Turkish suffixes after an apostrophe
 * stay with their word). */
#define RE_UFAKZEKA                                                                                \
  "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Seed-Coder: single digits, punctuation runs that stop at a line break. */
#define RE_SEED_CODER                                                                              \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}"                           \
  "| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Ling (BailingMoE): possessive quantifiers, one line break at a time. */
#define RE_BAILINGMOE                                                                              \
  "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*"            \
  "|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"
/* MiniCPM 5: digits in threes, then Llama 3's words with whole numbers. */
#define RE_MINICPM5_WORDS                                                                          \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+"                             \
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* BLOOM, Poro, GPT-3 Finnish: a word is anything up to a space or one of
 * a few punctuation marks (the class as the tokenizers publish it). */
#define RE_BLOOM " ?[^(\\s|.,!?…。，、।۔،)]+"
/* Tiny Aya: digit groups aligned to thousands, then GPT-4o's words. */
#define RE_TINY_AYA_DIGITS "\\d{1,3}(?=(?:\\d{3})*\\b)"
/* Laguna: lines first, then Qwen 2's splits. */
#define RE_LINES "[^\\n]+|[\\n]+"
/* EXAONE MoE: a word runs on over single spaces between letters. */
#define RE_EXAONE_MOE                                                                              \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}"          \
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"
/* Spark 2.5: DeepSeek V3's with every line break alone, then single digits. */
#define RE_SPARK25_WORDS "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+"
/* Youtu: Korean, CJK punctuation, bopomofo, CJK and kana runs, then words. */
#define RE_YOUTU_CJK "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+"
#define RE_YOUTU_WORDS "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* GPT-2's without the final \s+ (Falcon, StarCoder-style sequences: what no
 * alternative matches stays a piece of its own anyway). */
#define RE_GPT2_WORDS "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
/* Falcon: contiguous punctuation (Unicode P and the ASCII symbols), GPT-2's
 * words, then digits in threes. */
#define RE_FALCON_PUNCT "[\\p{P}\\$\\+<=>\\^~\\|`]+"
#define RE_FALCON_DIGITS "[0-9][0-9][0-9]"
/* DeepSeek LLM (its tokenizer.json's splits, in order). */
#define RE_DEEPSEEK_NEWLINE "[\\r\\n]"
#define RE_DEEPSEEK_LLM_LETTERS "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
#define RE_DEEPSEEK_LLM_PUNCT "\\s?[!-/:-~！-／：-～‘-‟　-。]+"
#define RE_DEEPSEEK_LLM_TRAILING "\\s+$"
#define RE_DEEPSEEK_CJK "[一-龥ࠀ-一가-퟿]+"
#define RE_NUMBERS "\\p{N}+"
/* DeepSeek Coder. */
#define RE_DEEPSEEK_CODER_LETTERS "\\s?\\p{L}+"
#define RE_DEEPSEEK_CODER_PUNCT "\\s?\\p{P}+"
/* DeepSeek V3 (also Hunyuan dense): digits in threes, CJK and kana runs, then words. */
#define RE_DIGITS3 "\\p{N}{1,3}"
#define RE_DEEPSEEK3_CJK "[一-龥぀-ゟ゠-ヿ]+"
#define RE_DEEPSEEK3_WORDS                                                                         \
  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"   \
  "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Kimi K2 (its tokenization_kimi.py): GPT-4o's words without Han
 * characters in them (the original's class intersections [X&&[^\p{Han}]],
 * written as a lookahead before the class), and Han runs of their own. */
#define KIMI_UP "(?:(?!\\p{Han})[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])"
#define KIMI_LO "(?:(?!\\p{Han})[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])"
#define RE_KIMI_K2                                         \
  "[\\p{Han}]+|[^\\r\\n\\p{L}\\p{N}]?" KIMI_UP "*" KIMI_LO \
  "+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                         \
  "|[^\\r\\n\\p{L}\\p{N}]?" KIMI_UP "+" KIMI_LO            \
  "*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                         \
  "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* AFMoE (Arcee): a run of digits cut into threes from its end (the first
 * group 1 to 3 long), then CJK, Thai, Lao, Khmer, Myanmar and Hangul runs,
 * then DeepSeek V3's words. */
#define RE_AFMOE_DIGITS "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))"
/* clang-format off */
#define RE_AFMOE_ASIAN "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+"
/* clang-format on */
/* SuperBPE (its words span spaces): numbers alone, each cut into threes
 * from its end by a split of zero width. */
#define RE_SUPERBPE_CUT "(?=(\\d{3})+(?!\\d))"
/* Rust's \w (the regex crate's: Unicode's UTS #18 word characters) */
#define RE_WORD_CHARS "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}"
#define RE_WORD "[" RE_WORD_CHARS "]"
/* Chameleon: its sentinel and image tokens, tabs, newlines and runs of two
 * or four spaces, digits, punctuation, then GPT-2's words. */
#define RE_CHAMELEON_TOKENS "<sentinel:[0-9]+>"
#define RE_CHAMELEON_IMAGE "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"
#define RE_CHAMELEON_SPACE "([\\t\\n]|    |  )"
#define RE_CHAMELEON_PUNCT "[\\p{P}!-/:-@\\[-`{-~]"

static const struct {
  const char *names; /* space-separated names of tokenizer.ggml.pre */
  const char *regex[PA_PRETOK_MAX_REGEX];
  bool ignore_merges;
} pretok_table[] = {
    {"default gpt2", {RE_GPT2}, false},
    /* lines and runs of newlines: no word splitting */
    {"gemma4 granite-embed-multi-311m sarvam-moe", {"[^\\n]+|[\\n]+"}, false},
    /* Hugging Face's Whitespace: words and runs of other non-space
     * characters; the gaps, whitespace, are dropped (bpe.c) */
    {"whitespace", {RE_WORD "+|[^" RE_WORD_CHARS "\\p{White_Space}]+"}, false},
    {"llama-bpe llama3 llama-v3 falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano glm4 glm5",
     {RE_LLAMA3},
     true},
    {"dbrx smaug-bpe chatglm-bpe", {RE_LLAMA3}, false},
    {"jais-2", {RE_JAIS2}, false},
    {"qwen2 deepseek-r1-qwen kormo f2llmv2 stablelm2 megrez hunyuan solar-open grok-2",
     {RE_QWEN2},
     false},
    {"ufakzeka", {RE_UFAKZEKA}, false},
    {"seed-coder", {RE_SEED_CODER}, false},
    {"bailingmoe bailingmoe2 llada-moe", {RE_BAILINGMOE}, false},
    {"minicpm5", {RE_DIGITS3, RE_MINICPM5_WORDS}, true},
    {"smollm starcoder refact codeshell command-r exaone minerva-7b mellum2",
     {RE_DIGIT, RE_GPT2},
     false},
    {"gpt-2 phi-2 mpt olmo jais roberta-bpe gigachat jina-es jina-de jina-v1-en jina-v2-es "
     "jina-v2-de "
     "jina-v2-code a.x-4.0 mellum modern-bert trillion granite-docling exaone4",
     {RE_GPT2},
     false},
    {"bloom poro-chat gpt3-finnish", {RE_BLOOM}, false},
    {"viking", {RE_BLOOM, RE_DIGIT}, false},
    {"falcon", {RE_FALCON_PUNCT, RE_GPT2_WORDS, RE_FALCON_DIGITS}, false},
    {"deepseek-llm",
     {RE_DEEPSEEK_NEWLINE, RE_DEEPSEEK_LLM_LETTERS, RE_DEEPSEEK_LLM_PUNCT, RE_DEEPSEEK_LLM_TRAILING,
      RE_DEEPSEEK_CJK, RE_NUMBERS},
     false},
    {"deepseek-coder",
     {RE_DEEPSEEK_NEWLINE, RE_DEEPSEEK_CODER_LETTERS, RE_DEEPSEEK_CODER_PUNCT, RE_DEEPSEEK_CJK,
      RE_DIGIT},
     false},
    {"deepseek-v3 hunyuan-dense joyai-llm hy_v4",
     {RE_DIGITS3, RE_DEEPSEEK3_CJK, RE_DEEPSEEK3_WORDS},
     false},
    {"qwen35", {RE_QWEN35}, false},
    {"laguna", {RE_LINES, RE_QWEN2}, false},
    {"exaone-moe", {RE_EXAONE_MOE}, false},
    {"spark2_5", {RE_DIGITS3, RE_DEEPSEEK3_CJK, RE_SPARK25_WORDS, RE_DIGIT}, false},
    {"youtu", {RE_YOUTU_CJK, RE_YOUTU_WORDS}, true},
    {"tekken", {RE_TEKKEN}, true},
    {"gpt-4o llama4 kanana2 talkie minimax-m2", {RE_GPT4O}, false},
    {"tiny_aya cohere2moe", {RE_TINY_AYA_DIGITS, RE_GPT4O}, false},
    {"granite-embed-multi-97m", {RE_GPT4O}, true},
    {"kimi-k2", {RE_KIMI_K2}, false},
    {"afmoe", {RE_AFMOE_DIGITS, RE_AFMOE_ASIAN, RE_DEEPSEEK3_WORDS}, false},
    {"superbpe", {RE_NUMBERS, RE_SUPERBPE_CUT}, false},
    {"chameleon",
     {RE_CHAMELEON_TOKENS, RE_CHAMELEON_IMAGE, RE_CHAMELEON_SPACE, RE_DIGIT, RE_CHAMELEON_PUNCT,
      RE_GPT2_WORDS},
     false},
};

struct pa_pretok {
  pcre2_code *code[PA_PRETOK_MAX_REGEX];
  int n_code;
};

/* a \r, \n or \t, escaped or not: the same to PCRE2 and to Oniguruma */
static int regex_char(const char **p) {
  const char *s = *p;
  if (s[0] == '\\' && (s[1] == 'r' || s[1] == 'n' || s[1] == 't')) {
    *p += 2;
    return s[1] == 'r' ? '\r' : s[1] == 'n' ? '\n' : '\t';
  }
  if (s[0] == '\\' && s[1]) { /* any other escape: both characters, as they are */
    *p += 2;
    return 0x100 | (unsigned char)s[1];
  }
  *p += 1;
  return (unsigned char)s[0];
}

static bool same_regex(const char *a, const char *b) {
  while (*a && *b)
    if (regex_char(&a) != regex_char(&b)) return false;
  return !*a && !*b;
}

bool pa_pretok_name_of(const char *const *re, int n, bool ignore_merges, char *name, size_t cap) {
  const size_t rows = sizeof pretok_table / sizeof pretok_table[0];
  size_t found = rows;
  for (size_t i = 0; i < rows; i++) {
    int k = 0;
    while (k < n && k < PA_PRETOK_MAX_REGEX && pretok_table[i].regex[k] &&
           same_regex(re[k], pretok_table[i].regex[k]))
      k++;
    if (k != n || (k < PA_PRETOK_MAX_REGEX && pretok_table[i].regex[k])) continue;
    if (found == rows) found = i;
    if (pretok_table[i].ignore_merges == ignore_merges) {
      found = i;
      break;
    }
  }
  if (found == rows) return false;
  const char *all = pretok_table[found].names, *sp = strchr(all, ' ');
  snprintf(name, cap, "%.*s", (int)(sp ? (size_t)(sp - all) : strlen(all)), all);
  return true;
}

static char supported[600];
static once_flag supported_once = ONCE_FLAG_INIT;

/* "gpt2, llama-bpe, ... (and N more names of these families)": the first
 * name of each row, built once. */
static void list_supported(void) {
  size_t at = 0, rows = sizeof pretok_table / sizeof pretok_table[0];
  int more = 0;
  for (size_t i = 0; i < rows; i++) {
    const char *names = pretok_table[i].names, *sp = strchr(names, ' ');
    size_t len = sp ? (size_t)(sp - names) : strlen(names);
    for (const char *q = sp; q; q = strchr(q + 1, ' ')) more++;
    if (at < sizeof supported)
      at += (size_t)snprintf(supported + at, sizeof supported - at, "%s%.*s", i ? ", " : "", (int)len, names);
  }
  if (at < sizeof supported)
    snprintf(supported + at, sizeof supported - at, " and %d more names of these families", more);
}

const char *pa_pretok_supported(void) {
  call_once(&supported_once, list_supported);
  return supported;
}

static bool name_in(const char *names, const char *name) {
  size_t n = strlen(name);
  for (const char *p = names; *p;) {
    const char *end = strchr(p, ' ');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && memcmp(p, name, n) == 0) return true;
    p += len + (end ? 1 : 0);
  }
  return false;
}

/* Oniguruma's word characters (Hugging Face's Split regexes run on it):
 * PCRE2's \w leaves out marks and connector punctuation but "_" */
#define ONIG_WORD "[\\p{L}\\p{M}\\p{N}\\p{Pc}]"
#define ONIG_B "(?:(?<=" ONIG_WORD ")(?!" ONIG_WORD ")|(?<!" ONIG_WORD ")(?=" ONIG_WORD "))"

/* re with each \b outside a character class spelled as Oniguruma's word
 * boundary (malloc'd; NULL when out of memory). */
static char *onig_boundaries(const char *re) {
  size_t n = 0, len = strlen(re);
  for (size_t i = 0; i + 1 < len; i++)
    if (re[i] == '\\') n += re[++i] == 'b';
  char *out = malloc(len + n * strlen(ONIG_B) + 1);
  if (!out) return NULL;
  size_t o = 0;
  bool in_class = false;
  for (size_t i = 0; i < len; i++) {
    if (re[i] == '\\' && i + 1 < len) {
      if (re[i + 1] == 'b' && !in_class) {
        memcpy(out + o, ONIG_B, strlen(ONIG_B));
        o += strlen(ONIG_B);
      } else {
        out[o++] = re[i];
        out[o++] = re[i + 1];
      }
      i++;
      continue;
    }
    if (re[i] == '[')
      in_class = true;
    else if (re[i] == ']')
      in_class = false;
    out[o++] = re[i];
  }
  out[o] = '\0';
  return out;
}

int pa_pretok_create(const char *pre_name, pa_pretok **out, bool *ignore_merges) {
  *out = NULL;
  size_t row = sizeof pretok_table / sizeof pretok_table[0];
  for (size_t i = 0; i < sizeof pretok_table / sizeof pretok_table[0]; i++)
    if (name_in(pretok_table[i].names, pre_name)) row = i;
  if (row == sizeof pretok_table / sizeof pretok_table[0])
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "tokenizer.ggml.pre '%.60s' is not a supported pre-tokenizer (supported: %s)",
                    pre_name, pa_pretok_supported());
  pa_pretok *p = calloc(1, sizeof *p);
  if (!p) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
  for (int k = 0; k < PA_PRETOK_MAX_REGEX && pretok_table[row].regex[k]; k++) {
    int err;
    PCRE2_SIZE at;
    char *re = onig_boundaries(pretok_table[row].regex[k]);
    if (!re) {
      pa_pretok_free(p);
      return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
    }
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                     &err, &at, NULL);
    free(re);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      pa_pretok_free(p);
      return pa_error(PASADA_ERR_UNSUPPORTED, "pre-tokenizer '%s': regex error at %zu: %s",
                      pre_name, (size_t)at, (const char *)msg);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    p->code[p->n_code++] = code;
  }
  *ignore_merges = pretok_table[row].ignore_merges;
  *out = p;
  return PASADA_OK;
}

void pa_pretok_free(pa_pretok *p) {
  if (!p) return;
  for (int k = 0; k < p->n_code; k++) pcre2_code_free(p->code[k]);
  free(p);
}

typedef struct {
  const pa_pretok *p;
  pcre2_match_data *md;
  pa_pretok_emit emit;
  void *ctx;
} split_state;

/* Splits s[0..len) (valid UTF-8) with regex `level` and hands each piece to
 * the next level; past the last level, pieces go to emit. */
static int split(split_state *st, int level, const char *s, size_t len) {
  if (len == 0) return 0;
  if (level == st->p->n_code) return st->emit(st->ctx, s, len);
  size_t pos = 0, gap = 0; /* gap: start of the text no match has covered yet */
  while (pos < len) {
    int rc =
        pcre2_match(st->p->code[level], (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, st->md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return pa_error(PASADA_ERR_ARG, "pre-tokenizer: %s", (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(st->md);
    size_t ms = ov[0], me = ov[1];
    int e;
    if (me <= ms) { /* an empty match cuts the text there (superbpe's); then a character on */
      if (ms > gap && ms < len) {
        if ((e = split(st, level + 1, s + gap, ms - gap))) return e;
        gap = ms;
      }
      pos = ms + (size_t)pa_utf8_lead_len((unsigned char)s[ms < len ? ms : len - 1]);
      continue;
    }
    if (ms > gap && (e = split(st, level + 1, s + gap, ms - gap))) return e;
    if ((e = split(st, level + 1, s + ms, me - ms))) return e;
    pos = gap = me;
  }
  return gap < len ? split(st, level + 1, s + gap, len - gap) : 0;
}

int pa_pretok_split(const pa_pretok *p, const char *text, size_t len, pa_pretok_emit emit,
                    void *ctx) {
  split_state st = {p, NULL, emit, ctx};
  st.md = pcre2_match_data_create(4, NULL);
  if (!st.md) return pa_error(PASADA_ERR_NOMEM, "tokenizer: out of memory");
  /* PCRE2 in UTF mode needs valid UTF-8: runs of valid text go through the
   * regexes; each invalid byte is a pre-token of its own (byte-level BPE can
   * still encode it, so nothing is lost). */
  int rc = 0;
  size_t run = 0, i = 0;
  const unsigned char *u = (const unsigned char *)text;
  while (i < len && rc == 0) {
    int n = pa_utf8_valid_len(u + i, len - i);
    if (n > 0) {
      i += (size_t)n;
      continue;
    }
    if (i > run) rc = split(&st, 0, text + run, i - run);
    if (rc == 0) rc = emit(ctx, text + i, 1);
    run = ++i;
  }
  if (rc == 0 && len > run) rc = split(&st, 0, text + run, len - run);
  pcre2_match_data_free(st.md);
  return rc;
}
