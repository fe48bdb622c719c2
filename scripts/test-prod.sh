#!/usr/bin/env bash
# The test suite on the production shape: PostgreSQL, Redis as the Celery broker, and a
# real Celery worker started here (and stopped on exit). The worker and pytest share the
# test database, the data folder and the hash key.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PGURL=${KVSCOPE_TEST_PG:-postgres://postgres@127.0.0.1:5432}
DB=${KVSCOPE_CI_DB:-kvscope_ci}  # several checkouts on one machine: give each its own
export CELERY_BROKER_URL=${KVSCOPE_TEST_BROKER:-redis://127.0.0.1:6379/15}
export KVSCOPE_DATA_DIR=$(mktemp -d /tmp/kvscope-ci-data.XXXXXX)
export KVSCOPE_HASH_KEY=ci-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export DJANGO_DEBUG=1

# pytest-django uses test_<name>; start from an empty one so old schemas never linger.
"$PY" - "$PGURL" "test_$DB" <<'PYEOF'
import sys, psycopg
with psycopg.connect(sys.argv[1] + "/postgres", autocommit=True) as conn:
    conn.execute(f'DROP DATABASE IF EXISTS "{sys.argv[2]}" WITH (FORCE)')
PYEOF
"$PY" -m celery -A console purge -f >/dev/null

worker_log="$KVSCOPE_DATA_DIR/worker.log"
DATABASE_URL="$PGURL/test_$DB" "$PY" -m celery -A console worker -l info -c 2 \
  --hostname "kvscope-ci@%h" >"$worker_log" 2>&1 &
worker=$!
cleanup() {
  kill "$worker" 2>/dev/null || true
  wait "$worker" 2>/dev/null || true
  rm -rf "$KVSCOPE_DATA_DIR"
}
trap cleanup EXIT

# wait for the worker to answer before testing
for _ in $(seq 60); do
  if "$PY" -m celery -A console inspect ping -t 1 >/dev/null 2>&1; then break; fi
  kill -0 "$worker" 2>/dev/null || { cat "$worker_log"; echo "celery worker died"; exit 1; }
  sleep 1
done

status=0
DATABASE_URL="$PGURL/$DB" "$PY" -m pytest --reuse-db "$@" || status=$?
if [ $status -ne 0 ]; then
  echo "---- worker log (tail) ----"; tail -n 60 "$worker_log"
fi
exit $status
