"""A deterministic synthetic backlog for the demo and the tests.

Realistic support-ticket text across the six default categories, a long-tailed length distribution
(most short, a few very long with pasted logs or quoted threads), a few multilingual tickets (including
RTL and emoji) and a few malformed rows (NULL, empty, whitespace-only, very long).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator

import sqlalchemy as sa

from inference.store.db import insert_for, writing
from inference.store.schema import create_schema, tickets
from inference.window import Window

PRODUCTS = ["Pro plan", "Team workspace", "mobile app", "desktop client", "Starter plan", "API", "web dashboard"]
COURIERS = ["DHL", "UPS", "FedEx", "La Poste", "Royal Mail"]
NAMES = ["Anna", "Ravi", "Chen", "Maria", "Tom", "Fatima", "Lukas", "Sofia", "Kwame", "Yuki"]

TEMPLATES: dict[str, dict[str, list[str]]] = {
    "billing": {
        "subject": [
            "Charged twice this month",
            "Wrong amount on invoice {inv}",
            "Refund for order {order}",
            "Question about my bill",
            "Unexpected charge of ${amount}",
        ],
        "line": [
            "I was billed ${amount} twice for the {product} on {date}.",
            "Invoice {inv} shows ${amount} but my plan should cost less.",
            "Please refund the duplicate payment on my card ending {last4}.",
            "The VAT on my last invoice looks wrong, can you correct it?",
            "My bank statement shows a charge I do not recognise from your company.",
            "I downgraded last week but was still charged the old price.",
        ],
    },
    "account_access": {
        "subject": [
            "Cannot log in",
            "Password reset not working",
            "Locked out of my account",
            "2FA code rejected",
            "Login loop",
        ],
        "line": [
            "I can't sign in to my account since {date}, it says the password is wrong.",
            "The password reset email never arrives, I checked spam too.",
            "My account got locked after several attempts and I can't unlock it.",
            "The two-factor code from my authenticator app is always rejected.",
            "After login it sends me straight back to the login page.",
            "I changed my phone and lost access to the verification codes.",
        ],
    },
    "technical_issue": {
        "subject": [
            "App crashes on startup",
            "Error {code} when saving",
            "Sync not working",
            "Dashboard is blank",
            "Very slow since update",
        ],
        "line": [
            "The {product} crashes every time I open it since the last update.",
            "I get error {code} when I try to save a document.",
            "Files are not syncing between my laptop and the {product}.",
            "The dashboard stays blank and the spinner never stops.",
            "Exporting a report times out after a few minutes.",
            "Notifications stopped working on the {product}.",
        ],
    },
    "feature_request": {
        "subject": [
            "Feature idea: dark mode",
            "Please add CSV export",
            "Suggestion for the {product}",
            "Integration request",
            "Would love bulk editing",
        ],
        "line": [
            "It would be great to have a dark mode in the {product}.",
            "Could you add an option to export everything to CSV?",
            "Please consider an integration with our calendar tool.",
            "Bulk editing of records would save my team hours every week.",
            "I'd love keyboard shortcuts for the most common actions.",
            "A public API endpoint for reports would help us automate.",
        ],
    },
    "shipping": {
        "subject": [
            "Where is my order {order}?",
            "Package damaged",
            "Tracking not updating",
            "Delivered to wrong address",
            "Shipping delay",
        ],
        "line": [
            "My order {order} was supposed to arrive on {date} but it hasn't.",
            "The {courier} tracking number hasn't updated in five days.",
            "The box arrived crushed and the item inside is broken.",
            "The parcel was delivered to my neighbour's address by mistake.",
            "Can you tell me when order {order} will ship?",
            "Only part of my order arrived, two items are missing.",
        ],
    },
    "cancellation": {
        "subject": [
            "Cancel my subscription",
            "Please close my account",
            "Stop auto-renewal",
            "Cancel order {order}",
            "End my plan",
        ],
        "line": [
            "Please cancel my {product} subscription before the next renewal.",
            "I want to close my account and delete my data.",
            "How do I turn off auto-renewal? I don't want to be charged again.",
            "Please cancel order {order}, I ordered it by mistake.",
            "We are moving to another tool and need to end our plan this month.",
            "Cancel everything on my account effective immediately.",
        ],
    },
}
FILLER = [
    "I have been a customer for {years} years.",
    "This is quite urgent for our team.",
    "I already tried restarting and clearing the cache.",
    "Thanks in advance for your help.",
    "My colleague {name} has the same problem.",
    "Could you please look into it as soon as possible?",
    "I attached a screenshot earlier but it may not have come through.",
]
MULTILINGUAL = [
    ("No puedo iniciar sesión", "Desde ayer no puedo entrar en mi cuenta, el código de verificación no funciona."),
    ("Rechnung doppelt bezahlt", "Mir wurde die Rechnung zweimal abgebucht. Bitte erstatten Sie den Betrag."),
    ("Colis endommagé", "Mon colis est arrivé abîmé et le produit est cassé. Que dois-je faire ?"),
    ("注文をキャンセルしたい", "間違えて注文してしまいました。注文をキャンセルしてください。"),
    ("لا يمكنني تسجيل الدخول", "لا أستطيع الدخول إلى حسابي منذ أمس، أرجو المساعدة 🙏"),
    ("App stürzt ab 😡", "Die App stürzt bei jedem Start ab. Fehlercode 500 🔥🔥"),
]


def _fill(rng: random.Random, text: str) -> str:
    return text.format(
        inv=f"INV-{rng.randint(10000, 99999)}",
        order=f"#{rng.randint(100000, 999999)}",
        amount=f"{rng.randint(5, 400)}.{rng.randint(0, 99):02d}",
        product=rng.choice(PRODUCTS),
        date=(dt.date(2026, 1, 1) + dt.timedelta(days=rng.randint(0, 330))).isoformat(),
        last4=f"{rng.randint(0, 9999):04d}",
        code=rng.choice(["500", "E1042", "0x80070005", "403", "SYNC-17"]),
        courier=rng.choice(COURIERS),
        years=rng.randint(1, 9),
        name=rng.choice(NAMES),
    )


def _log_dump(rng: random.Random, lines: int) -> str:
    return "\n".join(
        f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z "
        f"{rng.choice(['INFO', 'WARN', 'ERROR'])} worker-{rng.randint(1, 9)} "
        f"request {rng.randint(10**6, 10**7)} took {rng.randint(1, 9000)}ms status={rng.choice([200, 500, 503])}"
        for _ in range(lines)
    )


def make_ticket(rng: random.Random, category: str) -> tuple[str | None, str | None]:
    t = TEMPLATES[category]
    subject = _fill(rng, rng.choice(t["subject"]))
    # Long tail: most tickets are 1-3 sentences, some a few paragraphs, a few carry pasted logs.
    sentences = min(40, int(rng.paretovariate(1.6)))
    parts = [f"Hi, {_fill(rng, rng.choice(t['line']))}"]
    for _ in range(sentences):
        pool = t["line"] if rng.random() < 0.5 else FILLER
        parts.append(_fill(rng, rng.choice(pool)))
    body = " ".join(parts)
    if rng.random() < 0.03:
        body += "\n\nLog excerpt:\n" + _log_dump(rng, rng.randint(20, 200))
    if rng.random() < 0.02:
        body += "\n\n> On a previous day support wrote:\n> " + " ".join(_fill(rng, s) for s in FILLER * 5)
    return subject, body


def _malformed(rng: random.Random, k: int) -> tuple[str | None, str | None]:
    return [
        (None, None),
        ("", ""),
        ("   ", "\n\t  \n"),
        ("Log dump", _log_dump(rng, 3000)),  # ~250 KB
    ][k % 4]


def generate(n: int, seed: int) -> Iterator[tuple[int, str | None, str | None]]:
    """(index, subject, body) for n tickets; the same n and seed always give the same tickets."""
    rng = random.Random(seed)
    categories = list(TEMPLATES)
    malformed_every = 500  # a few malformed rows (0.2%)
    for i in range(n):
        if i % malformed_every == malformed_every - 1:
            yield i, *_malformed(rng, i // malformed_every)
        elif rng.random() < 0.01:
            yield i, *rng.choice(MULTILINGUAL)
        else:
            yield i, *make_ticket(rng, rng.choice(categories))


def seed_backlog(engine: sa.Engine, n: int, windows: list[Window], seed: int = 7, start_id: int = 1) -> int:
    """Inserts n tickets spread over the windows; existing ticket IDs are left untouched. Returns n."""
    create_schema(engine, with_demo_source=True)
    rng = random.Random(seed + 1)
    span_start, span = windows[0].start, windows[-1].end - windows[0].start
    rows = []
    for i, subject, body in generate(n, seed):
        created = span_start + dt.timedelta(seconds=rng.uniform(0, span.total_seconds() - 1))
        updated = min(created + dt.timedelta(seconds=rng.uniform(0, 3600)), windows[-1].end - dt.timedelta(seconds=1))
        rows.append(dict(ticket_id=start_id + i, subject=subject, body=body, created_at=created, updated_at=updated))
    with writing(engine) as conn:
        stmt = insert_for(conn)(tickets).on_conflict_do_nothing(index_elements=["ticket_id"])
        for k in range(0, len(rows), 5000):
            conn.execute(stmt, rows[k : k + 5000])
    return n
