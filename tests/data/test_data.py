"""mimojax.data.prompts: reading, validation, tokenization, shuffling and resumable batches."""

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mimojax.config.loader import load_config
from mimojax.data.prompts import DataError, PromptDataset, read_rows
from mimojax.models.tokenizer import encode_chat
from mimojax.train.role_settings import prompt_dataset

WORDS = ["system", "user", "assistant", "be", "brief", "hi", "what", "is", "two"]
TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
    "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


@pytest.fixture(scope="module")
def tok():
    # A word-level tokenizer with a ChatML-like template: one token per word, built instantly.
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<|im_start|>", "<|im_end|>", *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>"], chat_template=TEMPLATE,
    )  # fmt: skip


def _rows(n, words=1):
    return [{"prompt": " ".join(["hi"] * words) + f" q{i}", "ground_truth": str(i),
             "env": "math", "extra": {"k": i}} for i in range(n)]  # fmt: skip


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _parquet(path, rows):
    keys = list(dict.fromkeys(k for r in rows for k in r))  # from_pylist reads row 0's keys only
    pq.write_table(pa.table({k: [r.get(k) for r in rows] for k in keys}), path)
    return str(path)


def _ds(tok, files, **kw):
    kw = {"max_prompt_length": 64, "batch_size": 3, **kw}
    return PromptDataset(files, tok, **kw)


def test_jsonl_and_parquet_read_the_same_rows(tmp_path):
    rows = _rows(4)
    rows[1] = {"messages": [{"role": "user", "content": "what is two"}], "ground_truth": "2",
               "env": "math", "extra": {"k": 9}}  # fmt: skip
    a = read_rows(_jsonl(tmp_path / "d.jsonl", rows))
    b = read_rows(_parquet(tmp_path / "d.parquet", rows))
    strip = [{k: v for k, v in r.items() if k != "source"} for r in a]
    assert strip == [{k: v for k, v in r.items() if k != "source"} for r in b]
    assert a[1]["messages"] == rows[1]["messages"] and "prompt" not in a[1]
    assert a[2]["source"].endswith("d.jsonl:3") and b[2]["source"].endswith("d.parquet:3")


def test_normalization_and_defaults(tmp_path):
    rows = [{"question": "hi", "ground_truth": 42}, {"question": "hi", "ground_truth": 1.5}]
    out = read_rows(_jsonl(tmp_path / "d.jsonl", rows), prompt_key="question", default_env="gsm")
    assert [r["ground_truth"] for r in out] == ["42", "1.5"]
    assert all(r["env"] == "gsm" and r["extra"] == {} and r["prompt"] == "hi" for r in out)


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"prompt": "hi", "env": "math"}', "missing 'ground_truth'"),
        ('{"prompt": "hi", "ground_truth": "1"', "malformed JSON"),
        ('{"ground_truth": "1", "env": "math"}', "missing 'prompt' and 'messages'"),
        ('{"prompt": 3, "ground_truth": "1", "env": "math"}', "'prompt' must be a string"),
        ('{"prompt": "hi", "ground_truth": "1"}', "missing 'env'"),
        ('{"prompt": "hi", "ground_truth": [1], "env": "math"}', "string or number"),
        ('{"prompt": "hi", "ground_truth": "1", "env": "m", "extra": 3}', "'extra' must be"),
        ('{"messages": [{"role": "user"}], "ground_truth": "1", "env": "m"}', "messages[0]"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_bad_row_names_file_and_row(tmp_path, line, message):
    good = json.dumps(_rows(1)[0])
    path = tmp_path / "train.jsonl"
    path.write_text(f"{good}\n\n{good}\n{line}\n")  # the blank line still counts: row 4
    with pytest.raises(DataError, match=r"train\.jsonl row 4: ") as e:
        read_rows(str(path))
    assert message in str(e.value)


def test_file_level_errors(tmp_path, tok):
    with pytest.raises(DataError, match="does not exist"):
        read_rows(str(tmp_path / "nope.jsonl"))
    (tmp_path / "d.csv").write_text("x\n")
    with pytest.raises(DataError, match="unknown data file extension"):
        read_rows(str(tmp_path / "d.csv"))
    with pytest.raises(DataError, match="no data files"):
        _ds(tok, [])


def test_too_long_prompts_dropped_and_counted(tmp_path, tok, caplog):
    rows = _rows(3, words=1) + _rows(2, words=30)
    n_short = len(encode_chat(tok, [{"role": "user", "content": rows[0]["prompt"]}]))
    with caplog.at_level(logging.WARNING, logger="mimojax.data.prompts"):
        ds = _ds(tok, _jsonl(tmp_path / "d.jsonl", rows), max_prompt_length=n_short)
    assert len(ds) == 3 and ds.num_dropped == 2
    assert len([r for r in caplog.records if "dropped 2 of 5" in r.getMessage()]) == 1
    assert [r["index"] for r in ds.all_rows()] == [0, 1, 2]
    with pytest.raises(DataError, match="no prompts left"):
        _ds(tok, _jsonl(tmp_path / "d.jsonl", rows), max_prompt_length=2)


def test_shuffle_is_a_permutation_per_epoch_and_batches_cross_epochs(tmp_path, tok):
    ds = _ds(tok, _jsonl(tmp_path / "d.jsonl", _rows(10)), batch_size=3)
    it = ds.iterator()
    seen = [ex for _ in range(10) for ex in next(it)]  # 30 examples = 3 epochs
    epochs = [[ex["index"] for ex in seen if ex["epoch"] == e] for e in range(3)]
    assert all(sorted(e) == list(range(10)) for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2] and epochs[0] != list(range(10))
    assert [ex["epoch"] for ex in seen[9:12]] == [0, 1, 1]  # batch 4 takes tail and head
    again = ds.iterator()
    assert [ex["index"] for _ in range(10) for ex in next(again)] == [e["index"] for e in seen]
    other = _ds(tok, _jsonl(tmp_path / "d.jsonl", _rows(10)), seed=1).iterator()
    assert [ex["index"] for ex in next(other)] != [ex["index"] for ex in seen[:3]]


def test_no_shuffle_is_file_order(tmp_path, tok):
    ds = _ds(tok, _jsonl(tmp_path / "d.jsonl", _rows(4)), batch_size=3, shuffle=False)
    it = ds.iterator()
    assert [ex["index"] for _ in range(3) for ex in next(it)] == [0, 1, 2, 3, 0, 1, 2, 3, 0]


def test_state_resumes_exactly(tmp_path, tok):
    ds = _ds(tok, _jsonl(tmp_path / "d.jsonl", _rows(7)), batch_size=3)
    it = ds.iterator()
    for _ in range(4):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    assert state == {"epoch": 1, "offset": 5, "seed": 0, "shuffle": True, "num_rows": 7}
    expected = [next(it) for _ in range(5)]
    resumed = ds.iterator()
    resumed.set_state(state)
    assert [next(resumed) for _ in range(5)] == expected
    fresh = _ds(tok, _jsonl(tmp_path / "d.jsonl", _rows(7)), batch_size=3).iterator()
    fresh.set_state(state)  # a new process reading the same files
    assert next(fresh) == expected[0]


def test_set_state_rejects_changed_data(tmp_path, tok):
    state = _ds(tok, _jsonl(tmp_path / "d.jsonl", _rows(7))).iterator().get_state()
    with pytest.raises(DataError, match="num_rows=7"):
        _ds(tok, _jsonl(tmp_path / "e.jsonl", _rows(8))).iterator().set_state(state)
    with pytest.raises(DataError, match="seed=0"):
        _ds(tok, _jsonl(tmp_path / "d.jsonl", _rows(7)), seed=5).iterator().set_state(state)
    with pytest.raises(DataError, match="out of range"):
        _ds(tok, _jsonl(tmp_path / "d.jsonl", _rows(7))).iterator().set_state(
            {**state, "offset": 7}
        )


def test_messages_rows_and_system_prompt(tmp_path, tok):
    user = {"role": "user", "content": "what is two"}
    system = {"role": "system", "content": "be brief"}
    rows = [{"prompt": "what is two", "ground_truth": "2", "env": "math"},
            {"messages": [user], "ground_truth": "2", "env": "math"},
            {"messages": [system, user], "ground_truth": "2", "env": "math"}]  # fmt: skip
    path = _jsonl(tmp_path / "d.jsonl", rows)
    plain = [r["prompt_ids"] for r in _ds(tok, path).all_rows()]
    assert plain[0] == plain[1] == encode_chat(tok, [user])
    assert plain[2] == encode_chat(tok, [system, user])
    sys_ids = [r["prompt_ids"] for r in _ds(tok, path, system_prompt="be brief").all_rows()]
    assert sys_ids == [plain[2]] * 3  # prepended where absent, never doubled


def test_from_config_train_and_eval(tmp_path, tok):
    cfg = load_config(str(Path(__file__).resolve().parents[2] / "configs" / "grpo_tiny.py"))
    cfg.data.train_files = ()
    with pytest.raises(DataError, match=r"data\.train_files"):
        prompt_dataset(cfg, tok, "train")
    cfg.data.train_files = (_jsonl(tmp_path / "a.jsonl", _rows(6)),)
    cfg.data.eval_files = (_jsonl(tmp_path / "b.jsonl", _rows(3)),
                           _parquet(tmp_path / "c.parquet", _rows(2)))  # fmt: skip
    train = prompt_dataset(cfg, tok, "train")
    assert train.shuffle and train.batch_size == cfg.data.batch_size and len(train) == 6
    ev = prompt_dataset(cfg, tok, "eval")
    assert not ev.shuffle and len(ev) == 5
    assert [r["source"].rsplit("/", 1)[1] for r in ev.all_rows()] == [
        "b.jsonl:1", "b.jsonl:2", "b.jsonl:3", "c.parquet:1", "c.parquet:2"
    ]  # fmt: skip
    assert [ex["index"] for ex in next(ev.iterator())] == list(range(cfg.data.batch_size))
    assert np.array_equal(ev.all_rows()[3]["prompt_ids"], ev.all_rows()[0]["prompt_ids"])


def _graded(batch, solved: set[int]):
    trajs = [SimpleNamespace(example=ex) for ex in batch]
    return trajs, [SimpleNamespace(score=float(ex["index"] in solved), valid=True) for ex in batch]


def test_difficulty_sampling_draws_solved_prompts_less_and_resumes_with_its_history(tok, tmp_path):
    files = _jsonl(tmp_path / "rows.jsonl", _rows(10))
    plain = [ex["index"] for _ in range(4) for ex in next(_ds(tok, files, batch_size=5).iterator())]
    it = _ds(tok, files, batch_size=5, difficulty={"floor": 0.1}).iterator()
    first = next(it)
    assert [ex["index"] for ex in first] == plain[:5]  # nothing known yet: the plain order
    solved = {ex["index"] for ex in first}
    it.record(*_graded(first, solved))  # every sample of these prompts passed
    state = json.loads(json.dumps(it.get_state()))
    later = [ex["index"] for _ in range(40) for ex in next(it)]
    assert np.mean([i in solved for i in later]) < 0.25  # ~0.09 expected; 0.5 without
    resumed = _ds(tok, files, batch_size=5, difficulty={"floor": 0.1}).iterator()
    resumed.set_state(state)
    assert [ex["index"] for _ in range(40) for ex in next(resumed)] == later
    assert _ds(tok, files).iterator().record([], []) == {}  # off: no history, no metrics
