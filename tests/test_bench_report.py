"""scripts/bench_report.py: ratios, met/not met, failures and the docs block, canned JSONs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load_script(name: str):
    """Import scripts/<name>.py as a module (scripts/ is not a package)."""
    s = importlib.util.spec_from_file_location(name, ROOT / f"scripts/{name}.py")
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


br = _load_script("bench_report")


def _canned(d: Path) -> None:
    gen = {
        "results": {
            "32": {"mimojax": {"decode_tok_s": 300.0}, "hf": {"decode_tok_s": 100.0}},
            "64": {"mimojax": {"decode_tok_s": 150.0}, "hf": {"decode_tok_s": 100.0}},
        }
    }
    (d / "generate.json").write_text(json.dumps(gen))
    (d / "prefill.json").write_text(
        json.dumps({"prompts": 32, "together_s": 1.0, "one_at_a_time_s": 6.0, "ratio": 6.0})
    )
    # no forward.json: that bench "crashed"


def test_from_dir_renders_ratios_failures_and_readme(tmp_path):
    _canned(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text("# x\n## Measured\n\n<!-- bench:begin -->\nold\n<!-- bench:end -->\ntail\n")
    rc = br.main(
        ["--from", str(tmp_path), "--only", "generate,prefill,forward", "--doc", str(readme)]
    )
    assert rc == 1  # forward failed
    s = json.loads((tmp_path / "summary.json").read_text())
    by = {r["metric"]: r for r in s["rows"]}
    g32 = by["decode tok/s vs HF generate, batch 32"]
    assert g32["ratio"] == 3.0 and g32["met"] is True
    assert by["decode tok/s vs HF generate, batch 64"]["met"] is False
    pre = next(r for r in s["rows"] if r["bench"] == "prefill")
    assert pre["ratio"] == 6.0 and pre["met"] is True
    assert by["forward"]["failed"] is True
    text = readme.read_text()
    assert "old" not in text and text.endswith("<!-- bench:end -->\ntail\n")
    assert "| failed |" in text and "3.00x" in text and "load average" in text


def test_all_pass_exits_zero(tmp_path):
    _canned(tmp_path)
    assert br.main(["--from", str(tmp_path), "--only", "prefill"]) == 0


def test_every_bench_command_parses_with_its_script(tmp_path, monkeypatch):
    # `--batches 32 64` once made bench_generate exit 2 and the whole report "failed".
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # the benches import bench_common
    for cmd in br.benches(5.0).values():
        script = Path(cmd[1]).stem
        mod = _load_script(script)
        if not hasattr(mod, "parse_args"):  # bench_update / bench_vs_trl parse inside main()
            continue
        args = [c.replace("{json}", str(tmp_path / "x.json")) for c in cmd[2:]]
        mod.parse_args(args)  # argparse exits on an unknown or malformed argument
