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
        return
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
