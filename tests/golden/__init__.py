"""Golden reports: the JSON `manage.py analyze` wrote before the renovation of #13.

The renovation moves code and must not change a single byte of what it computes;
tests/analysis/test_golden_reports.py (the engine alone) and
tests/console/test_golden_reports.py (the command line) compare against these files.
Rewrite them only for a change that means to alter a number, with

    KVSCOPE_HASH_KEY=golden-reports-fixed-key .venv/bin/python -m tests.golden

and say in the commit which numbers moved and why. The figures drawn from them are pinned
the same way in figures-*.json (tests/golden/figures.py says how to rewrite those).
"""
