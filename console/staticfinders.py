"""A staticfiles finder for plotly.js: the console's charts need nothing else.

    STATICFILES_FINDERS = [
        "django.contrib.staticfiles.finders.FileSystemFinder",
        "django.contrib.staticfiles.finders.AppDirectoriesFinder",
        "console.staticfinders.PlotlyFinder",
    ]

and in a template:

    {% load kvscope %}
    <script src="{% plotly_src %}"></script>

Which file. The figures are built by the installed plotly.py for the plotly.js it bundles
(plotly/package_data/plotly.min.js, 4.8 MB, every trace type). The console draws only
scatter, bar and heatmap traces, so it serves plotly.js's own *cartesian* bundle of that same
release, kept in console/vendor/ (the npm package plotly.js-cartesian-dist-min, MIT; 1.5 MB:
a browser parses and runs it in about a third of the time, which is most of a page's load).
When the installed plotly.py bundles another plotly.js release than the vendored one, the
full bundle of the package is served instead, and `manage.py check` warns (console.W001):
update console/vendor/ to that release.

How. The file is exposed under a versioned name, `vendor/plotly/plotly-cartesian-<plotly.js
version>.min.js` (or `plotly-<version>.min.js` for the full bundle), so its URL changes with
every release and browsers may cache it forever (console.middleware.StaticFilesMiddleware).
collectstatic copies it (and, with whitenoise's manifest storage, hashes and gzips it) into
STATIC_ROOT/vendor/plotly/. In development (whitenoise finding files through the finders)
there is no collectstatic, so `find()` answers with a copy kept next to its gzipped twin in
KVSCOPE_VENDOR_CACHE: whitenoise serves the .gz to browsers that accept gzip. plotly is
located without importing it (only console.plotting and the wings' charts import it).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import re
import shutil
import threading
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles import finders, utils
from django.core import checks
from django.core.files.storage import FileSystemStorage

PACKAGE_NAME = "plotly.min.js"  # the full bundle, inside plotly/package_data
VENDORED = Path(__file__).resolve().parent / "vendor" / "plotly-cartesian.min.js"
# the trace types of the cartesian bundle (its README); the wings' charts draw a subset
CARTESIAN_TRACES = frozenset({
    "bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour",
    "image", "pie", "scatter", "scatterternary", "violin",
})  # fmt: skip
STATIC_DIR = "vendor/plotly"
_VERSION = re.compile(rb"plotly\.js(?: \([^)]*\))? v(\d+\.\d+\.\d+\S*)")


def package_data_dir() -> Path | None:
    """plotly/package_data of the installed plotly, or None when plotly is not installed."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "package_data"
        if (candidate / PACKAGE_NAME).is_file():
            return candidate
    return None


def js_version(path: Path) -> str | None:
    """The plotly.js release a bundle declares in its first lines ("plotly.js v4.1.1",
    "plotly.js (cartesian - minified) v4.1.1"), or None."""
    try:
        with open(path, "rb") as fh:
            match = _VERSION.search(fh.read(512))
    except OSError:
        return None
    return match[1].decode() if match else None


def choose_bundle(vendored: Path, package_dir: Path | None) -> tuple[Path, str] | None:
    """(file, versioned name): the vendored cartesian bundle when it is of the release
    plotly.py bundles, else plotly.py's full bundle; None without plotly."""
    if package_dir is None:
        return None
    full = package_dir / PACKAGE_NAME
    release = js_version(full) or "unknown"
    if vendored.is_file() and js_version(vendored) == release:
        return vendored, f"plotly-cartesian-{release}.min.js"
    return full, f"plotly-{release}.min.js"


_chosen = choose_bundle(VENDORED, package_data_dir())
SOURCE: Path | None = _chosen[0] if _chosen else None
FILENAME = _chosen[1] if _chosen else "plotly.min.js"
STATIC_PATH = f"{STATIC_DIR}/{FILENAME}"


class _VersionedStorage(FileSystemStorage):
    """The chosen bundle's folder, where FILENAME (the versioned name) is the bundle."""

    def path(self, name: str) -> str:
        assert SOURCE is not None
        return super().path(SOURCE.name if name == FILENAME else name)


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
    """Finds STATIC_PATH (`vendor/plotly/plotly-cartesian-<version>.min.js`): the bundle
    choose_bundle() picked."""

    def __init__(self, app_names=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.location = SOURCE.parent if SOURCE is not None else None
        self.storage = None
        if self.location is not None:
            self.storage = _VersionedStorage(location=self.location)
            self.storage.prefix = STATIC_DIR  # collectstatic and whitenoise prepend it

    def check(self, **kwargs):
        if SOURCE is None:
            return [
                checks.Error(
                    f"plotly's {PACKAGE_NAME} was not found: is plotly installed?",
                    hint="pip install plotly (a dependency of kvscope)",
                    id="console.E001",
                )
            ]
        if SOURCE != VENDORED:
            release = js_version(SOURCE)
            return [
                checks.Warning(
                    f"console/vendor/{VENDORED.name} is plotly.js {js_version(VENDORED)}, "
                    f"not {release} (the release plotly.py bundles): the full 4.8 MB bundle "
                    "is served instead",
                    hint=f"replace it with plotly.js-cartesian-dist-min {release}'s "
                    "plotly-cartesian.min.js",
                    id="console.W001",
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
        match = str(compressed_copy(SOURCE) or SOURCE)
        return [match] if find_all else match

    def list(self, ignore_patterns):
        # collectstatic copies the package's own file (production compresses it itself)
        if self.storage is None:
            return
        if ignore_patterns and utils.matches_patterns(FILENAME, ignore_patterns):
            return
        yield FILENAME, self.storage


__all__ = [
    "CARTESIAN_TRACES", "SOURCE", "STATIC_PATH", "PlotlyFinder", "choose_bundle",
    "compressed_copy", "js_version", "package_data_dir",
]  # fmt: skip
