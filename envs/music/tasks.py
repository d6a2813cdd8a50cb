"""Music tasks: two-voice ABC pieces under constraints, a reference piece for each, and the
fixed train / held-out files.

    python -m mimojax.envs.music.tasks            # rewrites envs/music/data/*.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path

DATA_DIR = Path(__file__).with_name("data")
KEYS = ("C", "G", "D", "F", "Bb")
METERS = ("4/4", "3/4")
BAR_COUNTS = (4, 6, 8)
MELODY_RANGE = (60, 81)  # C4..A5
BASS_RANGE = (40, 62)  # E2..D4
HELD_OUT_SEED = 15
N_HELD_OUT = 8
_LETTERS = "CDEFGAB"
_NAMES = {60: "C4 (ABC `C`)", 81: "A5 (`a`)", 40: "E2 (`E,,`)", 62: "D4 (`D`)"}

EXAMPLE = """X:1
T:Example
M:4/4
L:1/4
K:C
V:1
E F G E | D2 C2 |]
V:2 clef=bass
C,4 | G,,2 C,2 |]"""


def task_id(key: str, meter: str, bars: int) -> str:
    return f"{key}-{meter.replace('/', '')}-{bars}bars"


def task_prompt(spec: dict) -> str:
    """The user prompt for one task spec."""
    key, meter, bars = spec["key"], spec["meter"], spec["bars"]
    dom = _LETTERS[(_LETTERS.index(key[0]) + 4) % 7]
    return (
        f"Compose a short two-voice piece in ABC notation, melody in V:1 and bass in V:2.\n"
        f"Rules:\n"
        f"- key: {key} major (K:{key}); use only notes of that scale\n"
        f"- meter: {meter} (M:{meter}); every bar of both voices exactly full\n"
        f"- length: exactly {bars} bars in each voice\n"
        f"- range: melody between {_NAMES[spec['melody_range'][0]]} and "
        f"{_NAMES[spec['melody_range'][1]]}; bass between {_NAMES[spec['bass_range'][0]]} and "
        f"{_NAMES[spec['bass_range'][1]]}\n"
        f"- cadence: the bass ends {dom} then {key}; the melody's last note is {key}\n"
        f"- motif: the melody's first bar returns later (same rhythm and intervals)\n"
        f"- no parallel fifths or octaves between melody and bass\n"
        f"Reply with the piece in one ```abc block, in this shape:\n```abc\n{EXAMPLE}\n```"
    )


def _abc_note(d: int) -> str:
    """ABC name of diatonic step d (0 = C4, 7 = C5, -7 = C3); the key signature adds accidentals."""
    letter, octave = _LETTERS[d % 7], 4 + d // 7
    return letter.lower() + "'" * (octave - 5) if octave >= 5 else letter + "," * (4 - octave)


def _length(q: int) -> str:
    return "" if q == 1 else str(q)


def reference_abc(spec: dict, seed: int = 0, tries: int = 400) -> str:
    """A piece meeting every rule, found by seeded random search over melodies (tests use it)."""
    from mimojax.envs.music.grader import RULES, check_rules

    rng = random.Random(f"{spec['key']}{spec['meter']}{spec['bars']}{seed}")
    t = _LETTERS.index(spec["key"][0])  # tonic's diatonic step (0 = C4)
    beats = int(spec["meter"].split("/")[0])
    bars = int(spec["bars"])
    final = t + 7 if t + 7 <= 12 else t  # melody steps stay within C4..A5 (0..12)
    progression = [0, 3, 4, 0, 5, 3, 4, 0]  # I IV V I vi IV V I (scale steps of the bass)
    bass = []
    for s in progression[: bars - 2] + [4, 0]:
        d = t + s - 7
        while d > 1:  # at most D4
            d -= 7
        bass.append(d)
    for _ in range(tries):
        walk = [rng.randrange(3, 10)]  # a stepwise melody: moves of at most a third
        while len(walk) < beats * bars:
            walk.append(min(12, max(0, walk[-1] + rng.choice((-2, -1, 1, 2)))))
        degrees = [walk[i * beats : (i + 1) * beats] for i in range(bars)]
        degrees[bars // 2] = list(degrees[0])  # the motif returns mid-piece
        mel_bars = [" ".join(_abc_note(d) for d in bar) for bar in degrees[:-1]]
        mel_bars.append(_abc_note(final) + _length(beats))
        bass_bars = [_abc_note(d) + _length(beats) for d in bass]
        abc = (
            f"X:1\nT:{task_id(spec['key'], spec['meter'], bars)}\nM:{spec['meter']}\nL:1/4\n"
            f"K:{spec['key']}\nV:1\n{' | '.join(mel_bars)} |]\n"
            f"V:2 clef=bass\n{' | '.join(bass_bars)} |]\n"
        )
        dims = check_rules(abc, spec)
        if all(dims[r] == 1.0 for r in RULES):
            return abc
    raise RuntimeError(f"no reference piece found for {spec}")


def all_specs() -> list[dict]:
    return [
        {
            "key": k,
            "meter": m,
            "bars": b,
            "melody_range": list(MELODY_RANGE),
            "bass_range": list(BASS_RANGE),
        }
        for k, m, b in itertools.product(KEYS, METERS, BAR_COUNTS)
    ]


def task_row(spec: dict) -> dict:
    """One data row; extra holds the constraints the grader checks."""
    tid = task_id(spec["key"], spec["meter"], spec["bars"])
    return {
        "prompt": task_prompt(spec),
        "ground_truth": tid,
        "env": "music",
        "extra": {"task_id": tid, **spec},
    }


def split_rows() -> tuple[list[dict], list[dict]]:
    """(train, held-out): N_HELD_OUT tasks drawn once with HELD_OUT_SEED, never trained on."""
    rows = [task_row(s) for s in all_specs()]
    held = set(random.Random(HELD_OUT_SEED).sample(range(len(rows)), N_HELD_OUT))
    return [r for i, r in enumerate(rows) if i not in held], [rows[i] for i in sorted(held)]


def write_splits(out_dir: Path = DATA_DIR) -> None:
    """Writes music_train.jsonl and music_test.jsonl."""
    out_dir.mkdir(parents=True, exist_ok=True)
    train, test = split_rows()
    for name, rows in (("music_train.jsonl", train), ("music_test.jsonl", test)):
        with open(out_dir / name, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DATA_DIR)
    write_splits(p.parse_args().out)
