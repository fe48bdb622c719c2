from django.apps import AppConfig


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
