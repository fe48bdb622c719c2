"""The upload form, its file field and the block-size choice it shares with Retry. Forms
validate and nothing more (the analysis form is in console.uploads.analysis_forms, the
pages' GET forms in console.uploads.page_forms)."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.utils import timezone

from analysis.ingest import DEFAULT_BLOCK_TOKENS
from console.sniff import TOKENIZER_MAX_BYTES, refusal, tokenizer_refusal
from console.uploads.prompts import FORMAT_CHOICES, TOOLS_POSITION_CHOICES, TOOLS_POSITION_WHY

# The block-size choice "the format's own": stored as no explicit size (Upload.block_sizes
# == []), so the engine takes each format's default (analysis.ingest.DEFAULT_BLOCK_TOKENS).
FORMAT_OWN = 0
_CHAT, _TRACE = DEFAULT_BLOCK_TOKENS["chat"], DEFAULT_BLOCK_TOKENS["mooncake"]
_BAILIAN = DEFAULT_BLOCK_TOKENS["bailian"]
BLOCK_SIZE_CHOICES = [
    (FORMAT_OWN, f"The format's own (chat {_CHAT}, Mooncake {_TRACE} …)"),
    (16, "16 (vLLM block)"),
    (64, "64"),
    (128, "128"),
    (256, "256 (LMCache chunk)"),
    (512, "512"),
]


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data]
        files = [f for f in files if f]
        if not files:
            raise forms.ValidationError("Choose at least one log file.")
        return [super(MultipleFileField, self).clean(f, initial) for f in files]


BLOCK_SIZES_HELP = (
    f"The format's own is the default: {_CHAT} tokens for chat logs (LMCache's chunk), "
    f"{_TRACE} for pre-hashed Mooncake traces and {_BAILIAN} for Bailian traces (the sizes "
    "their hash_ids were made with). "
    "Ticking a size of your own unticks it (the two do not mix). A chat log is keyed at "
    "every size ticked, chosen now: token ids are never stored, so other sizes need a new "
    "upload. A pre-hashed trace has one size: 512 if ticked, else the smallest ticked."
)


def block_sizes_field() -> forms.TypedMultipleChoiceField:
    """The block-size checkboxes of the upload form and of Retry (one definition)."""
    return forms.TypedMultipleChoiceField(
        choices=BLOCK_SIZE_CHOICES,
        coerce=int,
        initial=[FORMAT_OWN],
        widget=forms.CheckboxSelectMultiple,
        label="Block sizes (tokens)",
        help_text=BLOCK_SIZES_HELP,
        error_messages={"required": "Tick the format's own or at least one block size."},
    )


def chosen_block_sizes(ticked: list[int]) -> list[int]:
    """What to store: the sizes ticked, or [] for the format's own. Both ticked is refused
    rather than one silently dropped (the page's script unticks the other; this is for a
    browser without it)."""
    own = FORMAT_OWN in ticked
    sizes = sorted({size for size in ticked if size != FORMAT_OWN})
    if own and sizes:
        raise forms.ValidationError(
            "Tick the format's own or sizes of your own, not both: untick “The format's "
            f"own” to key at {', '.join(map(str, sizes))}, or untick those sizes."
        )
    return sizes


def block_sizes_initial(stored: list[int]) -> list[int]:
    """The checkboxes ticked for stored sizes (a retry starts from what was chosen)."""
    return list(stored) or [FORMAT_OWN]


class RetryForm(forms.Form):
    """Retry a failed ingest, with the block sizes changed if need be (a trace read at
    the wrong size fails every line; the message names the size that fits)."""

    block_sizes = block_sizes_field()

    def clean_block_sizes(self) -> list[int]:
        return chosen_block_sizes(self.cleaned_data["block_sizes"])


class UploadForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="e.g. “prod-eu, Monday”")
    files = MultipleFileField(
        label="Log files",
        help_text="Chat bodies as JSONL, a gateway CSV export, or a pre-hashed trace "
        "(Mooncake, Bailian), plain or .gz. Several files are analyzed as one log.",
    )
    format = forms.ChoiceField(
        choices=FORMAT_CHOICES,
        initial="auto",
        help_text="Detected line by line: a file may mix OpenAI and Anthropic bodies.",
    )
    tools_position = forms.ChoiceField(
        choices=TOOLS_POSITION_CHOICES,
        initial="auto",
        required=False,  # a form posted without it (a script, an older page): auto
        widget=forms.RadioSelect,
        label="Tool definitions go",
        help_text=f"{TOOLS_POSITION_WHY} Choose where your serving engine's chat template "
        "puts them.",
    )
    tokenizer = forms.FileField(
        required=False,
        label="Tokenizer (optional)",
        widget=forms.ClearableFileInput(attrs={"accept": ".json,application/json"}),
        help_text="Chat bodies only (a pre-hashed trace has no text to count): the model's "
        "own tokenizer (a Hugging Face tokenizer.json, read offline); "
        f"cl100k_base if none. At most {TOKENIZER_MAX_BYTES >> 20} MB; kept with the raw "
        "files and deleted with them.",
    )
    block_sizes = block_sizes_field()
    trace_tails = forms.ChoiceField(
        choices=[
            ("cached", "Cached, like every block (Mooncake's convention)"),
            ("uncached", "An uncached tail (vLLM; kvscope's own replay exports)"),
        ],
        initial="cached",
        required=False,
        widget=forms.RadioSelect,
        label="Pre-hashed traces: a last block with fewer tokens than the block size is",
    )
    previews = forms.BooleanField(
        required=False,
        label="Keep text previews of segments",
        help_text="Off by default: without it no prompt text is stored anywhere.",
    )
    retention = forms.ChoiceField(
        choices=[
            ("delete", "Delete the raw file after ingest"),
            ("keep", "Keep the raw file until a date"),
        ],
        initial="delete",
        widget=forms.RadioSelect,
        label="Raw file",
    )
    keep_until = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), label="Keep until"
    )

    def clean_files(self):
        files = self.cleaned_data["files"]
        problems = []
        for upload in files:
            head = upload.read(4096)
            upload.seek(0)
            problem = refusal(upload.name, head)
            if problem:
                problems.append(problem)
        if problems:
            raise forms.ValidationError(problems)
        return files

    def clean_tools_position(self) -> str:
        return self.cleaned_data.get("tools_position") or "auto"

    def clean_tokenizer(self):
        tokenizer = self.cleaned_data.get("tokenizer")
        if not tokenizer:
            return None
        problem = tokenizer_refusal(tokenizer.name, tokenizer.size, tokenizer.read)
        tokenizer.seek(0)
        if problem:
            raise forms.ValidationError(problem)
        return tokenizer

    def clean_block_sizes(self) -> list[int]:
        return chosen_block_sizes(self.cleaned_data["block_sizes"])

    def clean(self):
        data = super().clean()
        if data.get("retention") == "keep":
            until = data.get("keep_until")
            if until is None:
                self.add_error("keep_until", "Give the date the raw file may be deleted.")
            elif until <= timezone.localdate():
                self.add_error("keep_until", "The date must be in the future.")
            elif until > timezone.localdate() + dt.timedelta(days=366):
                self.add_error("keep_until", "Keep raw files for at most a year.")
        else:
            data["keep_until"] = None
        return data
