# kvscope: one image for the web console (gunicorn), the Celery worker and migrations.
#   docker build -t kvscope .
#   docker compose up -d        (see compose.yaml and .env.example)
FROM python:3.11-slim

# PYTHONPATH=/app: always import the source tree in /app (next to templates/, static/ and
# staticfiles/, which settings.BASE_DIR points at) rather than the copy `pip install .`
# puts in site-packages; gunicorn, celery and manage.py then agree on BASE_DIR.
# NUMBA_CACHE_DIR: /app is read-only for the app user, so numba's cache=True needs a
# writable place for compiled kernels.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app \
    KVSCOPE_DATA_DIR=/data \
    NUMBA_CACHE_DIR=/tmp/numba-cache

WORKDIR /app

RUN groupadd --system --gid 10001 kvscope \
 && useradd --system --uid 10001 --gid kvscope --home-dir /home/kvscope --create-home \
        --shell /usr/sbin/nologin kvscope \
 && mkdir -p /data \
 && chown kvscope:kvscope /data

# Dependencies and the two packages, from pyproject.toml.
COPY pyproject.toml README.md ./
COPY analysis/ analysis/
COPY console/ console/
RUN pip install . \
 && rm -rf build ./*.egg-info

COPY templates/ templates/
COPY static/ static/
# the glossary page reads the definitions from the console's copy of metrics.md
COPY docs/metrics.md docs/
COPY manage.py ./
# the bundled sample log behind the "Analyze the bundled sample" button
COPY sample/ sample/

# Static files are collected into the image (served by WhiteNoise). The secrets below exist
# only for this one command and are not kept in the image; KVSCOPE_HASH_KEY is set so that
# settings does not generate a hash.key into /data at build time (it would be baked into
# every image and copied into every new data volume).
RUN SECRET_KEY=collectstatic-build-only-not-a-secret \
    KVSCOPE_HASH_KEY=collectstatic-build-only-not-a-secret \
    DJANGO_DEBUG=0 \
    python manage.py collectstatic --noinput \
 && python -m compileall -q analysis console manage.py
# (bytecode written once here: PYTHONDONTWRITEBYTECODE stops each process writing its own,
# and compiling ~80 modules from source costs every `manage.py analyze` ~60 ms)

USER kvscope

# Uploads, block-stream artifacts (and hash.key if KVSCOPE_HASH_KEY is unset). Web and
# workers must mount the same volume here.
VOLUME ["/data"]

EXPOSE 8000

CMD ["gunicorn", "console.wsgi:application", "-b", "0.0.0.0:8000", "-k", "gthread", "--threads", "4", "-w", "2", "--timeout", "300"]
