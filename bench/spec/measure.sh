#!/usr/bin/env bash
# measure.sh: the speculative-decoding numbers of docs/benchmarks.md
# ("Speculative decoding"), as JSON files in OUT (default bench/results/spec):
#   bench-lookup-*.json   pasada bench --lookup on SmolLM2-135M: a built-in type-hint
#                         edit, bench/spec/edit.txt (renames), bench/spec/summarise.txt
#   bench-draft-*.json    pasada bench --draft: the 1B synthetic shape cut to 4 layers
#                         as the draft of the same 4 layers padded back to 16 with
#                         zero-output layers (acceptance forced by construction,
#                         tests/tools/gguf_layers.py), and SmolLM2 drafting for itself
#   serve-edit-*-rN.json  bench/serve-load at 1, 2 and 16 users on
#                         bench/spec-edit.prompts.jsonl: plain, --lookup (drafts while
#                         one sequence runs) and --lookup --spec-max-seqs 2, in turn
# usage: bench/spec/measure.sh [BUILD_DIR] [OUT]   (2 threads; ~20 minutes)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build}/pasada
OUT=${2:-bench/results/spec}
PY=~/.cache/pasada/test-venv/bin/python
M=~/.cache/pasada/models/SmolLM2-135M-Instruct.Q4_1.gguf
S=~/.cache/pasada/synthetic/llama-3.2-1b-q4_k_m.gguf
T=${TMPDIR:-/tmp}
mkdir -p "$OUT"

# the 1B pair: draft = first 4 layers, target = those 4 + 12 zero-output layers
[ -f "$T/l1b-keep4.gguf" ] || $PY tests/tools/gguf_layers.py "$S" "$T/l1b-keep4.gguf" keep 4
[ -f "$T/l1b-keep4-pad12.gguf" ] || $PY tests/tools/gguf_layers.py "$T/l1b-keep4.gguf" "$T/l1b-keep4-pad12.gguf" pad 12

for text in default edit summarise; do
  arg=(); [ "$text" = default ] || arg=(--text "bench/spec/$text.txt")
  $BIN bench -m "$M" --lookup -n 256 -r 5 -t 2 -q --json "${arg[@]}" > "$OUT/bench-lookup-$text.json"
done
for k in 2 4; do
  $BIN bench -m "$T/l1b-keep4-pad12.gguf" --draft "$T/l1b-keep4.gguf" --draft-max $k -n 64 -r 3 -t 2 -q \
    --json > "$OUT/bench-draft-1b-k$k.json"
done
$BIN bench -m "$M" --draft "$M" -n 128 -r 3 -t 2 -q --json > "$OUT/bench-draft-smol-self.json"

for r in 1 2; do
  for mode in off lookup lookup2; do
    case $mode in off) args="";; lookup) args="--lookup";; lookup2) args="--lookup --spec-max-seqs 2";; esac
    $PY bench/serve-load --launch pasada --bin "$BIN" --threads 2 --levels 1,2,16 --requests 32 \
      --prompts bench/spec-edit.prompts.jsonl "--pasada-args=$args" --json "$OUT/serve-edit-$mode-r$r.json"
  done
done
