"""A deterministic corpus of realistic agent memory queries, for the routing benchmarks.

The templates imitate what a coding agent asks its memory: symbol look-ups, relationship and
decision questions, concept questions, back-references to recent context, file paths and globs,
bare topics, and long free-text questions that match no signal (the router's worst case: every
strong and weak regex runs before the default rule applies). Seeded, so runs are comparable.
"""

from __future__ import annotations

import random

IDENTIFIERS = [
    "parseAuthToken",
    "UserService",
    "OrderController",
    "PaymentService",
    "refresh_token_ttl",
    "SessionStore",
    "validateInput",
    "getUserById",
    "RateLimiter",
    "build_index",
    "EventBus",
    "handleWebhook",
    "InvoiceRepository",
    "retry_with_backoff",
    "CacheManager",
    "loadConfig",
    "AuthMiddleware",
    "serializeOrder",
    "db_pool_size",
    "FeatureFlagClient",
]
TOPICS = [
    "auth",
    "database",
    "the database schema",
    "caching",
    "the cache layer",
    "rate limiting",
    "the billing flow",
    "webhooks",
    "error handling",
    "the API layer",
    "session tokens",
    "the deploy pipeline",
    "logging",
    "migrations",
    "the search index",
    "retries",
    "the queue",
    "feature flags",
    "the login page",
    "password reset",
    "the payment provider",
    "background jobs",
    "the mobile client",
    "CORS",
    "pagination",
    "the admin dashboard",
    "email notifications",
]
FILES = [
    "src/models/*.ts",
    "src/auth/middleware.ts",
    "docs/architecture.md",
    "config/settings.yaml",
    "./scripts/deploy.sh",
    "tests/test_router.py",
    "packages/api/src/index.ts",
    "*.sql",
    "infra/main.tf",
    "~/.openclaw/state/backends.json",
    "Cargo.lock",
    "app/views/orders.html",
]
TIMES = ["this morning", "yesterday", "last week", "in the morning session", "earlier today", "on Monday"]

TEMPLATES: dict[str, list[str]] = {
    "symbol": [
        "find the function {ident}",
        "find the class {ident}",
        "find all usages of {ident}",
        "search for {ident}",
        "where is {ident} defined",
        "find the method {ident} on the model",
        "{ident}",
        "what calls {ident}",
    ],
    "relationship": [
        "how does {topic} relate to {topic2}",
        "what's the relationship between {ident} and {ident2}",
        "what depends on {ident}",
        "show the call chain from {ident} to {ident2}",
        "trace the request from {topic} to {topic2}",
        "dependencies of {topic}",
        "connection between {topic} and {topic2}",
    ],
    "decision": [
        "what did we decide about {topic}",
        "why did we choose {topic} {time}",
        "recall the decision on {topic}",
        "what did we decide about {topic} in the morning session",
        "why did we do it that way",
        "which option we chose for {topic}",
        "the decision about {topic} earlier in the conversation",
    ],
    "concept": [
        "how does {topic} work",
        "explain {topic}",
        "where is {topic} handled",
        "what is the {ident} for",
        "what is our strategy for {topic}",
        "approach for {topic}",
        "how does {topic} work in the {topic2}",
    ],
    "recent": [
        "what was the last thing we changed",
        "what did we just discussed about {topic}",
        "the last change to {topic}",
        "what did we do recently on {topic}",
        "that thing with the {topic}",
        "the thing about {topic}",
        "what we talked about {time}",
        "that issue with {topic}",
    ],
    "path": [
        "search in {file}",
        "changes to {file}",
        "{file}",
        "who edited {file} {time}",
        "open {file}",
        "notes about {file}",
    ],
    "topic": [
        "{topic}",
        "{topic} {topic2}",
        "the {topic} issue",
        "notes on {topic}",
        "{topic} problems",
        "anything about {topic}",
        "{topic} todo",
    ],
    # Long free text with no signal: every strong and weak regex runs, then the default rule.
    "long": [
        "i am trying to remember what the team said about {topic} and whether it affects {topic2} "
        "because the customer asked again about it and we should give a consistent answer this time",
        "summary of everything we know about {topic} including open questions, owners, risks and "
        "any follow ups that were agreed with the people who own {topic2}",
    ],
}
# Share of each kind in the corpus (an agent asks mostly topics, symbols and decisions).
WEIGHTS = {
    "symbol": 18,
    "relationship": 8,
    "decision": 14,
    "concept": 12,
    "recent": 10,
    "path": 8,
    "topic": 22,
    "long": 8,
}


def generate(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """``n`` (kind, query) pairs."""
    rng = random.Random(seed)
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]
    out: list[tuple[str, str]] = []
    for _ in range(n):
        kind = rng.choices(kinds, weights)[0]
        template = rng.choice(TEMPLATES[kind])
        ident, ident2 = rng.sample(IDENTIFIERS, 2)
        topic, topic2 = rng.sample(TOPICS, 2)
        query = template.format(
            ident=ident, ident2=ident2, topic=topic, topic2=topic2, file=rng.choice(FILES), time=rng.choice(TIMES)
        )
        out.append((kind, query))
    return out
