"""The offline tokenizer and the canonical rendering: no network, hash-checked BPE files,
tokenize-once, and prefix keys equal to hashing each request from scratch."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from analysis import AnalysisParams, analyze
from analysis.hashing import KeyedHasher
from analysis.tokens import EncodingUnavailable, load_encoding

REPO = Path(__file__).resolve().parents[2]

OFFLINE_SCRIPT = textwrap.dedent(
    """
    import json, os, socket, sys

    def refuse(*args, **kwargs):
        raise OSError("network disabled for this test")

    class NoSocket(socket.socket):  # a class, so modules subclassing socket still import
        def __init__(self, *args, **kwargs):
            refuse()

    socket.socket = NoSocket
    socket.create_connection = refuse
    socket.getaddrinfo = refuse

    from analysis.tokens import load_encoding

    enc = load_encoding("cl100k_base")
    print(json.dumps({
        "ids": enc.encode_ordinary("Hello world, tokens!"),
        "cache": os.listdir(os.environ["TIKTOKEN_CACHE_DIR"]),
    }))
    """
)


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def test_tokenizer_works_without_network(tmp_path):
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(cache),
        "DATA_GYM_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-c", OFFLINE_SCRIPT]
    # a network namespace with no interfaces when we can make one; the socket patch always
    if unshare_works():
        command = ["unshare", "-n", *command]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ids"] == [9906, 1917, 11, 11460, 0]  # the published cl100k_base ids
    assert out["cache"] == []  # nothing was fetched or cached


def test_refuses_a_bpe_file_with_the_wrong_hash(tmp_path):
    # "a" and "b" with ranks 0 and 1: a well-formed .tiktoken file, but not the official one
    (tmp_path / "cl100k_base.tiktoken").write_text("YQ== 0\nYg== 1\n")
    with pytest.raises(EncodingUnavailable, match="SHA-256"):
        load_encoding("cl100k_base", str(tmp_path))


def test_unknown_or_missing_encodings(tmp_path):
    with pytest.raises(EncodingUnavailable, match="unknown"):
        load_encoding("p50k_base")
    # o200k_base is known but not bundled: without a local file it is not downloaded
    with pytest.raises(EncodingUnavailable, match="not available offline"):
        load_encoding("o200k_base", str(tmp_path))


DOCUMENT = " ".join(
    f"Clause {k}: the supplier shall deliver item {k * 7} within {k % 30 + 1} days."
    for k in range(150)
)
SYSTEM = "You are a contracts assistant. Quote the clause you rely on."


def test_tokenize_once_and_keys_as_from_scratch(ingest_rows, enc, render, hash_key):
    conversations = [
        [("system", SYSTEM), ("user", DOCUMENT), ("user", f"What does clause {i} say?")]
        for i in range(50)
    ]
    rows = [
        {"timestamp": 1_000 + i, "messages": [{"role": r, "content": t} for r, t in messages]}
        for i, messages in enumerate(conversations)
    ]
    block = 256
    stream = ingest_rows(rows, block_tokens=block)

    rendered = [render(messages) for messages in conversations]
    # every request rendered in full
    tokens_rendered = sum(len(r) for r in rendered)
    # each distinct text tokenized once: the system prompt, the document, 50 questions
    tokens_tokenized = (
        len(enc(SYSTEM))
        + len(enc(DOCUMENT))
        + sum(len(enc(f"What does clause {i} say?")) for i in range(50))
    )
    assert stream.stats["tokens_rendered"] == tokens_rendered
    assert stream.stats["tokens_tokenized"] == tokens_tokenized
    assert stream.stats["tokens_tokenized"] * 10 < stream.stats["tokens_rendered"]
    assert stream.req_prompt_tokens.tolist() == [len(r) for r in rendered]

    # prefix keys: hash each request's canonical rendering from scratch
    hasher = KeyedHasher(hash_key)
    start = stream.req_ref_start
    for i, tokens in enumerate(rendered):
        expected = hasher.block_keys(np.asarray(tokens, dtype=np.uint32), block)
        assert expected.size == len(tokens) // block
        assert np.array_equal(stream.ref_key[start[i] : start[i + 1]], expected), i

    # hit ratio by definition: block k of a request hits when an earlier request has the
    # same tokens up to the end of that block (its prefix key)
    def lcp(a, b):
        return next(
            (j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )

    hit_tokens = sum(
        max(lcp(rendered[i], rendered[j]) for j in range(i)) // block * block
        for i in range(1, len(rendered))
    )
    prefixes = {tuple(r[: (k + 1) * block]) for r in rendered for k in range(len(r) // block)}
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert report.distinct_blocks == len(prefixes)
    assert report.infinite_hit_ratio == hit_tokens / tokens_rendered
    # the document alone makes most of it: each later request reuses at least its blocks
    shared = len(render([("system", SYSTEM), ("user", DOCUMENT)])) // block * block
    assert hit_tokens >= 49 * shared


def test_scoped_keys_equal_salted_hashing(ingest_rows, render, hash_key):
    # metrics.md: deriving scoped keys as H(scope_salt, global key) has the same equalities
    # as salting key_0. Check the tenant-scope hit ratio against keys hashed with the
    # tenant as salt, from scratch.
    text = "Shared onboarding text for every tenant, long enough for a couple of blocks."
    messages = [("user", text)]
    tokens = np.asarray(render(messages), dtype=np.uint32)
    block = 4
    tenants = ["a", "b", "a", "c", "b"]
    rows = [
        {"timestamp": i, "tenant": t, "messages": [{"role": "user", "content": text}]}
        for i, t in enumerate(tenants)
    ]
    stream = ingest_rows(rows, block_tokens=block)
    hasher = KeyedHasher(hash_key)
    seen: set = set()
    hit = 0
    for tenant in tenants:
        for key in hasher.block_keys(tokens, block, salt=tenant.encode()).tolist():
            hit += block if key in seen else 0
            seen.add(key)
    report = analyze(stream, AnalysisParams(windows_s=(60,), scope="tenant"))
    # requests 3 (a) and 5 (b) hit all their full blocks
    assert hit == 2 * (tokens.size // block) * block
    assert report.infinite_hit_ratio == hit / (5 * tokens.size)


def test_block_keys_are_the_keyed_blake2b_chain_computed_by_hand():
    """key_j = BLAKE2b-64(key_{j-1} ‖ block j's token ids as little-endian uint32), keyed
    with the secret, from the salt (nothing at the root); the tail has no key."""
    secret = b"s" * 32
    hasher = KeyedHasher(secret)
    rng = np.random.default_rng(7)
    for block, salt, count in ((1, b"", 3), (16, b"", 47), (16, b"tenant-a", 64), (256, b"", 700)):
        tokens = rng.integers(0, 200_000, count).astype(np.uint32)
        expected, prev = [], salt
        for j in range(count // block):
            h = hashlib.blake2b(key=secret, digest_size=8, person=b"kvscope-blk")
            h.update(prev)
            h.update(
                b"".join(int(t).to_bytes(4, "little") for t in tokens[j * block : (j + 1) * block])
            )
            prev = h.digest()
            expected.append(int.from_bytes(prev, "little"))
        got = hasher.block_keys(tokens, block, salt=salt)
        assert got.dtype == np.uint64 and got.tolist() == expected, (block, salt)
