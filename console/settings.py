"""kvscope settings. Everything configurable comes from the environment (see console/env.py
and .env.example); with nothing set, the console runs on the embedded default: SQLite and
Celery tasks executed eagerly in-process."""

from __future__ import annotations

import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from analysis.cores import usable_cores
from console.env import env_bool, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", True)

SECRET_KEY = env_secret("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DJANGO_DEBUG=0")
    # Development only: a fixed, obviously insecure key so sessions survive restarts.
    SECRET_KEY = "django-insecure-kvscope-development-only"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # runserver leaves static files to whitenoise (compressed plotly.js, cache headers), as
    # gunicorn does in production, instead of serving them itself
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "console",
]

MIDDLEWARE = [
    # outermost: the time the console spent, every other middleware's included
    "console.middleware.ServerTimingMiddleware",
    # first, so that every response gets the header, static files and errors too
    "console.middleware.ContentSecurityPolicyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # whitenoise, with plotly.js immutable under its versioned name in development too
    "console.middleware.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- data: database, files -------------------------------------------------------------
DATA_DIR = Path(env_str("KVSCOPE_DATA_DIR", str(BASE_DIR / "var"))).resolve()


def _conn_max_age() -> int:
    """Seconds a process keeps its database connection. The web (console.wsgi, which sets
    KVSCOPE_WEB_PROCESS) keeps it between requests: opening one per request cost each page
    ~10 ms of its own and PostgreSQL a backend's start. Workers, commands and tests close
    theirs after each task or request (0): a test database can then be dropped at the end
    of a run, with no idle worker connection left on it. (`manage.py runserver` sets
    Django up before it imports console.wsgi: the development server keeps 0.)"""
    if env_bool("KVSCOPE_WEB_PROCESS", False):
        return env_int("KVSCOPE_WEB_CONN_MAX_AGE", 60, minimum=0)
    return env_int("DATABASE_CONN_MAX_AGE", 0, minimum=0)


try:
    DATABASES = {
        "default": dj_database_url.parse(
            env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}"),
            conn_max_age=_conn_max_age(),
            # a kept connection is checked before a request uses it: a PostgreSQL
            # restart costs the next request a reconnection, not an error
            conn_health_checks=True,
        )
    }
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL: {exc}") from None
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # the embedded default: wait for a lock instead of failing (web + background thread)
    # (WAL: readers never wait for the writer)
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL"}
    )
    # tests on a file too: an in-memory shared-cache database locks whole tables, which the
    # embedded default never does
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-db.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# What pages would otherwise recompute per view (a replay trace's summary, a comparison's
# figure), keyed by the rows' ids and versions so an entry never goes stale: per process
# and in memory, as a miss only costs the one computation it saved.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "TIMEOUT": 3600,
        "OPTIONS": {"MAX_ENTRIES": 500},
    },
    # rendered parts of pages (an analysis's report sections, ~0.3 MB with their figures;
    # the compare picker): few entries, so a process holds tens of MB of them at most. Per
    # process, in memory: their keys name the rows' versions, not the templates', so a
    # cache that outlived a deploy would serve the old templates' HTML.
    "pages": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "kvscope-pages",
        "TIMEOUT": 3600,
        "OPTIONS": {"MAX_ENTRIES": 128},
    },
}

# Uploaded logs and block-stream artifacts. Web and workers must share this folder.
MEDIA_ROOT = DATA_DIR / "media"
ARTIFACT_ROOT = DATA_DIR / "artifacts"

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # plotly.min.js straight from the installed plotly package: no CDN, no copy in git
    "console.staticfinders.PlotlyFinder",
]
# Development serves static files straight from the source folders; production serves
# the collected, hashed and compressed copies (python manage.py collectstatic).
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
# Development only: plotly.js and its gzipped copy, made once from the installed package
# (console.staticfinders), as collectstatic does for production.
KVSCOPE_VENDOR_CACHE = DATA_DIR / "static-vendor"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# --- the analysis engine -------------------------------------------------------------
# Per-installation secret for the keyed block and segment hashes. Without it, stored keys
# could be matched against a guessed document. Set KVSCOPE_HASH_KEY on every machine of
# one installation (web and workers); otherwise one is generated once into DATA_DIR.
_hash_key = env_secret("KVSCOPE_HASH_KEY")
if not _hash_key:
    _key_file = DATA_DIR / "hash.key"
    if not _key_file.exists():
        _key_file.parent.mkdir(parents=True, exist_ok=True)
        _key_file.write_text(secrets.token_hex(32))
        _key_file.chmod(0o600)
    _hash_key = _key_file.read_text().strip()
KVSCOPE_HASH_KEY = _hash_key.encode()
if len(KVSCOPE_HASH_KEY) < 16:
    raise ImproperlyConfigured("KVSCOPE_HASH_KEY must be at least 16 characters")

# Uploads stream to temporary files on disk (never whole into memory) and stop past the cap.
KVSCOPE_UPLOAD_MAX_BYTES = env_int("KVSCOPE_UPLOAD_MAX_BYTES", 10 * 1024**3, minimum=1)
FILE_UPLOAD_HANDLERS = ["console.uploads.limits.SizeLimitedUploadHandler"]
# Files per upload: the handler drops those past this limit (no temporary file; their bytes
# still count against the size cap) and the form says so at its file field. Django's own
# count is off: past it Django answers a bare 400 before any form can speak.
KVSCOPE_UPLOAD_MAX_FILES = env_int("KVSCOPE_UPLOAD_MAX_FILES", 100, minimum=1)
DATA_UPLOAD_MAX_NUMBER_FILES = None
# A folder of kvscope's own (not the system temp folder): what a killed web process leaves
# there (and half-stored .part files in MEDIA_ROOT/raw) is found and removed once older
# than KVSCOPE_ORPHAN_SECONDS, longer than any upload request takes, at web start and by
# `manage.py purge_expired_raw` (which also removes raw files no upload refers to).
FILE_UPLOAD_TEMP_DIR = str(Path(env_str("KVSCOPE_UPLOAD_TEMP_DIR", "") or DATA_DIR / "tmp"))
Path(FILE_UPLOAD_TEMP_DIR).mkdir(parents=True, exist_ok=True)  # Django's checks want it
KVSCOPE_ORPHAN_SECONDS = env_int("KVSCOPE_ORPHAN_SECONDS", 6 * 3600, minimum=60)

# Parallel ingest: a plain log of at least KVSCOPE_PARALLEL_MIN_BYTES is split into this
# many line-aligned parts, one Celery task each (1 = never split). By default one part per
# usable core where a broker hands the parts to real workers (one worker runs as many side
# by side as its concurrency, the cores by default); with tasks run eagerly, in the web
# process, one after the other, parts would only add their merge: one.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
KVSCOPE_INGEST_PARTS = env_int(
    "KVSCOPE_INGEST_PARTS", usable_cores() if CELERY_BROKER_URL else 1, minimum=1
)
KVSCOPE_PARALLEL_MIN_BYTES = env_int("KVSCOPE_PARALLEL_MIN_BYTES", 256 * 1024**2, minimum=1)
# A worker's CPU priority below the web's (nice; 0: the same): ingests and analyses are
# batch work of seconds to minutes, a page is waited on. Where they share the cores a page
# is not queued behind an ingest; where the worker has them to itself nothing changes.
KVSCOPE_WORKER_NICE = env_int("KVSCOPE_WORKER_NICE", 10, minimum=0)

# Folder of extra tiktoken BPE files (<encoding>.tiktoken); cl100k_base ships offline.
KVSCOPE_TIKTOKEN_DIR = env_str("KVSCOPE_TIKTOKEN_DIR", "")
KVSCOPE_MAX_LISTED_ERRORS = env_int("KVSCOPE_MAX_LISTED_ERRORS", 1000, minimum=1)
# Bad input: past this many bad lines an ingest stops (0: no budget); one line may hold at
# most MAX_LINE_BYTES; a gzip log may inflate to MAX_INFLATED_BYTES and INFLATE_RATIO times
# its size (a zip bomb is stopped there).
KVSCOPE_MAX_BAD_LINES = env_int("KVSCOPE_MAX_BAD_LINES", 10_000, minimum=0)
KVSCOPE_MAX_LINE_BYTES = env_int("KVSCOPE_MAX_LINE_BYTES", 64 * 1024**2, minimum=1024)
KVSCOPE_MAX_INFLATED_BYTES = env_int("KVSCOPE_MAX_INFLATED_BYTES", 64 * 1024**3, minimum=1)
KVSCOPE_MAX_INFLATE_RATIO = env_int("KVSCOPE_MAX_INFLATE_RATIO", 200, minimum=1)
# blank lines allowed beyond one per line with content before an ingest stops (0: any)
KVSCOPE_MAX_BLANK_LINES = env_int("KVSCOPE_MAX_BLANK_LINES", 1_000_000, minimum=0)

# --- Celery --------------------------------------------------------------------------
# (CELERY_BROKER_URL is read above, with the parallel ingest that depends on it)
# No broker: run tasks in-process, so the embedded default needs no extra service.
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
# A chord (parallel ingest) needs somewhere to keep its parts' results: the broker's Redis.
CELERY_RESULT_BACKEND = (
    env_str(
        "CELERY_RESULT_BACKEND", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else ""
    )
    or None
)
CELERY_TASK_EAGER_PROPAGATES = True
# Embedded default: run those in-process tasks in a background thread, so a long ingest
# shows live progress instead of holding the upload request (tests turn it off).
KVSCOPE_EAGER_IN_THREAD = env_bool("KVSCOPE_EAGER_IN_THREAD", True)
CELERY_TASK_IGNORE_RESULT = True
# A task killed mid-way is redelivered, not lost.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Submitting while the broker is down fails within about two seconds (the job then says so
# and is queued again when a worker starts) instead of holding the upload request.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}
if CELERY_BROKER_URL.startswith("redis://"):
    # kombu's Redis transport with the fix that keeps a busy worker alive through a broker
    # restart (Celery/kombu 5.7 otherwise exit with "Unrecoverable error"; console.broker).
    # Not for rediss://: kombu picks its TLS defaults by that scheme name.
    CELERY_BROKER_TRANSPORT = "console.broker:RedisTransport"
if CELERY_BROKER_URL.startswith(("redis", "rediss")):
    # Redis has no consumer-death signal: a message unacknowledged this long (its worker was
    # killed) is handed to another worker. It must exceed the longest task; the check runs
    # every KVSCOPE_BROKER_RESTORE_EVERY seconds.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("KVSCOPE_BROKER_VISIBILITY_TIMEOUT", 6 * 3600, minimum=1),
        "unacked_restore_interval": env_int("KVSCOPE_BROKER_RESTORE_EVERY", 60, minimum=1),
        "unacked_restore_throttle": 1,
    }
# A running job beats (its row's heartbeat_at) every KVSCOPE_STALL_SECONDS / 6 seconds, at
# most every 30 s; past KVSCOPE_STALL_SECONDS without a beat it is "stalled": its worker
# died, the page offers Retry, and a redelivered task takes it over.
KVSCOPE_STALL_SECONDS = env_int("KVSCOPE_STALL_SECONDS", 180, minimum=1)
# `celery -A console beat` runs this; without beat, cron the purge_expired_raw command.
CELERY_BEAT_SCHEDULE = {
    "purge-expired-raw-uploads": {"task": "kvscope.purge_expired_raw", "schedule": 6 * 3600.0},
}

# --- auth, i18n ------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# After this many failed sign-ins within the lockout window an account is refused (an
# address after four times as many), even with the right password, until the window ends.
KVSCOPE_LOGIN_FAILURES = env_int("KVSCOPE_LOGIN_FAILURES", 5, minimum=1)
KVSCOPE_LOGIN_LOCKOUT_SECONDS = env_int("KVSCOPE_LOGIN_LOCKOUT_SECONDS", 900, minimum=1)
# Sessions end after this long (default a working day), signed in or not.
SESSION_COOKIE_AGE = env_int("KVSCOPE_SESSION_SECONDS", 8 * 3600, minimum=60)

# --- HTTPS and security headers ---------------------------------------------------------
# Production (DJANGO_DEBUG=0) is HTTPS-only by default: secure cookies, a redirect to
# https, HSTS. Behind a TLS-terminating proxy set KVSCOPE_BEHIND_PROXY=1 (it must set
# X-Forwarded-Proto); KVSCOPE_HTTPS=0 serves plain HTTP (a private network only).
KVSCOPE_HTTPS = env_bool("KVSCOPE_HTTPS", not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = KVSCOPE_HTTPS
SECURE_SSL_REDIRECT = KVSCOPE_HTTPS
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # the container's own health check speaks HTTP
SECURE_HSTS_SECONDS = env_int("KVSCOPE_HSTS_SECONDS", 365 * 86400 if KVSCOPE_HTTPS else 0,
                              minimum=0)  # fmt: skip
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = bool(SECURE_HSTS_SECONDS)
KVSCOPE_BEHIND_PROXY = env_bool("KVSCOPE_BEHIND_PROXY", False)
if KVSCOPE_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"expected_refusals": {"()": "console.logfilters.ExpectedRefusals"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's default config gives "django" a console handler of its own (DEBUG only)
        # and mail_admins (no ADMINS here): every django.* record was printed twice, once
        # there and once by the root's handler it propagates to. One handler: the root's.
        "django": {"handlers": [], "level": "INFO"},
        # a 403 or 404 is one warning line, without the exception's traceback
        "django.request": {"filters": ["expected_refusals"]},
    },
}
