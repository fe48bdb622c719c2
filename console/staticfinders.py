"""A staticfiles finder for the plotly.js bundle that ships inside the plotly package.

The console draws its charts with the plotly.js of the installed plotly.py (the version the
figures are built for), served like any static file, with no CDN:

    STATICFILES_FINDERS = [
        "django.contrib.staticfiles.finders.FileSystemFinder",
        "django.contrib.staticfiles.finders.AppDirectoriesFinder",
        "console.staticfinders.PlotlyFinder",
    ]

and in a template:

    {% load kvscope %}
    <script src="{% plotly_src %}"></script>

The file is exposed under a versioned name, `vendor/plotly/plotly-<version>.min.js`, so its
URL changes with every plotly upgrade and browsers may cache it forever (4.8 MB; see
console.middleware.StaticFilesMiddleware). collectstatic copies it (and, with whitenoise's
manifest storage, hashes and gzips it) into STATIC_ROOT/vendor/plotly/. In development
(whitenoise finding files through the finders) there is no collectstatic, so `find()`
answers with a copy kept next to its gzipped twin in KVSCOPE_VENDOR_CACHE: whitenoise serves
the .gz to browsers that accept gzip (~1.4 MB instead of 4.8). Only that one file of
plotly/package_data/ is exposed. The package is located without importing it
(console.charts is the only module that imports plotly).
"""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.util
import os
import shutil
import threading
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles import finders, utils
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

SOURCE_NAME = "plotly.min.js"  # its name inside plotly/package_data
STATIC_DIR = "vendor/plotly"


def _plotly_version() -> str:
    try:
        return importlib.metadata.version("plotly")
    except importlib.metadata.PackageNotFoundError:
        return "missing"


FILENAME = f"plotly-{_plotly_version()}.min.js"
STATIC_PATH = f"{STATIC_DIR}/{FILENAME}"


def package_data_dir() -> Path | None:
    """plotly/package_data of the installed plotly, or None when plotly is not installed."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "package_data"
        if (candidate / SOURCE_NAME).is_file():
            return candidate
    return None


class _VersionedStorage(FileSystemStorage):
    """plotly/package_data, where FILENAME (the versioned name) is SOURCE_NAME."""

    def path(self, name: str) -> str:
        return super().path(SOURCE_NAME if name == FILENAME else name)


_copy_lock = threading.Lock()
_served: dict[Path, Path] = {}  # source -> the copy find() answers with, once made


def compressed_copy(source: Path) -> Path | None:
    """A copy of source named FILENAME with a gzipped twin (FILENAME.gz) beside it, in
    KVSCOPE_VENDOR_CACHE; made once (it is kept while the source's size and time match).
    None when the folder cannot be written: the file is then served uncompressed."""
    with _copy_lock:
        if source in _served:
            return _served[source]
        folder = Path(settings.KVSCOPE_VENDOR_CACHE) / "plotly"
        target, packed = folder / FILENAME, folder / f"{FILENAME}.gz"
        src = source.stat()
        try:
            fresh = (
                target.stat().st_size == src.st_size
                and target.stat().st_mtime == src.st_mtime
                and packed.stat().st_mtime >= src.st_mtime
            )
        except OSError:
            fresh = False
        if not fresh:
            try:
                folder.mkdir(parents=True, exist_ok=True)
                # temporary names, then rename: other processes never see half a file
                tmp = f".{os.getpid()}.{threading.get_ident()}.tmp"
                shutil.copy2(source, folder / (FILENAME + tmp))
                data = source.read_bytes()
                (folder / (FILENAME + ".gz" + tmp)).write_bytes(
                    gzip.compress(data, compresslevel=9, mtime=0)
                )
                os.replace(folder / (FILENAME + tmp), target)
                os.replace(folder / (FILENAME + ".gz" + tmp), packed)
            except OSError:
                return None
        _served[source] = target
        return target


class PlotlyFinder(finders.BaseFinder):
    """Finds `vendor/plotly/plotly-<version>.min.js`, plotly's bundled plotly.min.js."""

    def __init__(self, app_names=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.location = package_data_dir()
        self.storage = None
        if self.location is not None:
            self.storage = _VersionedStorage(location=self.location)
            self.storage.prefix = STATIC_DIR  # collectstatic and whitenoise prepend it

    def check(self, **kwargs):
        if self.location is None:
            return [
                Error(
                    f"plotly's {SOURCE_NAME} was not found: is plotly installed?",
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
        source = self.location / SOURCE_NAME
        match = str(compressed_copy(source) or source)
        return [match] if find_all else match

    def list(self, ignore_patterns):
        # collectstatic copies the package's own file (production compresses it itself)
        if self.storage is None:
            return
        if ignore_patterns and utils.matches_patterns(FILENAME, ignore_patterns):
            return
        yield FILENAME, self.storage


__all__ = ["STATIC_PATH", "PlotlyFinder", "compressed_copy", "package_data_dir"]
