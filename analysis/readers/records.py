"""What a reader makes of one usable line: a chat request (messages) or a pre-hashed trace
request (hash_ids), and the interface every reader has."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(slots=True)
class Message:
    role: str
    text: str
    is_document: bool = False
    label: str = ""


@dataclass(slots=True)
class ChatRequest:
    line: int
    t_us: int
    tenant: str
    user: str
    model: str
    messages: list[Message]
    output_tokens: int  # -1 when the log does not say
    session: str = ""  # metrics.md section 7: "" when the line names none
    cache_control: bool = False  # the body carries an explicit cache breakpoint
    # what the serving engine's response reported (usage): the prompt tokens it counted
    # and those it served from its cache; -1 when the line does not say
    reported_prompt_tokens: int = -1
    cached_tokens: int = -1


@dataclass(slots=True)
class TraceRequest:
    line: int
    t_us: int
    tenant: str
    user: str
    model: str
    input_length: int
    output_tokens: int
    hash_ids: np.ndarray  # uint64 keys
    session: str = ""  # a Bailian chain's root chat_id; "" when none
    cache_control: bool = False
    reported_prompt_tokens: int = -1  # (traces carry no response usage)
    cached_tokens: int = -1


Request = ChatRequest | TraceRequest


class Reader(Protocol):
    name: str

    def parse(self, obj: dict, line: int) -> Request: ...
