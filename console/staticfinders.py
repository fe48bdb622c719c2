"""A staticfiles finder for the plotly.js bundle that ships inside the plotly package.

The console draws its charts with the plotly.js of the installed plotly.py (the version the
figures are built for), served like any static file, with no CDN:

    STATICFILES_FINDERS = [
        "django.contrib.staticfiles.finders.FileSystemFinder",
        "django.contrib.staticfiles.finders.AppDirectoriesFinder",
        "console.staticfinders.PlotlyFinder",
    ]

and in a template:

    {% load static %}
    <script src="{% static 'vendor/plotly/plotly.min.js' %}"></script>

collectstatic then copies (and, with whitenoise's manifest storage, hashes and compresses)
the file into STATIC_ROOT/vendor/plotly/; in development whitenoise (WHITENOISE_USE_FINDERS)
or runserver find it through this finder. Only that one file of plotly/package_data/ is
exposed. The package is located without importing it (console.charts is the only module
that imports plotly).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from django.contrib.staticfiles import finders, utils
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

STATIC_DIR = "vendor/plotly"
FILENAME = "plotly.min.js"
STATIC_PATH = f"{STATIC_DIR}/{FILENAME}"


def package_data_dir() -> Path | None:
    """plotly/package_data of the installed plotly, or None when plotly is not installed."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "package_data"
        if (candidate / FILENAME).is_file():
            return candidate
    return None


class PlotlyFinder(finders.BaseFinder):
    """Finds `vendor/plotly/plotly.min.js`, plotly's bundled plotly.min.js."""

    def __init__(self, app_names=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.location = package_data_dir()
        self.storage = None
        if self.location is not None:
            self.storage = FileSystemStorage(location=self.location)
            self.storage.prefix = STATIC_DIR  # collectstatic and whitenoise prepend it

    def check(self, **kwargs):
        if self.location is None:
            return [
                Error(
                    f"plotly's {FILENAME} was not found: is plotly installed?",
                    hint="pip install plotly (a dependency of kvscope)",
                    id="console.E001",
                )
            ]
        return []

    # RemovedInDjango61Warning: the `all` keyword goes with Django 6.1.
    def find(self, path, find_all=False, **kwargs):
        if kwargs:
            find_all = self._check_deprecated_find_param(find_all=find_all, **kwargs)
        if self.location is None:
            return []
        if str(self.location) not in finders.searched_locations:
            finders.searched_locations.append(str(self.location))
        if path.replace("\\", "/").lstrip("/") != STATIC_PATH:
            return []
        match = str(self.location / FILENAME)
        return [match] if find_all else match

    def list(self, ignore_patterns):
        if self.storage is None:
            return
        if ignore_patterns and utils.matches_patterns(FILENAME, ignore_patterns):
            return
        yield FILENAME, self.storage


__all__ = ["STATIC_PATH", "PlotlyFinder", "package_data_dir"]
