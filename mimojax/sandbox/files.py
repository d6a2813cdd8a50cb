"""The sandbox's host-side files: a private temp box, checked relative paths, safe tree walks.

The sandbox can leave symlinks in its work dir pointing at host files; every host-side read,
write, chown and removal here refuses or ignores them, since it runs with the caller's rights.
"""

from __future__ import annotations

import os
import shutil
import tempfile

SANDBOX_UID = 65534  # "nobody"
WORK = "/sandbox"  # the work dir, seen from inside
_PASSWD = f"root:x:0:0::/:/bin/sh\nsandbox:x:{SANDBOX_UID}:{SANDBOX_UID}::{WORK}:/bin/sh\n"
_GROUP = f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\n"


def checked_rel(path: str) -> str:
    """path itself if it is relative and free of '..', else ValueError naming it."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError(f"sandbox file path {path!r} must be a non-empty relative path")
    if os.path.isabs(path) or ".." in path.replace("\\", "/").split("/"):
        raise ValueError(f"sandbox file path {path!r} must be relative, without '..'")
    return path


def inside(root: str, rel: str) -> str:
    """Host path of rel under root; ValueError if it resolves (through a symlink) elsewhere."""
    full = os.path.join(root, checked_rel(rel))
    real, real_root = os.path.realpath(full), os.path.realpath(root)
    if os.path.commonpath([real, real_root]) != real_root:
        raise ValueError(f"sandbox file path {rel!r} leads outside the work dir")
    return full


def write(root: str, rel: str, content: str | bytes) -> None:
    """Writes content (str as UTF-8) at root/rel, creating parent dirs."""
    full = inside(root, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    inside(root, rel)  # again, now that the parents exist: one of them may be a symlink
    data = content.encode() if isinstance(content, str) else bytes(content)
    with open(full, "wb") as f:
        f.write(data)


def chown_tree(root: str, uid: int) -> None:
    """Hands a tree to uid; lchown and no link following, so a planted symlink moves nothing."""
    os.lchown(root, uid, uid)
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(dirpath, name), uid, uid)


def remove_tree(root: str) -> None:
    """Removes a tree the sandbox may have chmod-ed to 000 (that stops rmtree as non-root)."""
    for dirpath, dirs, _ in os.walk(root):
        for name in dirs:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
    shutil.rmtree(root, ignore_errors=True)


def snapshot(root: str, max_file_bytes: int, max_total_bytes: int) -> dict[str, str]:
    """{relative path: text} of root's regular UTF-8 files, sorted, within the size caps."""
    out, total = {}, 0
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(dirpath, name)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            size = os.path.getsize(full)
            if size > max_file_bytes or total + size > max_total_bytes:
                continue
            try:
                with open(full, "rb") as f:
                    text = f.read(max_file_bytes + 1).decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out[os.path.relpath(full, root)] = text
            total += size
    return out


def _box_parent() -> str:
    """The temp dir, unless uid 65534 cannot pass through it (e.g. TMPDIR under /root)."""
    parent = tempfile.gettempdir()
    path = os.path.realpath(parent)
    while path != "/":
        if not os.stat(path).st_mode & 0o001:
            return "/tmp" if os.path.isdir("/tmp") else parent
        path = os.path.dirname(path)
    return parent


class Box:
    """A private temp root: `work` (the work dir), `prog` (this run's program), `etc`."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="mimojax-sandbox-", dir=_box_parent())
        self.work = os.path.join(self.root, "work")
        self.prog = os.path.join(self.root, "prog")
        self.etc = os.path.join(self.root, "etc")
        for d in (self.work, self.prog, self.etc):
            os.mkdir(d)
        write(self.etc, "passwd", _PASSWD)
        write(self.etc, "group", _GROUP)

    def hand_to(self, uid: int) -> None:
        """Gives the box's contents to uid (0700 each); the root only lets it through (0711)."""
        # bwrap running as uid binds these by path; other host users still see nothing inside.
        for path in (self.work, self.prog, self.etc):
            chown_tree(path, uid)
            os.chmod(path, 0o700)
        os.chmod(self.root, 0o711)

    def close(self) -> None:
        """Removes the box and everything the sandbox left in it."""
        remove_tree(self.root)
