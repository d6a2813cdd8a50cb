"""The shipped programming tasks: prompt parts, visible and hidden tests, a reference and a
plausible wrong solution (the last two only for the tests of this world).

Tests are single `assert` statements. Compare with `==` against plain values (numbers,
strings, lists, tuples, dicts, sets, None, bools): the grader's runner checks such asserts
strictly, so an object whose `__eq__` always answers True does not pass.
"""

from __future__ import annotations

import dataclasses
import textwrap


@dataclasses.dataclass(frozen=True)
class CodeTask:
    """One task; `example` is a visible test phrased as "f(x) == y" for the prompt."""

    task_id: str
    entry_point: str
    signature: str
    description: str
    example: str
    visible: tuple[str, ...]
    hidden: tuple[str, ...]
    reference: str
    wrong: str
    level: str = "easy"  # "easy" | "hard": only for reading; both splits mix them


def _t(task_id, signature, description, example, visible, hidden, reference, wrong, level="easy"):
    entry = signature.split("def ", 1)[1].split("(", 1)[0]
    return CodeTask(
        task_id=task_id,
        entry_point=entry,
        signature=signature,
        description=description,
        example=example,
        visible=tuple(visible),
        hidden=tuple(hidden),
        reference=textwrap.dedent(reference).strip() + "\n",
        wrong=textwrap.dedent(wrong).strip() + "\n",
        level=level,
    )


TASKS: tuple[CodeTask, ...] = (
    _t(
        "add",
        "def add(a: int, b: int) -> int:",
        "Return the sum of `a` and `b`.",
        "add(2, 3) == 5",
        ["assert add(2, 3) == 5"],
        [
            "assert add(0, 0) == 0",
            "assert add(-4, 10) == 6",
            "assert add(100, 23) == 123",
            "assert add(-7, -8) == -15",
        ],
        """
        def add(a, b):
            return a + b
        """,
        """
        def add(a, b):
            return abs(a) + abs(b)
        """,
    ),
    _t(
        "reverse_string",
        "def reverse_string(s: str) -> str:",
        "Return `s` with its characters in reverse order.",
        'reverse_string("abc") == "cba"',
        ['assert reverse_string("abc") == "cba"'],
        [
            'assert reverse_string("") == ""',
            'assert reverse_string("a") == "a"',
            'assert reverse_string("hello world") == "dlrow olleh"',
            'assert reverse_string("racecar") == "racecar"',
            'assert reverse_string("ab") == "ba"',
        ],
        """
        def reverse_string(s):
            return s[::-1]
        """,
        """
        def reverse_string(s):
            return s[:0:-1]
        """,
    ),
    _t(
        "count_vowels",
        "def count_vowels(s: str) -> int:",
        "Return how many characters of `s` are vowels (a, e, i, o, u, in either case).",
        'count_vowels("Hello") == 2',
        ['assert count_vowels("Hello") == 2'],
        [
            'assert count_vowels("") == 0',
            'assert count_vowels("AEIOU") == 5',
            'assert count_vowels("rhythm") == 0',
            'assert count_vowels("Programming is fun") == 5',
        ],
        """
        def count_vowels(s):
            return sum(1 for c in s if c.lower() in 'aeiou')
        """,
        """
        def count_vowels(s):
            return sum(1 for c in s if c in 'aeiou')
        """,
    ),
    _t(
        "is_palindrome",
        "def is_palindrome(s: str) -> bool:",
        "Return True if `s` reads the same forwards and backwards when you ignore case and "
        "every character that is not a letter or digit, else False.",
        'is_palindrome("A man, a plan, a canal: Panama") == True',
        [
            'assert is_palindrome("A man, a plan, a canal: Panama") == True',
            'assert is_palindrome("hello") == False',
        ],
        [
            'assert is_palindrome("") == True',
            'assert is_palindrome("Racecar") == True',
            'assert is_palindrome("No lemon, no melon") == True',
            'assert is_palindrome("ab") == False',
            'assert is_palindrome("12321") == True',
            'assert is_palindrome("12 3 4") == False',
        ],
        """
        def is_palindrome(s):
            t = [c.lower() for c in s if c.isalnum()]
            return t == t[::-1]
        """,
        """
        def is_palindrome(s):
            return s == s[::-1]
        """,
    ),
    _t(
        "max_of_list",
        "def max_of_list(nums: list) -> int | None:",
        "Return the largest number in `nums`, or None if the list is empty.",
        "max_of_list([3, 9, 2]) == 9",
        ["assert max_of_list([3, 9, 2]) == 9"],
        [
            "assert max_of_list([]) == None",
            "assert max_of_list([-5, -2, -9]) == -2",
            "assert max_of_list([7]) == 7",
            "assert max_of_list([1, 2, 3, 4, 5]) == 5",
        ],
        """
        def max_of_list(nums):
            return max(nums) if nums else None
        """,
        """
        def max_of_list(nums):
            best = 0
            for n in nums:
                if n > best:
                    best = n
            return best if nums else None
        """,
    ),
    _t(
        "sum_of_evens",
        "def sum_of_evens(nums: list) -> int:",
        "Return the sum of the even numbers in `nums` (0 if there are none).",
        "sum_of_evens([1, 2, 3, 4]) == 6",
        ["assert sum_of_evens([1, 2, 3, 4]) == 6"],
        [
            "assert sum_of_evens([]) == 0",
            "assert sum_of_evens([1, 3, 5]) == 0",
            "assert sum_of_evens([-2, -4, 3]) == -6",
            "assert sum_of_evens([10, 20, 31]) == 30",
        ],
        """
        def sum_of_evens(nums):
            return sum(n for n in nums if n % 2 == 0)
        """,
        """
        def sum_of_evens(nums):
            return sum(n for n in nums if n > 0 and n % 2 == 0)
        """,
    ),
    _t(
        "factorial",
        "def factorial(n: int) -> int:",
        "Return n! (the product 1 * 2 * ... * n) for n >= 0; factorial(0) is 1.",
        "factorial(5) == 120",
        ["assert factorial(5) == 120"],
        [
            "assert factorial(0) == 1",
            "assert factorial(1) == 1",
            "assert factorial(3) == 6",
            "assert factorial(10) == 3628800",
            "assert factorial(20) == 2432902008176640000",
        ],
        """
        def factorial(n):
            out = 1
            for i in range(2, n + 1):
                out *= i
            return out
        """,
        """
        def factorial(n):
            out = 1
            for i in range(1, n):
                out *= i
            return out
        """,
    ),
    _t(
        "fibonacci",
        "def fibonacci(n: int) -> int:",
        "Return the n-th Fibonacci number, where fibonacci(0) == 0 and fibonacci(1) == 1.",
        "fibonacci(10) == 55",
        ["assert fibonacci(10) == 55"],
        [
            "assert fibonacci(0) == 0",
            "assert fibonacci(1) == 1",
            "assert fibonacci(2) == 1",
            "assert fibonacci(7) == 13",
            "assert fibonacci(50) == 12586269025",
        ],
        """
        def fibonacci(n):
            a, b = 0, 1
            for _ in range(n):
                a, b = b, a + b
            return a
        """,
        """
        def fibonacci(n):
            a, b = 1, 1
            for _ in range(n - 1):
                a, b = b, a + b
            return a
        """,
    ),
    _t(
        "is_prime",
        "def is_prime(n: int) -> bool:",
        "Return True if `n` is a prime number, else False (numbers below 2 are not prime).",
        "is_prime(7) == True",
        ["assert is_prime(7) == True", "assert is_prime(8) == False"],
        [
            "assert is_prime(0) == False",
            "assert is_prime(1) == False",
            "assert is_prime(2) == True",
            "assert is_prime(9) == False",
            "assert is_prime(97) == True",
            "assert is_prime(7919) == True",
            "assert is_prime(-7) == False",
        ],
        """
        def is_prime(n):
            if n < 2:
                return False
            i = 2
            while i * i <= n:
                if n % i == 0:
                    return False
                i += 1
            return True
        """,
        """
        def is_prime(n):
            for i in range(2, n):
                if n % i == 0:
                    return False
            return True
        """,
    ),
    _t(
        "gcd",
        "def gcd(a: int, b: int) -> int:",
        "Return the greatest common divisor of two non-negative integers; gcd(0, 0) is 0.",
        "gcd(12, 18) == 6",
        ["assert gcd(12, 18) == 6"],
        [
            "assert gcd(0, 5) == 5",
            "assert gcd(7, 0) == 7",
            "assert gcd(17, 5) == 1",
            "assert gcd(100, 75) == 25",
            "assert gcd(0, 0) == 0",
        ],
        """
        def gcd(a, b):
            while b:
                a, b = b, a % b
            return a
        """,
        """
        def gcd(a, b):
            for d in range(min(a, b), 0, -1):
                if a % d == 0 and b % d == 0:
                    return d
            return 0
        """,
    ),
    _t(
        "fizzbuzz",
        "def fizzbuzz(n: int) -> list:",
        'Return a list of strings for 1..n: "Fizz" for multiples of 3, "Buzz" for multiples '
        'of 5, "FizzBuzz" for multiples of both, otherwise the number as a string.',
        'fizzbuzz(5) == ["1", "2", "Fizz", "4", "Buzz"]',
        ['assert fizzbuzz(5) == ["1", "2", "Fizz", "4", "Buzz"]'],
        [
            "assert fizzbuzz(0) == []",
            'assert fizzbuzz(1) == ["1"]',
            'assert fizzbuzz(15)[-1] == "FizzBuzz"',
            "assert len(fizzbuzz(30)) == 30",
            'assert fizzbuzz(15)[9] == "Buzz"',
        ],
        """
        def fizzbuzz(n):
            out = []
            for i in range(1, n + 1):
                if i % 15 == 0:
                    out.append('FizzBuzz')
                elif i % 3 == 0:
                    out.append('Fizz')
                elif i % 5 == 0:
                    out.append('Buzz')
                else:
                    out.append(str(i))
            return out
        """,
        """
        def fizzbuzz(n):
            out = []
            for i in range(1, n + 1):
                if i % 3 == 0:
                    out.append('Fizz')
                elif i % 5 == 0:
                    out.append('Buzz')
                else:
                    out.append(str(i))
            return out
        """,
    ),
    _t(
        "capitalize_words",
        "def capitalize_words(s: str) -> str:",
        "Return `s` with the first letter of every space-separated word in upper case and the "
        "rest of each word unchanged; keep the spaces as they are.",
        'capitalize_words("hello world") == "Hello World"',
        ['assert capitalize_words("hello world") == "Hello World"'],
        [
            'assert capitalize_words("") == ""',
            'assert capitalize_words("a") == "A"',
            'assert capitalize_words("one  two") == "One  Two"',
            'assert capitalize_words("iPhone case") == "IPhone Case"',
        ],
        """
        def capitalize_words(s):
            return ' '.join(w[:1].upper() + w[1:] for w in s.split(' '))
        """,
        """
        def capitalize_words(s):
            return s.title()
        """,
    ),
    _t(
        "remove_duplicates",
        "def remove_duplicates(items: list) -> list:",
        "Return a new list with the repeated elements of `items` removed, keeping the first "
        "occurrence of each and the original order.",
        "remove_duplicates([1, 2, 1, 3, 2]) == [1, 2, 3]",
        ["assert remove_duplicates([1, 2, 1, 3, 2]) == [1, 2, 3]"],
        [
            "assert remove_duplicates([]) == []",
            "assert remove_duplicates([5, 5, 5]) == [5]",
            "assert remove_duplicates([3, 1, 2]) == [3, 1, 2]",
            'assert remove_duplicates(["b", "a", "b"]) == ["b", "a"]',
        ],
        """
        def remove_duplicates(items):
            seen, out = set(), []
            for x in items:
                if x not in seen:
                    seen.add(x)
                    out.append(x)
            return out
        """,
        """
        def remove_duplicates(items):
            return sorted(set(items))
        """,
    ),
    _t(
        "flatten",
        "def flatten(nested: list) -> list:",
        "Return a flat list of all non-list elements of `nested`, which may contain lists "
        "nested to any depth, in left-to-right order.",
        "flatten([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]",
        ["assert flatten([1, [2, [3, 4]], 5]) == [1, 2, 3, 4, 5]"],
        [
            "assert flatten([]) == []",
            "assert flatten([[[]]]) == []",
            "assert flatten([[1], [2], [3]]) == [1, 2, 3]",
            'assert flatten([["a", ["b"]], "c"]) == ["a", "b", "c"]',
        ],
        """
        def flatten(nested):
            out = []
            for x in nested:
                if isinstance(x, list):
                    out.extend(flatten(x))
                else:
                    out.append(x)
            return out
        """,
        """
        def flatten(nested):
            out = []
            for x in nested:
                if isinstance(x, list):
                    out.extend(x)
                else:
                    out.append(x)
            return out
        """,
        "hard",
    ),
    _t(
        "char_frequency",
        "def char_frequency(s: str) -> dict:",
        "Return a dict mapping each character of `s` to the number of times it occurs.",
        'char_frequency("aab") == {"a": 2, "b": 1}',
        ['assert char_frequency("aab") == {"a": 2, "b": 1}'],
        [
            'assert char_frequency("") == {}',
            'assert char_frequency("zzz") == {"z": 3}',
            'assert char_frequency("a b") == {"a": 1, " ": 1, "b": 1}',
            'assert char_frequency("Aa") == {"A": 1, "a": 1}',
        ],
        """
        def char_frequency(s):
            out = {}
            for c in s:
                out[c] = out.get(c, 0) + 1
            return out
        """,
        """
        def char_frequency(s):
            out = {}
            for c in s.lower():
                if c != ' ':
                    out[c] = out.get(c, 0) + 1
            return out
        """,
    ),
    _t(
        "second_largest",
        "def second_largest(nums: list) -> int | None:",
        "Return the second largest distinct value in `nums`, or None if there are fewer than "
        "two distinct values.",
        "second_largest([4, 1, 7, 3]) == 4",
        ["assert second_largest([4, 1, 7, 3]) == 4"],
        [
            "assert second_largest([]) == None",
            "assert second_largest([5]) == None",
            "assert second_largest([5, 5, 5]) == None",
            "assert second_largest([9, 9, 2]) == 2",
            "assert second_largest([-1, -3, -2]) == -2",
        ],
        """
        def second_largest(nums):
            vals = sorted(set(nums))
            return vals[-2] if len(vals) >= 2 else None
        """,
        """
        def second_largest(nums):
            vals = sorted(nums)
            return vals[-2] if len(vals) >= 2 else None
        """,
        "hard",
    ),
    _t(
        "run_length_encode",
        "def run_length_encode(s: str) -> str:",
        "Encode `s` as runs: each maximal run of one repeated character becomes the character "
        "followed by the run length.",
        'run_length_encode("aaabcc") == "a3b1c2"',
        ['assert run_length_encode("aaabcc") == "a3b1c2"'],
        [
            'assert run_length_encode("") == ""',
            'assert run_length_encode("a") == "a1"',
            'assert run_length_encode("abab") == "a1b1a1b1"',
            'assert run_length_encode("zzzzzzzzzzzz") == "z12"',
        ],
        """
        def run_length_encode(s):
            out, i = [], 0
            while i < len(s):
                j = i
                while j < len(s) and s[j] == s[i]:
                    j += 1
                out.append(f'{s[i]}{j - i}')
                i = j
            return ''.join(out)
        """,
        """
        def run_length_encode(s):
            out = []
            for c in sorted(set(s)):
                out.append(f'{c}{s.count(c)}')
            return ''.join(out)
        """,
        "hard",
    ),
    _t(
        "is_anagram",
        "def is_anagram(a: str, b: str) -> bool:",
        "Return True if `a` and `b` contain exactly the same letters the same number of "
        "times, ignoring case and spaces, else False.",
        'is_anagram("listen", "silent") == True',
        ['assert is_anagram("listen", "silent") == True'],
        [
            'assert is_anagram("abc", "abd") == False',
            'assert is_anagram("Dormitory", "dirty room") == True',
            'assert is_anagram("aab", "abb") == False',
            'assert is_anagram("", "") == True',
        ],
        """
        def is_anagram(a, b):
            norm = lambda s: sorted(s.replace(' ', '').lower())
            return norm(a) == norm(b)
        """,
        """
        def is_anagram(a, b):
            return set(a.replace(' ', '').lower()) == set(b.replace(' ', '').lower())
        """,
    ),
    _t(
        "digit_sum",
        "def digit_sum(n: int) -> int:",
        "Return the sum of the decimal digits of `n` (the sign of a negative `n` is ignored).",
        "digit_sum(123) == 6",
        ["assert digit_sum(123) == 6"],
        [
            "assert digit_sum(0) == 0",
            "assert digit_sum(-45) == 9",
            "assert digit_sum(9999) == 36",
            "assert digit_sum(1000001) == 2",
        ],
        """
        def digit_sum(n):
            return sum(int(c) for c in str(abs(n)))
        """,
        """
        def digit_sum(n):
            total = 0
            while n > 0:
                total += n % 10
                n //= 10
            return total
        """,
    ),
    _t(
        "count_words",
        "def count_words(s: str) -> int:",
        "Return the number of words in `s`, where words are separated by any amount of whitespace.",
        'count_words("the quick brown fox") == 4',
        ['assert count_words("the quick brown fox") == 4'],
        [
            'assert count_words("") == 0',
            'assert count_words("   ") == 0',
            'assert count_words("  hello   world ") == 2',
            'assert count_words("one\\ttwo\\nthree") == 3',
        ],
        """
        def count_words(s):
            return len(s.split())
        """,
        """
        def count_words(s):
            return len(s.split(' '))
        """,
    ),
    _t(
        "celsius_to_fahrenheit",
        "def celsius_to_fahrenheit(c: float) -> float:",
        "Convert a temperature from degrees Celsius to degrees Fahrenheit (F = C * 9 / 5 + 32).",
        "celsius_to_fahrenheit(100) == 212.0",
        ["assert celsius_to_fahrenheit(100) == 212.0"],
        [
            "assert celsius_to_fahrenheit(0) == 32.0",
            "assert celsius_to_fahrenheit(-40) == -40.0",
            "assert celsius_to_fahrenheit(37) == 98.6",
            "assert celsius_to_fahrenheit(-273.15) == -459.67",
        ],
        """
        def celsius_to_fahrenheit(c):
            return c * 9 / 5 + 32
        """,
        """
        def celsius_to_fahrenheit(c):
            return (c + 32) * 9 / 5
        """,
    ),
    _t(
        "merge_sorted",
        "def merge_sorted(a: list, b: list) -> list:",
        "Given two lists sorted in ascending order, return one ascending list holding all "
        "elements of both (keep duplicates).",
        "merge_sorted([1, 4, 6], [2, 3, 7]) == [1, 2, 3, 4, 6, 7]",
        ["assert merge_sorted([1, 4, 6], [2, 3, 7]) == [1, 2, 3, 4, 6, 7]"],
        [
            "assert merge_sorted([], []) == []",
            "assert merge_sorted([], [1, 2]) == [1, 2]",
            "assert merge_sorted([1, 1], [1]) == [1, 1, 1]",
            "assert merge_sorted([5, 9], [1, 2, 3]) == [1, 2, 3, 5, 9]",
        ],
        """
        def merge_sorted(a, b):
            i = j = 0
            out = []
            while i < len(a) and j < len(b):
                if a[i] <= b[j]:
                    out.append(a[i])
                    i += 1
                else:
                    out.append(b[j])
                    j += 1
            return out + a[i:] + b[j:]
        """,
        """
        def merge_sorted(a, b):
            return sorted(set(a + b))
        """,
    ),
    _t(
        "binary_to_int",
        "def binary_to_int(bits: str) -> int:",
        "Return the integer value of `bits`, a non-empty string of 0s and 1s (most "
        "significant bit first).",
        'binary_to_int("101") == 5',
        ['assert binary_to_int("101") == 5'],
        [
            'assert binary_to_int("0") == 0',
            'assert binary_to_int("1") == 1',
            'assert binary_to_int("11111111") == 255',
            'assert binary_to_int("00100") == 4',
            'assert binary_to_int("1000000000000000") == 32768',
        ],
        """
        def binary_to_int(bits):
            value = 0
            for b in bits:
                value = value * 2 + int(b)
            return value
        """,
        """
        def binary_to_int(bits):
            return sum(2 ** i for i, b in enumerate(bits) if b == '1')
        """,
    ),
    _t(
        "chunk_list",
        "def chunk_list(items: list, size: int) -> list:",
        "Split `items` into consecutive chunks of `size` elements (the last chunk may be "
        "shorter) and return the list of chunks.",
        "chunk_list([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]",
        ["assert chunk_list([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]"],
        [
            "assert chunk_list([], 3) == []",
            "assert chunk_list([1, 2, 3], 3) == [[1, 2, 3]]",
            "assert chunk_list([1, 2, 3], 1) == [[1], [2], [3]]",
            "assert chunk_list([1, 2], 5) == [[1, 2]]",
        ],
        """
        def chunk_list(items, size):
            return [items[i:i + size] for i in range(0, len(items), size)]
        """,
        """
        def chunk_list(items, size):
            return [items[i:i + size] for i in range(0, len(items) - size + 1, size)]
        """,
    ),
    _t(
        "longest_common_prefix",
        "def longest_common_prefix(words: list) -> str:",
        'Return the longest string that every word in `words` starts with ("" for an empty list).',
        'longest_common_prefix(["flower", "flow", "flight"]) == "fl"',
        ['assert longest_common_prefix(["flower", "flow", "flight"]) == "fl"'],
        [
            'assert longest_common_prefix([]) == ""',
            'assert longest_common_prefix(["dog", "car"]) == ""',
            'assert longest_common_prefix(["same", "same"]) == "same"',
            'assert longest_common_prefix(["abc"]) == "abc"',
            'assert longest_common_prefix(["ab", "a", "abc"]) == "a"',
        ],
        """
        def longest_common_prefix(words):
            if not words:
                return ''
            prefix = words[0]
            for w in words[1:]:
                while not w.startswith(prefix):
                    prefix = prefix[:-1]
            return prefix
        """,
        """
        def longest_common_prefix(words):
            if not words:
                return ''
            a, b = words[0], words[-1]
            i = 0
            while i < min(len(a), len(b)) and a[i] == b[i]:
                i += 1
            return a[:i]
        """,
        "hard",
    ),
    _t(
        "valid_parentheses",
        "def valid_parentheses(s: str) -> bool:",
        "Return True if every bracket in `s` ((), [] and {}) is closed by the same kind of "
        "bracket in the right order, else False. `s` holds only brackets.",
        'valid_parentheses("([]{})") == True',
        ['assert valid_parentheses("([]{})") == True', 'assert valid_parentheses("(]") == False'],
        [
            'assert valid_parentheses("") == True',
            'assert valid_parentheses("((") == False',
            'assert valid_parentheses("([)]") == False',
            'assert valid_parentheses("{[()()]}") == True',
            'assert valid_parentheses(")(") == False',
        ],
        """
        def valid_parentheses(s):
            pairs = {')': '(', ']': '[', '}': '{'}
            stack = []
            for c in s:
                if c in pairs:
                    if not stack or stack.pop() != pairs[c]:
                        return False
                else:
                    stack.append(c)
            return not stack
        """,
        """
        def valid_parentheses(s):
            return all(s.count(a) == s.count(b) for a, b in ('()', '[]', '{}'))
        """,
        "hard",
    ),
    _t(
        "roman_to_int",
        "def roman_to_int(s: str) -> int:",
        "Return the value of the Roman numeral `s` (I=1, V=5, X=10, L=50, C=100, D=500, "
        "M=1000; a smaller numeral before a larger one is subtracted, as in IV=4).",
        'roman_to_int("XIV") == 14',
        ['assert roman_to_int("XIV") == 14'],
        [
            'assert roman_to_int("I") == 1',
            'assert roman_to_int("IX") == 9',
            'assert roman_to_int("LVIII") == 58',
            'assert roman_to_int("MCMXCIV") == 1994',
            'assert roman_to_int("MMXXIV") == 2024',
        ],
        """
        def roman_to_int(s):
            v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}
            total = 0
            for i, c in enumerate(s):
                if i + 1 < len(s) and v[c] < v[s[i + 1]]:
                    total -= v[c]
                else:
                    total += v[c]
            return total
        """,
        """
        def roman_to_int(s):
            v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}
            return sum(v[c] for c in s)
        """,
        "hard",
    ),
    _t(
        "transpose",
        "def transpose(matrix: list) -> list:",
        "Return the transpose of a rectangular matrix given as a list of rows (row i of the "
        "result is column i of the input).",
        "transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]",
        ["assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]"],
        [
            "assert transpose([[1]]) == [[1]]",
            "assert transpose([[1, 2]]) == [[1], [2]]",
            "assert transpose([[1], [2]]) == [[1, 2]]",
            "assert transpose([[1, 2], [3, 4]]) == [[1, 3], [2, 4]]",
        ],
        """
        def transpose(matrix):
            return [list(col) for col in zip(*matrix)]
        """,
        """
        def transpose(matrix):
            n = len(matrix)
            return [[matrix[j][i] for j in range(n)] for i in range(n)]
        """,
    ),
    _t(
        "caesar_cipher",
        "def caesar_cipher(text: str, shift: int) -> str:",
        "Shift every letter of `text` by `shift` places in the alphabet, wrapping around from "
        "z to a and keeping upper/lower case; other characters stay unchanged.",
        'caesar_cipher("abc", 1) == "bcd"',
        ['assert caesar_cipher("abc", 1) == "bcd"'],
        [
            'assert caesar_cipher("xyz", 3) == "abc"',
            'assert caesar_cipher("Hello, World!", 5) == "Mjqqt, Btwqi!"',
            'assert caesar_cipher("abc", 0) == "abc"',
            'assert caesar_cipher("bcd", -1) == "abc"',
            'assert caesar_cipher("Zz", 27) == "Aa"',
        ],
        """
        def caesar_cipher(text, shift):
            out = []
            for c in text:
                if c.isalpha() and c.isascii():
                    base = ord('A') if c.isupper() else ord('a')
                    out.append(chr((ord(c) - base + shift) % 26 + base))
                else:
                    out.append(c)
            return ''.join(out)
        """,
        """
        def caesar_cipher(text, shift):
            return ''.join(chr(ord(c) + shift) if c.isalpha() else c for c in text)
        """,
        "hard",
    ),
    _t(
        "two_sum",
        "def two_sum(nums: list, target: int) -> tuple | None:",
        "Return a tuple (i, j) with i < j and nums[i] + nums[j] == target, choosing the pair "
        "with the smallest j and then the smallest i; return None if there is no such pair.",
        "two_sum([2, 7, 11, 15], 9) == (0, 1)",
        ["assert two_sum([2, 7, 11, 15], 9) == (0, 1)"],
        [
            "assert two_sum([], 1) == None",
            "assert two_sum([1, 2], 5) == None",
            "assert two_sum([3, 3], 6) == (0, 1)",
            "assert two_sum([1, 3, 4, 6], 7) == (1, 2)",
            "assert two_sum([4, 1, 4], 8) == (0, 2)",
        ],
        """
        def two_sum(nums, target):
            for j in range(len(nums)):
                for i in range(j):
                    if nums[i] + nums[j] == target:
                        return (i, j)
            return None
        """,
        """
        def two_sum(nums, target):
            for i in range(len(nums)):
                for j in range(len(nums)):
                    if i != j and nums[i] + nums[j] == target:
                        return (i, j)
            return None
        """,
        "hard",
    ),
    _t(
        "median",
        "def median(nums: list) -> float:",
        "Return the median of a non-empty list of numbers: the middle value after sorting, or "
        "the mean of the two middle values when the length is even.",
        "median([3, 1, 2]) == 2",
        ["assert median([3, 1, 2]) == 2"],
        [
            "assert median([5]) == 5",
            "assert median([1, 2, 3, 4]) == 2.5",
            "assert median([7, 1, 5, 3]) == 4.0",
            "assert median([-1, -5, -3]) == -3",
            "assert median([2, 2, 9]) == 2",
        ],
        """
        def median(nums):
            s = sorted(nums)
            n = len(s)
            mid = n // 2
            return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2
        """,
        """
        def median(nums):
            s = sorted(nums)
            return s[len(s) // 2]
        """,
    ),
    _t(
        "word_lengths",
        "def word_lengths(s: str) -> list:",
        "Return the lengths of the whitespace-separated words of `s`, in order.",
        'word_lengths("I love code") == [1, 4, 4]',
        ['assert word_lengths("I love code") == [1, 4, 4]'],
        [
            'assert word_lengths("") == []',
            'assert word_lengths("hello") == [5]',
            'assert word_lengths("  a  bb ") == [1, 2]',
            'assert word_lengths("x\\ny") == [1, 1]',
        ],
        """
        def word_lengths(s):
            return [len(w) for w in s.split()]
        """,
        """
        def word_lengths(s):
            return [len(w) for w in s.split(' ')]
        """,
    ),
)

# The held-out split: a mix of easy and hard tasks never used for training.
TEST_IDS: tuple[str, ...] = (
    "count_vowels",
    "factorial",
    "gcd",
    "remove_duplicates",
    "count_words",
    "second_largest",
    "valid_parentheses",
    "caesar_cipher",
)
