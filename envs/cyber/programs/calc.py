"""calc: evaluates one arithmetic expression per input line and prints the result.

Dangerous words are blocked before evaluating, so only arithmetic gets through.
"""

import sys

BLOCKED = ("import", "open(", "exec", "eval", "__", "compile", "globals", "getattr", "system")


def main():
    with open(sys.argv[1]) as f:
        lines = f.read().splitlines()
    for line in lines:
        expr = line.strip()
        if not expr:
            continue
        if any(word in expr for word in BLOCKED):
            print(f"{expr}: blocked")
            continue
        try:
            print(f"{expr} = {eval(expr)}")
        except Exception as e:
            print(f"{expr}: error: {type(e).__name__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
