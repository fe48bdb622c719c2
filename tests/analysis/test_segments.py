"""The segment view (metrics.md sections 1 and 3): kinds, hot / occasional / one-off classes
with count, unique_tokens and total_tokens, scoping, and misplaced reuse."""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, analyze

T0 = 1_700_000_000  # epoch seconds

S1 = "You are a careful assistant."  # system
S2 = "Follow the style guide."  # developer
LONG_SYSTEM = (
    "You are the assistant of a large retailer. Always answer in English, never promise "
    "delivery dates, cite the policy section you rely on, and escalate any legal question "
    "to a human agent immediately."
)
D1 = "Refunds are accepted within 30 days of purchase with a receipt."  # document part
D2 = "Shipping takes three to five business days."  # file part
L1 = (
    "Quarterly report: revenue grew 12% while costs fell 3%, driven by lower logistics "
    "spend and better supplier terms across Europe and Asia."
)  # a plain user message, long enough to be a document
Q1, Q2, Q3 = "How do I get a refund?", "Thanks!", "Can I change my address?"


def msg(role, content):
    return {"role": role, "content": content}


def doc_part(text):
    return [
        {"type": "document", "text": text, "title": "Policy"},
        {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
    ]


def file_part(text):
    return [{"type": "file", "file": {"filename": "shipping.txt", "text": text}}]


def rows():
    # t (s after T0): segments
    #   0: S1 Q1
    #  10: S1 D1 Q2
    #  20: S1 S2 L1 Q1
    # 500: S2 L1 Q1(as assistant) D2 Q3
    # 510: L1 D1 D2
    # 515: LONG_SYSTEM D2
    return [
        {"timestamp": T0, "messages": [msg("system", S1), msg("user", Q1)]},
        {
            "timestamp": T0 + 10,
            "messages": [msg("system", S1), msg("user", doc_part(D1)), msg("user", Q2)],
        },
        {
            "timestamp": T0 + 20,
            "messages": [msg("system", S1), msg("developer", S2), msg("user", L1), msg("user", Q1)],
        },
        {
            "timestamp": T0 + 500,
            "messages": [
                msg("developer", S2),
                msg("user", L1),
                msg("assistant", Q1),
                msg("user", file_part(D2)),
                msg("user", Q3),
            ],
        },
        {
            "timestamp": T0 + 510,
            "messages": [msg("user", L1), msg("user", doc_part(D1)), msg("user", file_part(D2))],
        },
        {
            "timestamp": T0 + 515,
            "messages": [msg("system", LONG_SYSTEM), msg("user", file_part(D2))],
        },
    ]


def cls(count=0, unique=0, total=0, reused=0):
    # reused: tokens of the occurrences that are reuses within the window
    return {"count": count, "unique_tokens": unique, "total_tokens": total, "reused_tokens": reused}


@pytest.fixture
def sizes(enc):
    texts = dict(S1=S1, S2=S2, LS=LONG_SYSTEM, D1=D1, D2=D2, L1=L1, Q1=Q1, Q2=Q2, Q3=Q3)
    n = {name: len(enc(text)) for name, text in texts.items()}
    doc_min = n["L1"]  # L1 sits exactly on the threshold: "at least" makes it a document
    assert n["LS"] >= doc_min  # long, but a system message stays an instruction
    assert max(n["D1"], n["D2"]) < doc_min  # documents only because of their part type
    assert max(n["Q1"], n["Q2"], n["Q3"], n["S1"], n["S2"]) < doc_min
    return n, doc_min


@pytest.mark.parametrize("reverse", [False, True])
def test_segment_classes_per_kind(ingest_rows, sizes, reverse):
    n, doc_min = sizes
    # lines written newest first are sorted by time at ingest: the same expectations hold
    stream = ingest_rows(rows()[::-1] if reverse else rows(), block_tokens=16)
    report = analyze(
        stream, AnalysisParams(windows_s=(100, 1000), doc_min_tokens=doc_min, min_reuses=2)
    )
    w100, w1000 = report.windows

    # W = 100: reuses within W
    #   S1 at 0, 10, 20: 2 -> hot          S2 at 20, 500: 0 -> occasional
    #   LONG_SYSTEM once -> one-off (instruction although long)
    #   D2 at 500, 510, 515: 2 -> hot      D1 at 10, 510: 0 -> occasional
    #   L1 at 20, 500, 510: 1 -> occasional
    #   Q1 (user) at 0, 20: 1 -> occasional
    #   Q2, Q3 once; Q1 as assistant is another segment (role, text), once: one-off
    assert w100.segments == {
        "instruction": {
            "hot": cls(1, n["S1"], 3 * n["S1"], 2 * n["S1"]),  # 2 reuses
            "occasional": cls(1, n["S2"], 2 * n["S2"], 0),  # none within 100 s
            "one_off": cls(1, n["LS"], n["LS"]),
        },
        "document": {
            "hot": cls(1, n["D2"], 3 * n["D2"], 2 * n["D2"]),
            # D1 no reuse within 100 s, L1 one (500 -> 510)
            "occasional": cls(2, n["D1"] + n["L1"], 2 * n["D1"] + 3 * n["L1"], n["L1"]),
            "one_off": cls(),
        },
        "conversation": {
            "hot": cls(),
            "occasional": cls(1, n["Q1"], 2 * n["Q1"], n["Q1"]),
            "one_off": cls(3, n["Q2"] + n["Q3"] + n["Q1"], n["Q2"] + n["Q3"] + n["Q1"]),
        },
    }

    # W = 1000: L1 now has 2 reuses (480 s, 10 s) -> hot; S2, D1, Q1 have 1 -> occasional
    assert w1000.segments["document"] == {
        "hot": cls(2, n["D2"] + n["L1"], 3 * n["D2"] + 3 * n["L1"], 2 * n["D2"] + 2 * n["L1"]),
        "occasional": cls(1, n["D1"], 2 * n["D1"], n["D1"]),  # 10 -> 510: one reuse
        "one_off": cls(),
    }
    assert w1000.segments["instruction"]["occasional"] == cls(1, n["S2"], 2 * n["S2"], n["S2"])
    assert w1000.segments["conversation"]["occasional"] == cls(1, n["Q1"], 2 * n["Q1"], n["Q1"])


def test_min_reuses_and_doc_min_tokens(ingest_rows, sizes):
    n, doc_min = sizes
    stream = ingest_rows(rows(), block_tokens=16)
    # one more token needed: L1 is no longer a document but conversation
    report = analyze(
        stream, AnalysisParams(windows_s=(100,), doc_min_tokens=doc_min + 1, min_reuses=1)
    )
    seg = report.windows[0].segments
    # min_reuses = 1 at W = 100: one reuse is enough. L1 (1 reuse) and Q1 (1) turn hot;
    # S2 and D1 (0 reuses within 100 s) stay occasional.
    assert seg["conversation"] == {
        "hot": cls(2, n["L1"] + n["Q1"], 3 * n["L1"] + 2 * n["Q1"], n["L1"] + n["Q1"]),
        "occasional": cls(),
        "one_off": cls(3, n["Q2"] + n["Q3"] + n["Q1"], n["Q2"] + n["Q3"] + n["Q1"]),
    }
    assert seg["document"] == {
        "hot": cls(1, n["D2"], 3 * n["D2"], 2 * n["D2"]),
        "occasional": cls(1, n["D1"], 2 * n["D1"], 0),
        "one_off": cls(),
    }
    assert seg["instruction"]["occasional"] == cls(1, n["S2"], 2 * n["S2"])
    # the long system prompt is an instruction whatever the threshold
    assert seg["instruction"]["one_off"] == cls(1, n["LS"], n["LS"])


def test_segments_are_scoped(ingest_rows, enc):
    system = "You answer for one tenant only."
    k = len(enc(system))
    stream = ingest_rows(
        [
            {"timestamp": 0, "tenant": "A", "messages": [msg("system", system)]},
            {"timestamp": 10, "tenant": "B", "messages": [msg("system", system)]},
            {"timestamp": 20, "tenant": "A", "messages": [msg("system", system)]},
        ],
        block_tokens=16,
    )
    glob = analyze(stream, AnalysisParams(windows_s=(60,), scope="global"))
    tenant = analyze(stream, AnalysisParams(windows_s=(60,), scope="tenant"))
    # global: one segment seen at 0, 10, 20: 2 reuses -> hot
    assert glob.windows[0].segments["instruction"] == {
        "hot": cls(1, k, 3 * k, 2 * k),
        "occasional": cls(),
        "one_off": cls(),
    }
    # tenant: A's copy at 0, 20 (1 reuse) is occasional; B's single copy is one-off
    assert tenant.windows[0].segments["instruction"] == {
        "hot": cls(),
        "occasional": cls(1, k, 2 * k, k),
        "one_off": cls(1, k, k),
    }


def test_misplaced_reuse(ingest_rows, render, enc):
    block = 4
    document = "The quick brown fox jumps over the lazy dog near the quiet river bank today."
    one = render([("user", "Alpha question"), ("user", document)])
    two = render([("user", "Beta question"), ("user", document)])
    assert one[:block] != two[:block]  # no shared prefix block: request 2 hits nothing
    stream = ingest_rows(
        [
            {"timestamp": 0, "messages": [msg("user", "Alpha question"), msg("user", document)]},
            {"timestamp": 30, "messages": [msg("user", "Beta question"), msg("user", document)]},
        ],
        block_tokens=block,
    )
    report = analyze(stream, AnalysisParams(windows_s=(10, 60)))
    w10, w60 = report.windows
    # within 60 s the document repeats, but after a different prefix: all of its tokens in
    # request 2 are reuse a prefix cache cannot serve. Within 10 s it is not a reuse.
    assert w60.hit_ratio == 0.0
    assert w60.misplaced_reuse_tokens == len(enc(document))
    assert w10.misplaced_reuse_tokens == 0


def test_traces_have_no_segment_view(ingest_rows, trace):
    stream = ingest_rows([trace(0, [1], 512), trace(1000, [1], 512)])
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert report.block_tokens == 512  # the default for pre-hashed traces
    assert report.windows[0].segments is None
    assert report.windows[0].hit_ratio == 512 / 1024
