"""WSGI entry point (gunicorn console.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# what settings keep apart for the web process: its database connections are kept
os.environ["KVSCOPE_WEB_PROCESS"] = "1"
application = get_wsgi_application()


def _purge_crash_leftovers() -> None:
    """A web process killed mid-upload leaves its temporary file (the whole upload so far)
    and maybe a half-stored .part: removed when the web starts again."""
    from console.leftovers import purge_crash_leftovers

    purge_crash_leftovers()


_purge_crash_leftovers()
