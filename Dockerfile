# membot: one image for every role (run, receive, worker, api). Build: docker build -t membot .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/opt/membot/.venv

RUN pip install --no-cache-dir uv \
    && useradd --system --home-dir /opt/membot --shell /usr/sbin/nologin membot

WORKDIR /opt/membot
# Dependencies first (a layer that changes only with uv.lock), then the code.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project
COPY src ./src
# DATA_DIR private (0700): it holds every conversation in clear text. A new volume mounted
# there takes this directory's owner and mode.
RUN uv sync --locked --no-dev && install -d -m 0700 -o membot -g membot /opt/membot/data

USER membot
ENV PATH="/opt/membot/.venv/bin:$PATH" DATA_DIR=/opt/membot/data
VOLUME ["/opt/membot/data"]
ENTRYPOINT ["membot"]
CMD ["run"]
