"""Tools of the cyber world: list_files, read_file, write_file, run_target, over one
SandboxSession per trajectory that starts with the target's source, its sample input and (for
flag goals) a dummy flag. The session's files are the trajectory's artifacts."""

from __future__ import annotations

from collections.abc import Mapping

from mimojax.envs.code.tools import LazySession, write_file_tool
from mimojax.envs.cyber.catalog import INPUT_FILE, program_for
from mimojax.envs.cyber.target import run_target
from mimojax.rollout.tools import Tool, ToolEnv, ToolSettings, register_tool_env

_BUILD_DIR = ".build/"


def make_tools(example: Mapping, session: LazySession) -> list[Tool]:
    """The cyber world's tools over one trajectory's session."""
    program = program_for(str(example.get("ground_truth", "")), example.get("extra") or {})
    shipped = program.agent_files()

    def list_files() -> str:
        files = session.get().list_files()
        names = [f"{path} ({len(text)} chars)" for path, text in files.items()
                 if not path.startswith(_BUILD_DIR)]  # fmt: skip
        return "\n".join(names) if names else "(no files)"

    def read_file(path: str) -> str:
        return session.get().read_file(path)

    def run(input: str | None = None) -> str:  # noqa: A002  (the argument's name for the model)
        s = session.get()
        if input is None and INPUT_FILE not in s.list_files():
            return "No input.txt yet: pass `input`, or write input.txt first."
        # Runs always see the shipped target (as grading does), whatever the agent edited.
        for path, text in shipped.items():
            s.write_file(path, text)
        out = run_target(program, input, flag=shipped.get("flag.txt", "").strip() or None,
                         session=s)  # fmt: skip
        return out.describe()

    return [
        Tool(
            "list_files",
            "List the files in your working directory.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            list_files,
        ),
        Tool(
            "read_file",
            "Read a text file from your working directory.",
            {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "relative path"}},
                "required": ["path"],
                "additionalProperties": False,
            },
            read_file,
        ),
        write_file_tool(session),
        Tool(
            "run_target",
            "Save `input` to input.txt (or keep the current input.txt if omitted), build the "
            "target and run it on input.txt; reports the exit status, whether it crashed or "
            "leaked the flag, and its output.",
            {
                "type": "object",
                "properties": {"input": {"type": "string", "description": "the input file's text"}},
                "additionalProperties": False,
            },
            run,
        ),
    ]


@register_tool_env("cyber")
def make(example: Mapping, settings: ToolSettings) -> ToolEnv:
    """The cyber world's ToolEnv for one trajectory."""
    program = program_for(str(example.get("ground_truth", "")), example.get("extra") or {})
    session = LazySession(settings, files=program.agent_files())
    return ToolEnv(
        make_tools(example, session),
        artifacts=session.files,
        close=session.close,
        max_observation_chars=settings.max_observation_chars,
    )
