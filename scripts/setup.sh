#!/usr/bin/env bash
# setup.sh: installs what clover needs on Debian 12 (run as root), then, with
# --test, the Python test tools into .venv (llama.cpp's gguf, Hugging Face
# tokenizers, the openai client, pytest). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config clang libclang-rt-14-dev
          libjansson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev libedit-dev python3 python3-venv chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--test" ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
fi
