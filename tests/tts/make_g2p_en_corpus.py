#!/usr/bin/env python3
"""Writes tests/tts/g2p_en_corpus.txt: the English G2P's agreement corpus.

The plain sentences of tests/tts/g2p_corpus.txt, then sentences assembled
from templates with a fixed seed: names, titles and abbreviations, numbers
(cardinals, decimals, negatives, ranges, phone numbers, ordinals, years,
times, percentages), currency, acronyms, heteronyms in the contexts that
decide them, quotes, parentheses, hyphenated compounds, contractions and
possessives. Nothing here calls misaki; tests/tts/make_g2p_en_golden.py
runs it on the result.

    python tests/tts/make_g2p_en_corpus.py
"""

from __future__ import annotations

import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "g2p_en_corpus.txt"
SEED = 20261202
N_ASSEMBLED = 720

NAMES = [
    "Alice",
    "Bob",
    "Maria",
    "James",
    "Priya",
    "Chen",
    "Olga",
    "Ahmed",
    "Sophie",
    "Daniel",
    "Lucas",
    "Hannah",
    "Mohammed",
    "Emily",
    "Kenji",
    "Isabella",
    "Oliver",
    "Fatima",
    "Noah",
    "Grace",
    "Liam",
    "Zoe",
    "Ethan",
    "Chloe",
    "Mateo",
    "Aisha",
    "Henry",
    "Nora",
    "Samuel",
    "Leah",
]
SURNAMES = [
    "Smith",
    "Johnson",
    "Garcia",
    "Brown",
    "Nguyen",
    "Patel",
    "Kowalski",
    "O'Brien",
    "Schmidt",
    "Rossi",
    "Tanaka",
    "Williams",
    "Anderson",
    "Martinez",
    "Thompson",
    "Clarke",
    "Dubois",
    "Murphy",
]
TITLES = ["Dr.", "Mr.", "Mrs.", "Ms.", "Prof."]
PLACES = [
    "Paris",
    "London",
    "New York",
    "Tokyo",
    "Berlin",
    "Chicago",
    "Sydney",
    "Toronto",
    "Madrid",
    "Boston",
    "Seattle",
    "Dublin",
    "Mumbai",
    "Cairo",
    "Lisbon",
    "Vienna",
    "Denver",
    "Austin",
]
ACRONYMS = [
    "NASA",
    "FBI",
    "CEO",
    "GPS",
    "USB",
    "HTML",
    "API",
    "UN",
    "EU",
    "BBC",
    "DNA",
    "ATM",
    "PDF",
    "CPU",
    "NATO",
    "UNESCO",
    "IT",
    "HR",
    "VIP",
    "FAQ",
]
ITEMS = [
    "book",
    "ticket",
    "laptop",
    "coffee",
    "bicycle",
    "painting",
    "sandwich",
    "jacket",
    "lamp",
    "camera",
    "guitar",
    "umbrella",
    "notebook",
    "phone",
    "chair",
    "kettle",
]
UNITS = [
    "miles",
    "kilometers",
    "minutes",
    "hours",
    "days",
    "pounds",
    "kilograms",
    "meters",
    "degrees",
    "years",
    "weeks",
    "people",
    "pages",
    "songs",
    "steps",
    "apples",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
ADJS = [
    "quiet",
    "bright",
    "old",
    "busy",
    "small",
    "famous",
    "strange",
    "modern",
    "empty",
    "crowded",
    "beautiful",
    "tiny",
    "enormous",
    "friendly",
    "dark",
]
VERBS_PAST = [
    "visited",
    "painted",
    "fixed",
    "sold",
    "bought",
    "opened",
    "closed",
    "cleaned",
    "found",
    "carried",
    "watched",
    "wanted",
    "needed",
    "started",
    "finished",
    "played",
    "tried",
    "moved",
]
HETERONYM_SENTENCES = [
    "I will read the {item} tomorrow.",
    "She read the {item} last night.",
    "They live in {place}.",
    "The band played live in {place}.",
    "Please record the meeting.",
    "He broke the world record.",
    "The wind is strong today.",
    "Wind the clock before bed.",
    "A tear rolled down her cheek.",
    "Do not tear the paper.",
    "Close the door, please.",
    "The store is close to the station.",
    "Wait a minute.",
    "The difference is minute.",
    "We need to lead the team.",
    "The pipe was made of lead.",
    "I object to the plan.",
    "The object fell from the shelf.",
    "She will present the results.",
    "He bought a present for {name}.",
    "The bass was too loud.",
    "They refuse to leave.",
    "Take out the refuse.",
    "The desert is hot and dry.",
    "Do not desert your friends.",
    "I am content with the result.",
    "The content is excellent.",
    "We produce fresh bread daily.",
    "Buy the produce at the market.",
    "The doctor dressed the wound.",
    "He wound the rope around the post.",
    "The permit expires in {month}.",
    "They permit dogs inside.",
    "Use the tool with care.",
    "What is the use of it?",
    "The dove flew over the roof.",
    "She bowed after the show.",
    "Tie a bow on the gift.",
    "Row the boat gently.",
    "The project starts soon.",
    "Project the image on the wall.",
    "Lives were saved that day.",
]
QUOTES = [
    '"{adj} day," {name} said.',
    '{name} asked, "Where is the {item}?"',
    "'Hello,' said {name}.",
    "He called it “the {adj} {item}”.",
    'The sign said: "Closed on {day}s."',
    "She whispered, “I know.”",
    "The word '{item}' has {n} letters.",
]


def pick(rng: random.Random, xs: list[str]) -> str:
    return xs[rng.randrange(len(xs))]


def number(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return str(rng.randrange(0, 20))
    if kind == 1:
        return str(rng.randrange(20, 100))
    if kind == 2:
        return str(rng.randrange(100, 1000))
    if kind == 3:
        return f"{rng.randrange(1000, 100000):,}"
    if kind == 4:
        return f"{rng.randrange(0, 100)}.{rng.randrange(0, 100)}"
    if kind == 5:
        return str(rng.randrange(1000, 10000))
    if kind == 6:
        return f"{rng.randrange(1, 1000)} million"
    return str(rng.randrange(10001, 2000000))


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def assembled(rng: random.Random) -> str:
    name, surname, place = pick(rng, NAMES), pick(rng, SURNAMES), pick(rng, PLACES)
    item, unit, adj = pick(rng, ITEMS), pick(rng, UNITS), pick(rng, ADJS)
    month, day, verb = pick(rng, MONTHS), pick(rng, DAYS), pick(rng, VERBS_PAST)
    k = rng.randrange(24)
    if k == 0:
        return f"{pick(rng, TITLES)} {surname} {verb} the {adj} {item} in {place}."
    if k == 1:
        return f"The {item} costs ${rng.randrange(1, 500)}.{rng.randrange(0, 100):02d}."
    if k == 2:
        return f"{name} paid £{rng.randrange(1, 90)} for a {adj} {item}."
    if k == 3:
        return f"Tickets cost €{rng.randrange(5, 300)} each, or ${rng.randrange(2, 40)} for students."
    if k == 4:
        return f"We walked {number(rng)} {unit} on {day}."
    if k == 5:
        return f"The meeting is on {month} {ordinal(rng.randrange(1, 32))}, {rng.randrange(1950, 2040)}."
    if k == 6:
        born = rng.randrange(1900, 2025)
        return f"{name} was born in {born} and moved to {place} in the {rng.randrange(5, 10)}0s."
    if k == 7:
        hour, minute = rng.randrange(1, 13), rng.randrange(0, 60)
        return f"The train leaves at {hour}:{minute:02d} {pick(rng, ['a.m.', 'p.m.'])}."
    if k == 8:
        return f"About {rng.randrange(1, 100)}% of the {unit} were {adj}."
    if k == 9:
        return f"The {pick(rng, ACRONYMS)} and the {pick(rng, ACRONYMS)} {verb} a new report."
    if k == 10:
        a, b = rng.randrange(200, 999), rng.randrange(1000, 9999)
        return f"Call {a}-{b} before {rng.randrange(1, 12)} o'clock."
    if k == 11:
        return f"The temperature fell to -{rng.randrange(1, 30)} degrees in {place}."
    if k == 12:
        return (
            f"Chapter {rng.randrange(1, 40)} covers pages {rng.randrange(1, 200)}-{rng.randrange(201, 400)}."
        )
    if k == 13:
        return f"{name}'s {item} is {adj}, but {surname}'s is {pick(rng, ADJS)}."
    if k == 14:
        return f"I can't believe {name} didn't {pick(rng, ['call', 'come', 'write', 'wait'])}."
    if k == 15:
        return f"It's a {adj}, well-known {item} from the {ordinal(rng.randrange(12, 22))} century."
    if k == 16:
        return pick(rng, HETERONYM_SENTENCES).format(item=item, place=place, name=name, month=month)
    if k == 17:
        return pick(rng, QUOTES).format(adj=adj.capitalize(), name=name, item=item, day=day, n=len(item))
    if k == 18:
        return f"{name} {surname} (the {adj} one) {verb} {rng.randrange(2, 12)} {item}s."
    if k == 19:
        a, b = rng.randrange(0, 9), rng.randrange(0, 9)
        return f"The score was {a}-{b} after {rng.randrange(2, 120)} minutes."
    if k == 20:
        return f"Version {rng.randrange(1, 9)}.{rng.randrange(0, 20)} of the app was released on {day}."
    if k == 21:
        return f"{name} lives at {rng.randrange(1, 999)} {surname} St. in {place}."
    if k == 22:
        return f"Over {rng.randrange(2, 900)},000 {unit} — that's {adj}!"
    return f"Why did {name} {pick(rng, ['sell', 'buy', 'paint', 'fix'])} the {adj} {item}?"


def main() -> None:
    base = [
        ln
        for ln in (HERE / "g2p_corpus.txt").read_text(encoding="utf-8").split("\n")
        if ln and not ln.startswith("# ")
    ]
    rng = random.Random(SEED)
    seen = set(base)
    extra: list[str] = []
    while len(extra) < N_ASSEMBLED:
        s = assembled(rng)
        if s not in seen:
            seen.add(s)
            extra.append(s)
    header = [
        '# English G2P corpus: one text per line (lines starting with "# " are comments).',
        f"# Written by tests/tts/make_g2p_en_corpus.py (seed {SEED}): the plain lines of g2p_corpus.txt,",
        f"# then {N_ASSEMBLED} assembled sentences. tests/tts/make_g2p_en_golden.py runs misaki on it.",
    ]
    OUT.write_text("\n".join(header + base + extra) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(base) + len(extra)} lines")


if __name__ == "__main__":
    main()
