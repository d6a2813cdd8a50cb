"""invoice: fills in an invoice template (the whole input file) and signs the result.

The template may use the fields of `customer`: {customer.name}, {customer.balance},
{customer.currency}.
"""

import hashlib
import sys

with open("flag.txt") as _f:
    SECRET_KEY = _f.read().strip()  # signs invoices; never shown


class Customer:
    def __init__(self, name, balance, currency):
        self.name = name
        self.balance = balance
        self.currency = currency


def sign(text):
    return hashlib.sha256((SECRET_KEY + text).encode()).hexdigest()[:16]


def main():
    with open(sys.argv[1]) as f:
        template = f.read()
    customer = Customer("Ada Lovelace", 42.5, "EUR")
    try:
        body = template.format(customer=customer)
    except (KeyError, AttributeError, IndexError, ValueError) as e:
        print("bad template:", e)
        return 1
    print(body)
    print("signature:", sign(body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
