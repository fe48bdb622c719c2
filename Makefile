# The README's two commands: `make run` and `make test`. Everything else is a helper.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run install test test-prod lint format sample clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

# bytecode for the project's own modules too (pip writes it for the packages it installs):
# where PYTHONDONTWRITEBYTECODE is set, each command would compile them from source again
install: $(VENV)/.installed
	$(PY) -m compileall -q analysis console bench manage.py

## run: set everything up and start the console on the embedded default (SQLite, eager Celery)
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py bootstrap
	@echo ""
	@echo "kvscope is starting: sign in at http://$(HOST):$(PORT)/accounts/login/"
	@echo "More accounts:  $(PY) manage.py adduser NAME --role analyst|approver|auditor"
	@echo "From the command line:  $(PY) manage.py analyze sample/chat-sample.jsonl.gz --json report.json"
	@echo ""
	$(PY) manage.py runserver $(HOST):$(PORT)

## test: lint, type-check the engine, its tests without Django, then the console's on the embedded default
test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -p no:django tests/analysis
	$(PY) -m pytest tests/console

## test-prod: the suite against PostgreSQL + Redis with a real Celery worker
test-prod: install
	bash scripts/test-prod.sh tests/console

lint: install
	$(VENV)/bin/ruff check .

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

sample: install
	$(PY) -m bench.generate chat --requests 2000 --out sample/chat-sample.jsonl.gz

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache .ruff_cache
