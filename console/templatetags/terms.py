"""The glossary on the pages: {% term "ceiling" %} (or {% term "ceiling" "the ceiling" %})
is the word as a link to its definition on the glossary page, its one-line summary on
hover; `definition` shows a metrics.md passage (its `code` and **bold**) on that page."""

from __future__ import annotations

import re

from django import template
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from console.glossary import UnknownTerm, glossary

register = template.Library()
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


@register.simple_tag
def term(name: str, shown: str | None = None) -> SafeString:
    """`name` (or `shown`) linked to its glossary entry; an unknown name stops the page
    from rendering, so a typo is caught by any test that renders it."""
    try:
        entry = glossary().lookup(name)
    except UnknownTerm as exc:
        raise template.TemplateSyntaxError(str(exc)) from None
    return format_html(
        '<a class="term" href="{}#{}" title="{}">{}</a>',
        reverse("glossary"),
        entry.slug,
        entry.summary,
        name if shown is None else shown,
    )


@register.filter
def definition(markdown: str) -> SafeString:
    """A metrics.md passage as HTML: escaped, its code spans and bold kept."""
    html = _CODE.sub(r"<code>\1</code>", escape(markdown))
    return mark_safe(_BOLD.sub(r"<strong>\1</strong>", html))  # the text is escaped above
