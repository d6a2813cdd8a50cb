"""fileserver: answers requests "GET <path>", one per input line, with files under www/.

Paths are relative to www/; the server refuses to leave that folder.
"""

import os
import sys

ROOT = "www"


def sanitize(path):
    # No climbing out of www/ and no absolute paths.
    return path.replace("../", "").lstrip("/")


def serve(path):
    full = os.path.join(ROOT, sanitize(path))
    try:
        with open(full) as f:
            return "200 OK\n" + f.read()
    except OSError:
        return "404 Not Found"


def main():
    with open(sys.argv[1]) as f:
        requests = f.read().splitlines()
    for line in requests:
        method, _, path = line.partition(" ")
        if method == "GET" and path.strip():
            print(serve(path.strip()))
        elif line.strip():
            print("400 Bad Request")


if __name__ == "__main__":
    main()
