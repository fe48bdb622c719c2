"""kvscope's web console: the Django project and its app."""

from console.celery import app as celery_app

__all__ = ["celery_app"]
