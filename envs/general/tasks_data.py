"""The shipped general-world tasks: short knowledge-work requests, each with a rubric.

Written for this project from templates over small fact tables (capitals, concepts, emails,
lists, JSON records). Every 4th task (TEST_IDS) is held out.
"""

from __future__ import annotations


def _judge(criterion: str, weight: float) -> dict:
    return {"kind": "judge", "criterion": criterion, "weight": weight}


_NO_FILLER = {"kind": "forbidden", "phrases": ["as an ai", "lorem ipsum"], "weight": 0.5}

CAPITALS = [
    ("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Egypt", "Cairo"),
    ("Canada", "Ottawa"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Norway", "Oslo"),
]  # fmt: skip
CONCEPTS = [
    ("photosynthesis", [["sunlight", "light"], ["carbon dioxide", "co2"], ["oxygen"]]),
    ("gravity", [["mass", "masses"], ["attract", "attraction", "pulls", "pull"]]),
    ("inflation", [["prices", "price"], ["money", "purchasing power"]]),
    ("a vaccine", [["immune", "immunity"], ["disease", "infection", "virus", "pathogen"]]),
    ("recycling", [["waste"], ["reuse", "reused", "new products", "new materials"]]),
    ("a budget", [["income"], ["spending", "expenses", "spend"]]),
    ("evaporation", [["water"], ["vapor", "vapour", "gas"], ["heat", "warm"]]),
    ("a password manager", [["password", "passwords"], ["secure", "security", "encrypted"]]),
]
EMAILS = [
    ("Dr. Lee", "moving our meeting to Friday", ["Friday"]),
    ("the landlord", "a leaking kitchen tap", ["tap", "leak"]),
    ("Maria", "thanks for the birthday gift", ["gift"]),
    ("the team", "the office closing early on Monday", ["Monday"]),
    ("Mr. Chen", "a late invoice payment", ["invoice"]),
    ("the library", "renewing a borrowed book", ["book", "renew"]),
    ("Sam", "an invitation to a picnic on Saturday", ["picnic", "Saturday"]),
    ("customer support", "a broken phone charger", ["charger"]),
]
LISTS = [
    ("primary colors", 3, ["red", "blue", "yellow"]),
    ("planets closest to the Sun", 3, ["Mercury", "Venus", "Earth"]),
    ("fruits that are usually yellow", 2, [["banana", "bananas"], ["lemon", "lemons"]]),
    ("days of the weekend", 2, ["Saturday", "Sunday"]),
    ("states of matter", 3, ["solid", "liquid", "gas"]),
    ("oceans", 3, [["Pacific"], ["Atlantic"], ["Indian", "Arctic", "Southern"]]),
]
RECORDS = [
    ("a book", ["title", "author", "year"]),
    ("a city", ["name", "country", "population"]),
    ("a recipe", ["name", "ingredients", "minutes"]),
    ("a movie", ["title", "director", "year"]),
    ("a product", ["name", "price", "in_stock"]),
    ("a person", ["name", "age", "email"]),
]


def _tasks() -> list[dict]:
    tasks = []
    for country, capital in CAPITALS:
        tasks.append({
            "task_id": f"capital_{country.lower()}",
            "prompt": f"In one line, what is the capital of {country}? Name the city.",
            "rubric": [
                {"kind": "must_mention", "facts": [capital], "weight": 3},
                {"kind": "format", "value": "one_line", "weight": 1},
                {"kind": "max_words", "value": 25, "weight": 1},
                _judge(f"Does the answer say that {capital} is the capital of {country}?", 1),
            ],
        })  # fmt: skip
    for concept, facts in CONCEPTS:
        slug = concept.removeprefix("a ").replace(" ", "_")
        tasks.append({
            "task_id": f"explain_{slug}",
            "prompt": f"Explain {concept} to a ten-year-old in at most 60 words.",
            "rubric": [
                {"kind": "must_mention", "facts": facts, "weight": 2},
                {"kind": "max_words", "value": 60, "weight": 1},
                {"kind": "min_words", "value": 10, "weight": 0.5},
                _NO_FILLER,
                _judge("Is the explanation correct and simple enough for a child?", 2),
            ],
        })  # fmt: skip
    for who, topic, facts in EMAILS:
        slug = topic.split()[-1].lower().strip(".")
        tasks.append({
            "task_id": f"email_{slug}",
            "prompt": f"Write a short, polite email to {who} about {topic}. Use at most 80 words.",
            "rubric": [
                {"kind": "must_mention", "facts": [who.removeprefix("the ")] + facts, "weight": 2},
                {"kind": "max_words", "value": 80, "weight": 1},
                _NO_FILLER,
                _judge("Is the email polite, clear and on topic?", 2),
            ],
        })  # fmt: skip
    for things, k, facts in LISTS:
        tasks.append({
            "task_id": "list_" + things.split()[0].lower(),
            "prompt": f"List {k} {things} as a bulleted list (one '- ' line each), nothing else.",
            "rubric": [
                {"kind": "format", "value": "bullets", "count": k, "weight": 2},
                {"kind": "must_mention", "facts": facts, "weight": 2},
                {"kind": "max_words", "value": 6 * k, "weight": 0.5},
            ],
        })  # fmt: skip
    for thing, keys in RECORDS:
        tasks.append({
            "task_id": f"json_{thing.removeprefix('a ')}",
            "prompt": f"Describe {thing} of your choice as a JSON object with exactly the keys "
            + ", ".join(f'"{k}"' for k in keys) + ". Reply with the JSON only.",
            "rubric": [
                {"kind": "format", "value": "json", "keys": keys, "weight": 3},
                {"kind": "max_words", "value": 60, "weight": 0.5},
                _judge("Are the JSON values plausible for the keys?", 1),
            ],
        })  # fmt: skip
    return tasks


TASKS: list[dict] = _tasks()
TASKS_BY_ID: dict[str, dict] = {t["task_id"]: t for t in TASKS}
TEST_IDS: frozenset[str] = frozenset(t["task_id"] for t in TASKS[3::4])
assert len(TASKS_BY_ID) == len(TASKS), "duplicate task ids"
