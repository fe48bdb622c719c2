"""The glossary page: every term the pages use, alphabetically, with metrics.md's text."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.glossary import glossary
from console.roles import reader_required


@reader_required
def glossary_view(request: HttpRequest) -> HttpResponse:
    return render(request, "glossary.html", {"terms": glossary().terms})
