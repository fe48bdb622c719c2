#!/usr/bin/env python
"""Django's command-line utility for kvscope."""

import importlib
import os
import sys

# Commands that read the settings but neither the app registry nor a model: they run without
# django.setup(), which imports every app (the console's models, Celery, the web layer) and
# would double the start-up of a small `analyze`.
SETTINGS_ONLY_COMMANDS = {"analyze": "console.management.commands.analyze"}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    command = SETTINGS_ONLY_COMMANDS.get(sys.argv[1] if len(sys.argv) > 1 else "")
    if command is not None:
        importlib.import_module(command).Command().run_from_argv(sys.argv)
        quick_exit()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


def quick_exit() -> None:
    """End a one-shot command whose output is written: flushed, then gone without the
    interpreter's teardown, which spends ~0.13 s destroying numba's compiled kernels (LLVM's
    objects) a process that ends has no use for (16 % of a small trace's whole run). Only
    on success: a command that fails raises SystemExit before this, and tears down as ever.

    What an exit does besides tearing down objects is still done, in its order: the
    threads it waits for are joined (a worker pool's manager, reaping the pool's
    processes), then the exit functions run (multiprocessing's removes the pool's named
    semaphores: skipped, the resource tracker warns of them as leaked)."""
    import atexit
    import logging
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # (what Py_Finalize runs first; no public name)
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
