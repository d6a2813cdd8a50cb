"""Why a checkpoint cannot be read or written: the error classes, one-line reasons, warnings.

`mimojax.checkpoint.manager` raises these; a reason is the one useful line of an orbax /
tensorstore / OS exception (its spec dump dropped), so a skipped or failed step reads as one line.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import threading

log = logging.getLogger("mimojax.checkpoint.manager")

COMMIT_MARKER = "commit_success.txt"  # orbax writes it into the tmp dir just before the rename
STEP_METADATA = "_CHECKPOINT_METADATA"
_MAX_REASON = 400  # characters of an exception message kept in a one-line reason


class CheckpointError(ValueError):
    """A checkpoint that cannot be saved or restored as asked (names the dir, step and field)."""


class CheckpointSaveError(CheckpointError):
    """A save that failed (disk full, directory gone or not a directory); earlier steps intact."""


class CheckpointMismatchError(CheckpointError):
    """The saved array tree differs from the restore target (another model or optimizer)."""


class CheckpointUnreadableError(CheckpointError):
    """A checkpoint (or every checkpoint) whose files cannot be read back."""


class Unreadable(Exception):
    """One step failed verification; the message is the one-line reason."""


class OpenFailed(Exception):
    """The checkpoint directory cannot be opened; the message is the one-line reason."""


def one_line(e: BaseException) -> str:
    """The useful line of an orbax/tensorstore/OS exception: an OSError in its chain wins."""
    chain, seen = [], set()
    c: BaseException | None = e
    while c is not None and id(c) not in seen:
        seen.add(id(c))
        chain.append(c)
        c = c.__cause__ or c.__context__
    picked = next((c for c in chain if isinstance(c, OSError) and c.errno), None)
    if picked is None:
        # orbax wraps tensorstore's error in "Encountered error while reading array index ...
        # See full TensorStore details: <the whole spec>"; the cause says what went wrong.
        useful = [c for c in chain if str(c) and "See full TensorStore details" not in str(c)]
        picked = useful[0] if useful else e
    text = str(picked) or type(picked).__name__
    text = re.split(r" \[tensorstore_spec=|See full TensorStore details", text)[0]
    text = " ".join(text.split())
    if isinstance(picked, json.JSONDecodeError):
        text = f"not valid JSON ({text})"
    elif not isinstance(picked, (OSError, ValueError)) and type(picked) is not Exception:
        text = f"{type(picked).__name__}: {text}"
    if len(text) <= _MAX_REASON:
        return text
    # tensorstore puts the OS error last, after the paths: keep both ends
    head = _MAX_REASON // 2
    return text[:head] + " ... " + text[-(_MAX_REASON - head - 5) :]


def warn(msg: str) -> None:
    """A warning in the log, and on stderr when the log does not already go there."""
    log.warning(msg)
    logger: logging.Logger | None = log
    handlers = []
    while logger is not None:
        handlers += logger.handlers
        logger = logger.parent if logger.propagate else None
    to_stderr = not handlers or any(
        isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is sys.stderr
        for h in handlers
    )
    if not to_stderr or not log.isEnabledFor(logging.WARNING):
        print(f"WARNING: {msg}", file=sys.stderr)


def check_step_files(directory: str, step: int) -> None:
    """The commit marker and orbax's step record, which a committed step always has.

    Orbax itself lists a step without them and restores it; their absence or garbling means
    files of the step were lost after the commit, so the step is not trusted.
    """
    root = os.path.join(directory, str(step))
    if not os.path.isfile(os.path.join(root, COMMIT_MARKER)):
        raise Unreadable(f"{COMMIT_MARKER} (the commit marker) is missing")
    try:
        with open(os.path.join(root, STEP_METADATA), "rb") as f:
            record = json.loads(f.read())
    except Exception as e:
        raise Unreadable(f"{STEP_METADATA}: {one_line(e)}") from e
    if not isinstance(record, dict):
        raise Unreadable(f"{STEP_METADATA}: not a JSON object")


# ---- what a failed save leaves behind ----


def _join_orbax_threads(timeout_s: float = 120.0) -> None:
    """Waits for the commit threads a failed save still runs. Orbax's background save stops at
    its first failed commit future, while the others (meta, metadata, ...) keep going: one that
    is still running mkdirs `<step>.orbax-checkpoint-tmp/...` again after we delete it."""
    me = threading.current_thread()
    for t in threading.enumerate():
        orbax_thread = type(t).__module__.startswith("orbax.") or t.name == "async_save"
        if t is not me and orbax_thread and t.is_alive():
            try:
                t.join(timeout_s)
            except Exception:  # orbax's commit threads re-raise their own error from join()
                pass


def remove_failed_save(directory: str, *, primary: bool = True) -> None:
    """Deletes what a failed save left (`<step>.orbax-checkpoint-tmp*`) once its threads end
    (every process waits for its own; only the `primary` one deletes). Orbax's own cleanup of a
    failed save can lose a race with tensorstore removing its lock file (`manifest.ocdbt.__lock`)
    and stop half-way, leaving the tmp dir behind."""
    _join_orbax_threads()
    if not primary or not os.path.isdir(directory):
        return
    for name in os.listdir(directory):
        if ".orbax-checkpoint-tmp" in name:
            path = os.path.join(directory, name)
            for _ in range(3):  # a file vanishing mid-walk only ends one pass
                shutil.rmtree(path, ignore_errors=True)
                if not os.path.exists(path):
                    break
