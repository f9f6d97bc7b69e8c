# syntax=docker/dockerfile:1
#
# kube-async-scheduler image. Build from the repository root:
#   docker build -t kube-async-scheduler:0.1.0 .
#
# Two stages: the builder makes a wheel of the package and installs it with its
# dependencies into /opt/venv; the final stage is a clean python:3.11-slim with only that
# venv (no compiler, no source tree, no pip). It runs as the numeric non-root user
# 65532, the UID the Helm chart's securityContext sets, and works on a read-only root
# filesystem (bytecode is compiled at build time).

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
RUN python -m venv /opt/venv
# README is optional (pyproject names it; setuptools only warns when it is missing)
COPY pyproject.toml README* ./
COPY scheduler ./scheduler
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && /opt/venv/bin/pip install --no-cache-dir --compile /wheels/*.whl \
 && /opt/venv/bin/pip uninstall --yes pip setuptools

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kube-async-scheduler" \
      org.opencontainers.image.description="A Kubernetes secondary scheduler in Python with asynchronous preemption" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 scheduler \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin scheduler
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# /metrics, /healthz, /livez, /readyz (plain HTTP)
EXPOSE 10259
ENTRYPOINT ["kube-async-scheduler"]
CMD ["run", "--config", "/etc/kube-async-scheduler/config.yaml"]
