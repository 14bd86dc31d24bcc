"""The default category taxonomy: each label is described by several sentences (zero-shot prototypes)."""

from __future__ import annotations

import hashlib
import json

from inference.config import Settings, load_taxonomy_file

DEFAULT_TAXONOMY: dict[str, list[str]] = {
    "billing": [
        "A question or complaint about a charge, an invoice, a payment or a refund.",
        "I was charged twice on my credit card and want my money back.",
        "The invoice amount is wrong and I need a corrected bill.",
        "My payment failed and the subscription price on my statement looks incorrect.",
    ],
    "account_access": [
        "The customer cannot log in to their account or reset their password.",
        "I forgot my password and the reset email never arrives.",
        "My account is locked after too many attempts and two-factor authentication fails.",
        "I cannot sign in, the verification code is not accepted.",
    ],
    "technical_issue": [
        "The app or website crashes, shows an error or does not work as expected.",
        "The application freezes on startup and shows error code 500.",
        "Sync is broken since the last update and pages load very slowly.",
        "A bug: the button does nothing and the page stays blank.",
    ],
    "feature_request": [
        "A suggestion for a new feature or an improvement to the product.",
        "It would be great if you could add dark mode and export to CSV.",
        "Please support integration with other tools in a future release.",
        "I would love an option to customise the dashboard.",
    ],
    "shipping": [
        "A question about delivery, shipping, tracking or a lost or damaged package.",
        "My order has not arrived yet and the tracking number shows no updates.",
        "The parcel was delivered to the wrong address and the box was damaged.",
        "When will my package ship and which courier delivers it?",
    ],
    "cancellation": [
        "The customer wants to cancel their subscription, order or account.",
        "Please cancel my subscription and stop the automatic renewal.",
        "I want to close my account and cancel the order I placed.",
        "How do I end my plan before the next billing period?",
    ],
}


def load_taxonomy(settings: Settings) -> dict[str, list[str]]:
    return load_taxonomy_file(settings.taxonomy_file) if settings.taxonomy_file else DEFAULT_TAXONOMY


def taxonomy_fingerprint(taxonomy: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(taxonomy, sort_keys=True).encode()).hexdigest()
