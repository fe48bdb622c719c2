"""An analysis's stored figures: drawn once when its job finishes, read by its page, and
redrawn once when the charts have changed since they were stored.

Analysis.figures holds [name, figure] pairs in drawing order (PostgreSQL's jsonb does not
keep a dict's key order), each figure carrying the CHARTS_VERSION it was drawn with under
VERSION_KEY. A page strips that key again, so what it sends is the figure alone."""

from __future__ import annotations

import logging

from console.models import Analysis
from console.uploads.charts import CHARTS_VERSION, report_figures

VERSION_KEY = "charts_version"
log = logging.getLogger(__name__)

StoredFigures = list[list]  # [[name, figure], ...] as Analysis.figures holds them


def draw(report: dict) -> StoredFigures:
    """A report's figures as they are stored: [name, figure] pairs in drawing order, each
    figure stamped with the charts' version."""
    return [
        [name, {**figure, VERSION_KEY: CHARTS_VERSION}]
        for name, figure in report_figures(report).items()
    ]


def is_current(stored: StoredFigures | None) -> bool:
    """Whether stored figures were drawn by the charts of today (none stored: not)."""
    return stored is not None and all(
        figure.get(VERSION_KEY) == CHARTS_VERSION for _, figure in stored
    )


def page_figures(analysis: Analysis) -> dict[str, dict]:
    """The figures the analysis page shows, {name: figure} in drawing order. Drawn from the
    stored report and saved when none are stored or they are older than the charts, so
    each analysis is redrawn once per change of the charts, never on every view."""
    if not analysis.report:
        return {}
    if not is_current(analysis.figures):
        try:
            redrawn = draw(analysis.report)
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError):
            # a row stored before the form had bounds (or by an older report shape) may
            # hold what today's charts cannot draw: its page keeps the figures it has,
            # never a 500; they are stamped current, so it is tried once, not every view
            log.warning("analysis %s: stored figures kept, redrawing failed", analysis.pk,
                        exc_info=True)  # fmt: skip
            redrawn = [[name, {**figure, VERSION_KEY: CHARTS_VERSION}]
                       for name, figure in analysis.figures or []]  # fmt: skip
        analysis.figures = redrawn
        Analysis.objects.filter(pk=analysis.pk).update(figures=redrawn)
    return {
        name: {key: value for key, value in figure.items() if key != VERSION_KEY}
        for name, figure in analysis.figures or []
    }
