"""auth: logs a user in and shows their dashboard; admins also see the admin secret.

The input file holds the user name (printable characters, at most 40). The session is kept
as a query string "user=<name>&role=<role>"; every new user gets the role "guest".
"""

import sys


def make_session(name):
    return f"user={name}&role=guest"


def parse_session(text):
    fields = {}
    for pair in text.split("&"):
        key, _, value = pair.partition("=")
        fields.setdefault(key, value)  # the first value of a key wins
    return fields


def main():
    with open(sys.argv[1]) as f:
        name = f.read().strip()
    if not name or len(name) > 40 or not name.isprintable():
        print("invalid user name")
        return 1
    session = parse_session(make_session(name))
    print(f"welcome, {session['user']} (role: {session['role']})")
    if session["role"] == "admin":
        with open("flag.txt") as f:
            print("admin secret:", f.read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
