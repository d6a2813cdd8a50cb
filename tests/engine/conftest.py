"""Engine tests share the tiny model configs and HF fixtures of tests/models."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
