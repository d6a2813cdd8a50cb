"""Grader of the music world: the model's ABC parsed by music21, one reward dimension per rule.

The piece is the last ```abc (or bare ```) block of the response, else the text from its first
`X:` line on, else the last piece checked with the `check_piece` tool (artifact `piece.abc`).
It must hold two voices (V:1 melody, V:2 bass). Each rule scores 0 or 1:

    format               parses, two voices with notes in each (0 here zeroes every rule)
    key                  K: is the task's key and every note is in its major scale
    meter                M: is the task's meter, every bar of both voices is full, same bar count
    length               the melody has exactly the task's number of bars
    range                melody and bass notes stay within the task's ranges
    cadence              bass ends dominant -> tonic, melody ends on the tonic
    motif                the melody's first bar (intervals and rhythm) recurs later in the melody
    no_parallel_fifths   no consecutive perfect fifths (or twelfths) with both voices moving
    no_parallel_octaves  no consecutive octaves / unisons with both voices moving

score = mean of the eight rules after `format`; the dims go to `gdpo` as one column each.
"""

from __future__ import annotations

import re
from fractions import Fraction

from mimojax.extras import MissingExtraError, check_extra, require
from mimojax.rewards.pool import register_reward

MUSIC = "the music world (envs/music)"  # music21 is its extra: pip install 'mimojax[music]'

RULES = (
    "key",
    "meter",
    "length",
    "range",
    "cadence",
    "motif",
    "no_parallel_fifths",
    "no_parallel_octaves",
)
DIMS = ("format", *RULES)
MAJOR_STEPS = (0, 2, 4, 5, 7, 9, 11)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
MAX_CHARS = 20_000  # a longer "piece" is not an answer; keeps the parser's time bounded


def find_abc(response: str) -> str | None:
    """The last ```abc / ``` block (from its `X:` line, if any), else the text from the first
    `X:` line; None if neither."""
    text = str(response)
    blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in ("", "abc")]
    if blocks:
        text = blocks[-1]
    m = re.search(r"^X:", text, re.MULTILINE)
    if m:  # a label line ("ABC:") before the header is not part of the tune
        return text[m.start() :]
    return text if blocks else None


def tonic_pc(key: str) -> int:
    """Pitch class of a major key's tonic ("G" -> 7, "Bb" -> 10)."""
    base = {"C": 0, "D": 2, "E": 4, "F": 5, "G": 7, "A": 9, "B": 11}[key[0].upper()]
    return (base + key[1:].count("#") - key[1:].count("b")) % 12


Note = tuple[Fraction, Fraction, int | None]  # (offset, quarter length, midi; None = rest)


def parse_piece(abc: str):
    """(voices, key_sharps, meter, bar lengths or None) via music21; raises unless 2 voices."""
    converter = require("music21.converter", "music", MUSIC)

    if len(abc) > MAX_CHARS:
        raise ValueError("piece too long")
    score = converter.parse(abc, format="abc")
    parts = list(score.parts)
    if len(parts) < 2:
        raise ValueError(f"need two voices (V:1, V:2), got {len(parts)}")
    voices, bars = [], []
    for part in parts[:2]:
        notes = []
        for n in part.flatten().notesAndRests:
            if n.isChord:
                raise ValueError("chords are not allowed in a voice")
            midi = None if n.isRest else int(n.pitch.midi)
            notes.append((Fraction(n.offset), Fraction(n.quarterLength), midi))
        if not any(m is not None for _, _, m in notes):
            raise ValueError("a voice without notes")
        voices.append(notes)
        measures = part.getElementsByClass("Measure")
        # music21 makes no Measure objects for a voice of one or two bars; None: cut by meter.
        bars.append([Fraction(m.duration.quarterLength) for m in measures] or None)
    flat = parts[0].flatten()
    keys = flat.getElementsByClass("KeySignature")
    times = flat.getElementsByClass("TimeSignature")
    sharps = keys[0].sharps if keys else None
    meter = times[0].ratioString if times else None
    return voices, sharps, meter, bars


_SHARPS = {"C": 0, "G": 1, "D": 2, "A": 3, "E": 4, "F": -1, "Bb": -2, "Eb": -3}


def pitches(voice: list[Note]) -> list[int]:
    return [m for _, _, m in voice if m is not None]


def parallels(upper: list[Note], lower: list[Note], interval: int) -> int:
    """Count consecutive vertical `interval`s (mod 12) where both voices move to new pitches."""

    def sounding(voice, t):
        for off, dur, m in voice:
            if off <= t < off + dur:
                return m
        return None

    onsets = sorted({off for off, _, _ in upper} | {off for off, _, _ in lower})
    pairs = [(sounding(upper, t), sounding(lower, t)) for t in onsets]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    count = 0
    for (a1, b1), (a2, b2) in zip(pairs, pairs[1:]):
        if (
            a1 != a2
            and b1 != b2
            and abs(a1 - b1) % 12 == interval
            and abs(a2 - b2) % 12 == interval
        ):
            count += 1
    return count


def has_motif(melody: list[Note], first_bar_len: Fraction) -> bool:
    """Whether the first bar's (interval, duration) pattern occurs again at a later note."""
    notes = [(d, m) for _, d, m in melody if m is not None]
    k = sum(1 for off, _, m in melody if off < first_bar_len and m is not None)
    if k < 2:
        return False

    def shape(seq):
        return [b[1] - a[1] for a, b in zip(seq, seq[1:])], [d for d, _ in seq]

    want = shape(notes[:k])
    return any(shape(notes[i : i + k]) == want for i in range(k, len(notes) - k + 1))


def check_rules(abc: str, task: dict) -> dict[str, float]:
    """Every rule's 0/1 for one ABC text against a task spec (the row's extra)."""
    check_extra("music", MUSIC)
    try:
        (melody, bass), sharps, meter, bars = parse_piece(abc)
    except MissingExtraError:  # no music21 here: the run's problem, not this answer's
        raise
    except Exception:  # noqa: BLE001 - anything music21 cannot read as a 2-voice piece is format 0
        return dict.fromkeys(DIMS, 0.0)
    tonic = tonic_pc(task["key"])
    scale = {(tonic + s) % 12 for s in MAJOR_STEPS}
    mel, bas = pitches(melody), pitches(bass)
    num, den = (int(x) for x in task["meter"].split("/"))
    bar_len = Fraction(4 * num, den)
    for i, voice in enumerate((melody, bass)):
        if bars[i] is None:
            total = max(off + dur for off, dur, _ in voice)
            whole, rest = divmod(total, bar_len)
            bars[i] = [bar_len] * int(whole) + ([rest] if rest else [])
    out = {"format": 1.0}
    out["key"] = float(sharps == _SHARPS[task["key"]] and all(p % 12 in scale for p in mel + bas))
    out["meter"] = float(
        meter == task["meter"]
        and len(bars[0]) == len(bars[1])
        and all(b == bar_len for voice in bars for b in voice)
    )
    out["length"] = float(len(bars[0]) == int(task["bars"]) == len(bars[1]))
    mlo, mhi = task["melody_range"]
    blo, bhi = task["bass_range"]
    out["range"] = float(all(mlo <= p <= mhi for p in mel) and all(blo <= p <= bhi for p in bas))
    dominant = (tonic + 7) % 12
    out["cadence"] = float(
        len(bas) >= 2
        and bas[-1] % 12 == tonic
        and bas[-2] % 12 == dominant
        and mel[-1] % 12 == tonic
    )
    out["motif"] = float(has_motif(melody, bar_len))
    out["no_parallel_fifths"] = float(parallels(melody, bass, 7) == 0)
    out["no_parallel_octaves"] = float(parallels(melody, bass, 0) == 0)
    return out


@register_reward("music")
def grade(response: str, ground_truth: str, extra: dict | None = None) -> dict:
    """score = mean of the rules (0 if the ABC does not parse); one dim per rule plus format."""
    check_extra("music", MUSIC)  # every answer, parseable or not: no silent zeros without it
    task = dict(extra or {})
    missing = [k for k in ("key", "meter", "bars", "melody_range", "bass_range") if k not in task]
    if missing:
        # A row without its constraints is a data bug: an infra failure, not a zero.
        raise ValueError(f"music grader: row {ground_truth!r} lacks {missing}")
    abc = find_abc(response)
    artifacts = task.get("artifacts")
    if abc is None and isinstance(artifacts, dict) and isinstance(artifacts.get("piece.abc"), str):
        abc = artifacts["piece.abc"]
    dims = check_rules(abc, task) if abc is not None else dict.fromkeys(DIMS, 0.0)
    return {"score": sum(dims[r] for r in RULES) / len(RULES), **dims}
