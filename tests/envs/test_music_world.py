"""envs/music: rule checks against hand-computed pieces, every task's reference piece and bad
answers through the trainer's reward pool, the data split, gdpo over the rule dims, and two
GRPO steps of the config on a tiny random model."""

import json

import numpy as np
import pytest

from mimojax.algos.advantages_outcome import gdpo
from mimojax.data.prompts import read_rows
from mimojax.envs.music.grader import DIMS, RULES, check_rules, find_abc, parallels, parse_piece
from mimojax.envs.music.tasks import DATA_DIR, all_specs, reference_abc, split_rows
from mimojax.rewards.pool import RewardPool

C44 = {"key": "C", "meter": "4/4", "bars": 4, "melody_range": [60, 81], "bass_range": [40, 62]}
# Checked by hand: C major, 4 full bars, melody C4..C5, bass C3 F2 G2 C3 (V -> I), bar 1
# (C D E C) returns in bar 3; vertical pairs at bar lines: C4/C3 ... E4,C4 / F2 (no P5/P8
# with both voices moving).
GOOD = """X:1
M:4/4
L:1/4
K:C
V:1
C D E C | F E D E | C D E C | c4 |]
V:2 clef=bass
E,4 | F,,4 | G,,4 | C,4 |]
"""


def piece(melody: str, bass: str, key="C", meter="4/4") -> str:
    return f"X:1\nM:{meter}\nL:1/4\nK:{key}\nV:1\n{melody} |]\nV:2 clef=bass\n{bass} |]\n"


def failed(abc: str, task=C44) -> set[str]:
    return {k for k, v in check_rules(abc, task).items() if v == 0.0}


def test_good_piece_passes_every_rule():
    assert check_rules(GOOD, C44) == dict.fromkeys(DIMS, 1.0)


def test_parallel_fifths_hand_computed():
    # Melody G4 A4 B4 C5 over bass C3 D3 E3 F3: every vertical is 19 semitones (P12 = P5 + 8ve)
    # until B4/E3 (19) and C5/F3 (19): three consecutive moves in parallel fifths.
    (mel, bas), *_ = parse_piece(piece("G A B c", "C, D, E, F,"))
    assert [m for _, _, m in mel] == [67, 69, 71, 72] and [m for _, _, m in bas] == [48, 50, 52, 53]
    assert parallels(mel, bas, 7) == 3 and parallels(mel, bas, 0) == 0
    # Contrary motion into a fifth, a held bass under a moving melody, and a repeated fifth are
    # not parallels: C4/F3 (7) -> G4/C4 (7) moves both, so counts; G4/C3 -> G4/C3 does not.
    (mel, bas), *_ = parse_piece(piece("c G G G", "F, C C, C,"))
    assert parallels(mel, bas, 7) == 1  # c5/F3 (19) -> G4/C4 (7): both move, both fifths
    (mel, bas), *_ = parse_piece(piece("G A B c", "C,4"))
    assert parallels(mel, bas, 7) == 0  # the bass holds: no parallel motion
    assert "no_parallel_fifths" in failed(piece("G A B c | c4", "C, D, E, F, | C,4"))


def test_parallel_octaves_hand_computed():
    # C4/C3 -> D4/D3 -> E4/E3: two consecutive octave moves; unisons count too.
    (mel, bas), *_ = parse_piece(piece("C D E F", "C, D, E, A,,"))
    assert parallels(mel, bas, 0) == 2 and parallels(mel, bas, 7) == 0


def test_agrees_with_music21_voice_leading_quartets():
    from music21 import pitch, voiceLeading

    cases = [("G4", "A4", "C3", "D3"), ("C5", "G4", "F3", "C4"), ("C4", "D4", "C3", "D3"),
             ("E4", "F4", "C3", "F2"), ("G4", "G4", "C3", "C3")]  # fmt: skip
    for v1a, v1b, v2a, v2b in cases:
        q = voiceLeading.VoiceLeadingQuartet(*(pitch.Pitch(p) for p in (v1a, v1b, v2a, v2b)))
        mel = piece(f"{_abc(v1a)} {_abc(v1b)} z2", f"{_abc(v2a)} {_abc(v2b)} z2")
        (m, b), *_ = parse_piece(mel)
        assert (parallels(m, b, 7) > 0) == bool(q.parallelFifth()), (v1a, v1b, v2a, v2b)
        assert (parallels(m, b, 0) > 0) == bool(q.parallelOctave() or q.parallelUnison())


def _abc(name: str) -> str:
    letter, octave = name[0], int(name[1])
    return letter.lower() + "'" * (octave - 5) if octave >= 5 else letter + "," * (4 - octave)


@pytest.mark.parametrize(
    "abc, broken",
    [
        (GOOD.replace("K:C", "K:G"), {"key"}),  # declares G major
        (GOOD.replace("F E D E", "^F E D E"), {"key"}),  # F# is not in C major
        # A short bar 2 shifts the melody a beat early: C4/F2 (19) -> D4/G2 (19) at beats 7
        # and 8 are parallel fifths too.
        (GOOD.replace("F E D E", "F E D"), {"meter", "no_parallel_fifths"}),
        (GOOD.replace(" | c4 |]", " |]").replace(" | C,4 |]", " |]"), {"length", "cadence"}),
        (GOOD.replace("| c4", "| c'4"), {"range"}),  # C6 above A5
        (GOOD.replace("G,,4 | C,4", "A,,4 | C,4"), {"cadence"}),  # bass ends vi -> I
        (GOOD.replace("| c4 |]", "| d4 |]"), {"cadence"}),  # melody ends on D
        (GOOD.replace("C D E C | c4", "C D E D | c4"), {"motif"}),
    ],
)
def test_each_rule_breaks_on_its_own(abc, broken):
    assert failed(abc) == broken


def test_two_bar_pieces_music21_reads_without_measures():
    # SmolLM2's greedy answer to G-44-4bars: the prompt's example copied (K:C, 2 full bars).
    abc = piece("E F G E | D2 C2", "C,4 | G,,2 C,2")
    g44 = dict(C44, key="G")
    assert failed(abc, g44) == {"key", "length", "cadence", "motif"}
    assert failed(piece("E F G E | D2 C", "C,4 | G,,2 C,2"), g44) >= {"meter", "length"}


def test_wrong_meter_header():
    assert "meter" in failed(GOOD.replace("M:4/4", "M:3/4"))


@pytest.mark.parametrize(
    "response",
    ["", "I cannot write music.", "```abc\nthis is not abc at all\n```",
     "```abc\nX:1\nM:4/4\nL:1/4\nK:C\nC D E F |]\n```"],  # one voice only
)  # fmt: skip
def test_unparseable_scores_zero_on_every_rule(response):
    abc = find_abc(response)
    assert abc is None or check_rules(abc, C44) == dict.fromkeys(DIMS, 0.0)


def test_find_abc():
    assert find_abc(f"Here:\n```abc\n{GOOD}```\nbye") == GOOD
    assert find_abc(f"Sure!\n{GOOD}") == GOOD
    assert find_abc(f"```\nABC:\n{GOOD}```") == GOOD  # SmolLM2 labels its block so
    assert find_abc("```python\nprint(1)\n```") is None


def test_data_files_are_the_generated_split():
    train, test = split_rows()
    assert (len(train), len(test)) == (22, 8)
    for name, rows in (("music_train.jsonl", train), ("music_test.jsonl", test)):
        assert [json.loads(line) for line in open(DATA_DIR / name)] == rows
        assert all(r["env"] == "music" for r in read_rows(str(DATA_DIR / name)))
    assert {r["ground_truth"] for r in train}.isdisjoint(r["ground_truth"] for r in test)


def test_through_the_reward_pool_references_bad_answers_and_gdpo():
    rows = split_rows()[0] + split_rows()[1]
    assert [r["extra"]["task_id"] for r in rows] != []
    refs = [f"```abc\n{reference_abc(r['extra'])}```" for r in rows]
    bad = ["no music", GOOD.replace("K:C", "K:G"), piece("G A B c | c4", "C, D, E, F, | C,4")]
    items = [{"env": "music", "response": a, "ground_truth": r["ground_truth"],
              "extra": r["extra"]} for a, r in zip(refs, rows)]  # fmt: skip
    items += [{"env": "music", "response": b, "ground_truth": "C44", "extra": C44} for b in bad]
    items.append({"env": "music", "response": refs[0], "ground_truth": "x", "extra": {}})
    with RewardPool(num_workers=1, timeout_s=30.0) as pool:
        results = pool.score(items)
    for r in results[: len(rows)]:
        assert r.valid and r.score == 1.0 and r.dims == dict.fromkeys(DIMS, 1.0), r
    none, wrong_key, fifths = results[len(rows) : len(rows) + 3]
    assert none.valid and none.score == 0.0 and none.dims == dict.fromkeys(DIMS, 0.0)
    assert wrong_key.valid and wrong_key.dims == {**dict.fromkeys(DIMS, 1.0), "key": 0.0}
    assert wrong_key.score == 7 / 8
    # 2 bars of 4/4 (length 0), bass ends F3 -> C3 (cadence 0), bar 1 never returns (motif 0),
    # three parallel fifths; key, meter, range, octaves hold: 4 / 8.
    assert fifths.dims["no_parallel_fifths"] == 0.0 and fifths.score == 4 / 8
    assert not results[-1].valid and "lacks" in results[-1].error  # a data bug: infra failure
    # gdpo takes the rule dims as one column each (group of 2: reference vs no answer).
    rewards_BxK = np.array([[results[0].dims[k] for k in RULES], [none.dims[k] for k in RULES]])
    mask = np.ones((2, 3), np.float32)
    out = gdpo(np.zeros((2, 3), np.float32), mask, np.array([0, 0]), rewards_BxK=rewards_BxK)
    adv = np.asarray(out[0] if isinstance(out, tuple) else out.adv_BxT)
    assert adv[0, 0] > 0 > adv[1, 0]


def test_every_spec_has_a_reference():
    assert len(all_specs()) == 30


def test_check_piece_tool_and_its_artifact():
    from mimojax.envs.music.grader import grade
    from mimojax.rollout.tools import ToolSettings, make_tool_env

    row = {"env": "music", "extra": C44}
    env = make_tool_env(row, ToolSettings())
    assert [s["function"]["name"] for s in env.schemas()] == ["check_piece"]
    out = env.call_sync("check_piece", {"abc": GOOD.replace("K:C", "K:G")})
    assert out.error is None and "key: FAIL" in out.text and "score: 0.875" in out.text
    assert "format: FAIL" in env.call_sync("check_piece", {"abc": "la la"}).text
    assert env.call_sync("check_piece", {}).error == "bad_arguments"
    env.call_sync("check_piece", {"abc": GOOD})
    assert "score: 1" in env.call_sync("check_piece", {"abc": GOOD}).text
    # A final answer without ABC falls back to the last checked piece.
    out = grade("Done, see above.", "C44", {**C44, "artifacts": env.artifacts()})
    assert out["score"] == 1.0
    env.close()
