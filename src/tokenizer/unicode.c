/* unicode.c: the Unicode facts the tokenizers share: White_Space, and each
 * code point's lowercase (lower_table.h). */
#include "tokenizer/lower_table.h"
#include "tokenizer/tokenizer_internal.h"

bool pa_is_white_space(uint32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

int pa_lowercase(uint32_t c, uint32_t out[3]) {
  for (size_t i = 0; i < sizeof LOWER_MULTI / sizeof LOWER_MULTI[0]; i++) {
    if (LOWER_MULTI[i].cp != c) continue;
    int n = 0;
    while (n < 3 && LOWER_MULTI[i].lower[n]) {
      out[n] = LOWER_MULTI[i].lower[n];
      n++;
    }
    return n;
  }
  size_t lo = 0, hi = sizeof LOWER_RUNS / sizeof LOWER_RUNS[0]; /* the last run starting <= c */
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (LOWER_RUNS[mid].first <= c)
      lo = mid;
    else
      hi = mid;
  }
  if (c >= LOWER_RUNS[lo].first && c <= LOWER_RUNS[lo].last &&
      (c - LOWER_RUNS[lo].first) % LOWER_RUNS[lo].step == 0)
    c = (uint32_t)((int32_t)c + LOWER_RUNS[lo].delta);
  out[0] = c;
  return 1;
}
