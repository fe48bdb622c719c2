from pathlib import Path

from django.apps import AppConfig
from django.core.cache import caches
from django.utils.autoreload import file_changed


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "kvscope console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # every process knows every task by name once Django is set up (a worker by
        # Celery's discovery too), so a service queues a job by its name and never
        # imports a task module (console.jobs.task_named)
        # and the audit trail hears every sign-in, and every one refused, whichever page
        # (or test client) signs in (console.signin's receivers)
        import console.benchmarks.tasks
        import console.signin
        import console.uploads.tasks  # noqa: F401

        file_changed.connect(forget_rendered_pages)


def forget_rendered_pages(sender, file_path: Path, **kwargs) -> None:
    """The development server reloads an edited template without a restart, but the pages
    cache (settings.CACHES["pages"]) would go on serving what the old one rendered: an
    edited template empties it. (Returns None: the reload goes on as Django decides.)"""
    if Path(file_path).suffix == ".html":
        caches["pages"].clear()
