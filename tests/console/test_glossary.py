"""The glossary: the console's copy of metrics.md is the shared contract, its definitions
are read from it as written, every term a page uses is defined, and a term on a page is a
link to its definition with its one-line summary on hover."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.template import Context, Template, TemplateSyntaxError
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from console.glossary import (
    METRICS_PATH,
    PROSE_TERMS,
    GlossaryError,
    Passage,
    UnknownTerm,
    glossary,
    parse,
)
from tests.console.factories import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
# the shared contract, next to the repo (absent in a clone elsewhere)
SHARED_METRICS = ROOT.parent / "shared" / "docs" / "metrics.md"
USED_TERM = re.compile(r"""\{%\s*term\s+"([^"]+)\"""")


def test_the_copy_is_the_shared_contract():
    copy = (ROOT / "docs" / "metrics.md").read_bytes()
    assert METRICS_PATH == ROOT / "docs" / "metrics.md"  # what the console reads
    if SHARED_METRICS.exists():
        assert copy == SHARED_METRICS.read_bytes(), "docs/metrics.md: copy ../shared's again"
    # without ../shared: the copy is the contract, all nine sections, each bolded term read
    text = copy.decode("utf-8")
    assert text.startswith("# What the analyzer measures — definitions\n")
    sections = re.findall(r"^## (\d+)\. ", text, flags=re.MULTILINE)
    assert sections == [str(n) for n in range(1, 10)]
    bolded = {b.strip().rstrip(".").lower() for b in re.findall(r"\*\*(.+?)\*\*", text)}
    named = {t.name.lower() for t in glossary().terms}
    assert bolded <= named
    assert len(named) == len(bolded) + len(PROSE_TERMS)


def test_a_bolded_term_is_defined_by_metrics_mds_own_words():
    term = glossary().lookup("useful working set")
    assert term.name == "Useful working set (W)" and term.slug == "useful-working-set"
    assert term.section == "4. Working set and cache size"
    (block,) = term.blocks
    assert block.text.startswith(
        "**Useful working set (W)** at instant τ: the bytes of blocks that have a reference "
        "at `t <= τ` whose next reference comes at `t_next > τ`"
    )
    assert block.text.endswith("and its time series.")
    # the one line: its first sentence, without the markdown
    assert term.summary == (
        "Useful working set (W) at instant τ: the bytes of blocks that have a reference at "
        "t <= τ whose next reference comes at t_next > τ with t_next - t <= W (each such pair "
        "keeps its block live on [t, t_next))."
    )


def test_a_term_defined_in_prose_is_the_passage_quoted():
    slot = glossary().lookup("slot")
    assert slot.summary == (
        "A block slot holds B tokens; its size is B * kv_bytes_per_token (section 5), "
        "whatever the number of tokens actually in it."
    )
    assert slot.section == "4. Working set and cache size"
    ceiling = glossary().lookup("ceiling")  # said in three places: all three shown
    assert [b.section[:2] for b in ceiling.blocks] == ["3.", "4.", "8."]
    assert ceiling.summary.startswith("Infinite-cache hit ratio = the same with W = infinity")


def test_other_names_and_unknown_words():
    g = glossary()
    assert g.lookup("scope") is g.lookup("Sharing scope")
    assert g.lookup("hit ratio").name == "Token hit ratio (W)"
    assert g.lookup("per TP rank").name == "Per TP rank"  # "**Per TP rank.**", run in
    assert "scope" in g.lookup("sharing scope").also
    with pytest.raises(UnknownTerm, match="ceilng"):
        g.lookup("ceilng")


def test_a_quote_metrics_md_no_longer_holds_is_an_error():
    markdown = "## 4. Working set\n\nA block slot holds `B` tokens.\n"
    moved = Passage("slot", ((4, "A slot is B tokens."),))
    with pytest.raises(GlossaryError, match="section 4 no longer says"):
        parse(markdown, passages=(moved,), aliases={})


def test_blocks_join_lists_and_formulas_to_their_sentence():
    markdown = (
        "# Title\n\n## 1. One\n\nA **thing** is one. It has\na second line.\n\n"
        "Lead **kind**:\n- a: first;\n- b: **second**.\n\n"
        "## 2. Two\n\nBlock has the **key**\n\n    k = H(x)\n    j = H(k)\n\nso it chains.\n"
    )
    g = parse(markdown, passages=(), aliases={})
    assert [t.name for t in g.terms] == ["key", "kind", "second", "thing"]  # alphabetical
    assert g.lookup("thing").summary == "A thing is one."
    assert g.lookup("thing").blocks[0].text == "A **thing** is one. It has a second line."
    assert g.lookup("kind").summary == "Lead kind: a: first; b: second."
    assert g.lookup("kind").blocks[0].items == ("a: first;", "b: **second**.")
    assert g.lookup("second").summary == "b: second."
    assert g.lookup("key").summary == "Block has the key k = H(x); j = H(k) so it chains."
    assert g.lookup("key").section == "2. Two"


def _template_terms() -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for path in sorted((ROOT / "templates").rglob("*.html")):
        for name in USED_TERM.findall(path.read_text()):
            used.setdefault(name, []).append(path.name)
    return used


def test_every_term_a_template_uses_is_defined():
    used = _template_terms()
    # the pages named in #16 use the words it names
    for word in ("ceiling", "slot", "scope", "misplaced reuse", "router", "block lifetime"):
        assert word in used, word
    unknown = {name: pages for name, pages in used.items() if not _defined(name)}
    assert unknown == {}


def _defined(name: str) -> bool:
    try:
        glossary().lookup(name)
    except UnknownTerm:
        return False
    return True


def test_the_term_tag_is_a_link_with_its_summary_on_hover():
    html = Template('{% load terms %}{% term "ceiling" "the ceiling" %}').render(Context())
    assert html == (
        '<a class="term" href="/glossary/#ceiling" title="Infinite-cache hit ratio = the same '
        'with W = infinity: the ceiling that no cache size or policy can pass.">the ceiling</a>'
    )
    plain = Template('{% load terms %}{% term "useful working set" %}').render(Context())
    assert plain.endswith(">useful working set</a>")  # the word as the page wrote it
    assert 'title="Useful working set (W) at instant τ: the bytes of blocks that have a ' \
        "reference at t &lt;= τ" in plain  # fmt: skip
    with pytest.raises(TemplateSyntaxError, match="No glossary term 'ceilng'"):
        Template('{% load terms %}{% term "ceilng" %}').render(Context())


def test_a_definition_keeps_its_code_and_bold_and_escapes_the_rest():
    html = Template("{% load terms %}{{ text|definition }}").render(
        Context({"text": "**slot** of `B * x` bytes, <script> & `a<b`"})
    )
    assert html == (
        "<strong>slot</strong> of <code>B * x</code> bytes, &lt;script&gt; &amp; "
        "<code>a&lt;b</code>"
    )


@pytest.mark.django_db
def test_the_glossary_page_lists_every_term_with_its_anchor(analyst):
    assert Client().get(reverse("glossary")).status_code == 302  # signed-in users only
    client = Client()
    assert client.login(username=analyst.username, password=PASSWORD)
    page = client.get(reverse("glossary")).content.decode()
    assert f'<a href="{reverse("glossary")}">Glossary</a>' in page  # in the navigation
    anchors = re.findall(r'<div class="glossary-term" id="([^"]+)">\s*<dt>([^<]+)</dt>', page)
    assert len(anchors) == len(glossary().terms) > 50
    headings = [heading for _, heading in anchors]
    assert headings == sorted(headings, key=str.casefold)
    assert ("useful-working-set", "Useful working set (W)") in anchors
    assert ("slot", "Slot") in anchors
    entry = page[page.index('id="slot"') :]
    entry = entry[: entry.index("</div>")]
    assert "A block slot holds <code>B</code> tokens" in entry
    assert "metrics.md section 4. Working set and cache size" in entry


def test_a_glossary_without_terms_says_so():
    html = render_to_string("glossary.html", {"terms": ()})
    assert "No definitions" in html and "glossary-term" not in html
