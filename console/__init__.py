"""kvscope's web console: the Django project and its app."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.celery import app as celery_app

__all__ = ["celery_app"]


def __getattr__(name: str) -> Any:
    # Celery's app comes with the first module that queues a job (console.jobs, which every
    # Django process imports at ready()) or with `celery -A console`: not here, where it
    # would cost a settings-only command (manage.py analyze) a tenth of a second.
    if name == "celery_app":
        from console.celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
