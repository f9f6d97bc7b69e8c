# syntax=docker/dockerfile:1
#
# kube-async-scheduler image. Build from the repository root:
#   docker build -t kube-async-scheduler:0.1.0 .
# (without Docker: bash hack/build-image.sh, which builds this same file with buildah on a
# Debian base of its own, passing PYTHON_IMAGE).
#
# Two stages. The builder installs the locked dependencies by hash into /opt/venv
# (requirements.lock, made by hack/lock.sh: a package or file not in it fails the build),
# builds the package's wheel with the locked setuptools and installs it with --no-deps,
# writes the SBOM, and assembles the final root filesystem: the venv, the interpreter and
# its standard library, and the shared libraries those load (hack/image/assemble_rootfs.py).
# The final stage is that folder on an empty image: no shell, no pip, no package manager.
# It runs as the numeric non-root user 65532, the UID the Helm chart's securityContext
# sets, and works on a read-only root filesystem (bytecode is compiled at build time).

# The base for Docker users, pinned by digest (python:3.11-slim's multi-platform index).
# Refresh: `docker buildx imagetools inspect python:3.11-slim` (or `crane digest
# python:3.11-slim`) and replace the sha256 below; docs/security.md "Supply chain".
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# the builder's tools (setuptools, the SBOM generator) in a venv of their own: never in
# the image
COPY requirements.lock requirements-build.lock ./
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --only-binary=:all: -r requirements-build.lock \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install --require-hashes --only-binary=:all: -r requirements.lock
# README is optional (pyproject names it; setuptools only warns when it is missing)
COPY pyproject.toml README* ./
COPY scheduler ./scheduler
COPY hack/image ./hack/image
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/venv/bin/pip install --no-deps --compile /wheels/*.whl \
 && /opt/venv/bin/pip uninstall --yes pip setuptools \
 && mkdir -p /usr/share/doc/kube-async-scheduler \
 && /opt/build/bin/cyclonedx-py environment --output-format JSON --output-reproducible \
      --output-file /usr/share/doc/kube-async-scheduler/sbom.cdx.json /opt/venv \
 && python -m compileall -q "$(python -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" \
 && python hack/image/assemble_rootfs.py --venv /opt/venv --out /rootfs \
      --add /usr/share/doc/kube-async-scheduler/sbom.cdx.json

FROM scratch
LABEL org.opencontainers.image.title="kube-async-scheduler" \
      org.opencontainers.image.description="A Kubernetes secondary scheduler in Python with asynchronous preemption" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /rootfs/ /
ENV PATH=/opt/venv/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# /metrics, /healthz, /livez, /readyz (plain HTTP)
EXPOSE 10259
ENTRYPOINT ["kube-async-scheduler"]
CMD ["run", "--config", "/etc/kube-async-scheduler/config.yaml"]
