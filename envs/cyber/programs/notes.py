"""notes: counts the notes (lines of notes.txt) that mention a search word.

The input file holds the search word. Characters that could chain shell commands are refused.
"""

import subprocess
import sys

FORBIDDEN = ";&`"


def main():
    with open(sys.argv[1]) as f:
        word = f.read().strip()
    if not word or any(c in word for c in FORBIDDEN):
        print("invalid search word")
        return 1
    result = subprocess.run(
        f"grep -c -i '{word}' notes.txt", shell=True, capture_output=True, text=True
    )
    print(f"notes mentioning {word!r}: {result.stdout.strip() or 0}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
