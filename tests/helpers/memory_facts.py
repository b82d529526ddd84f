"""Facts a person might ask Kestrel to remember, made in any number from templates: the distractors among which
selection must find the relevant memories (tests/fixtures/memory/) and the benchmark's 10,000 (benchmarks/memory.py)."""

from __future__ import annotations

import itertools
import random

_PEOPLE = ("my neighbour", "my colleague", "my cousin", "my uncle", "my aunt", "my friend", "my manager",
           "my landlord", "my dentist", "my piano teacher", "my flatmate", "my godmother", "my nephew", "my niece")
_NAMES = ("Tom", "Priya", "Lars", "Amina", "Kenji", "Sofia", "Mateo", "Olga", "Femi", "Ines", "Rafael", "Hana",
          "Bruno", "Chloe", "Dmitri", "Yara", "Liam", "Noor", "Pablo", "Greta")
_PLACES = ("Lisbon", "Kyoto", "Oslo", "Nairobi", "Lima", "Krakow", "Hanoi", "Dublin", "Tbilisi", "Quebec",
           "Seville", "Bergen", "Porto", "Zagreb", "Cusco", "Tallinn")
_FOODS = ("lentil soup", "sourdough", "kimchi", "pad thai", "ramen", "paella", "falafel", "pierogi", "tiramisu",
          "miso aubergine", "goulash", "dumplings", "risotto", "couscous")
_HOBBIES = ("bouldering", "birdwatching", "knitting", "chess", "sailing", "pottery", "running", "gardening",
            "woodworking", "photography", "choir singing", "cycling", "baking")
_THINGS = ("the quarterly report", "the kitchen renovation", "the garden shed", "the tax return", "the school fete",
           "the book club", "the team offsite", "the allotment", "the wedding speech", "the thesis draft")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")

_TEMPLATES = (
    "{person} {name} lives in {place}.",
    "{person} {name} has a birthday in {month}.",
    "{person} {name} likes {food}.",
    "I visited {place} in {month} and loved the {food}.",
    "I go {hobby} every {day}.",
    "I am working on {thing} with {person} {name}.",
    "{person} {name} recommended {place} for a holiday.",
    "I usually cook {food} on {day} evenings.",
    "I want to get better at {hobby} this year.",
    "The deadline for {thing} is in {month}.",
    "{person} {name} is learning {hobby}.",
    "I met {person} {name} in {place}.",
)


def made_facts(count: int, seed: int = 41) -> list[str]:
    """`count` different facts, the same ones for the same seed."""
    rng = random.Random(seed)
    seen: dict[str, None] = {}
    for _ in itertools.count():
        if len(seen) >= count:
            break
        template = rng.choice(_TEMPLATES)
        fact = template.format(person=rng.choice(_PEOPLE), name=rng.choice(_NAMES), place=rng.choice(_PLACES),
                               food=rng.choice(_FOODS), hobby=rng.choice(_HOBBIES), thing=rng.choice(_THINGS),
                               day=rng.choice(_DAYS), month=rng.choice(_MONTHS))
        seen[fact[0].upper() + fact[1:]] = None
    return list(seen)
