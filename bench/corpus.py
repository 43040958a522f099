"""A seeded generator of realistic coding-agent memories and labelled questions about them.

Memories are what a coding agent's sessions leave behind: how to deploy, which port a
service uses, why a technology was chosen, an error and its fix, the user's preferences,
the state of a migration, incidents, test commands, settings. They are spread over many
projects that share one vocabulary (every project has a staging api, a worker, a
database), so a query must find the one memory that answers it among many that look alike.
Session summaries that mention many of the same words are mixed in as distractors.

Every answerable memory has a *key* (its template and the slots that identify it, plus the
project for project-scoped facts); keys are unique, so each query has exactly one right
answer. Questions are written from separate templates, in other words than the memories
(paraphrases, abbreviations, typos, terse keywords), the way an agent's prompt reads.
Project-scoped questions are asked with the project filter, as the session hooks do.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ENVS = ["staging", "production", "qa", "preview", "canary", "sandbox", "demo", "development"]
ENV_ALIASES = {"production": "prod", "development": "dev", "staging": "stage"}
TARGETS = [
    "api server",
    "web frontend",
    "background worker",
    "scheduler",
    "docs site",
    "admin dashboard",
    "search cluster",
    "payment gateway",
    "notification service",
    "reporting pipeline",
    "auth proxy",
    "image resizer",
]
SERVICES = [
    "billing",
    "inventory",
    "checkout",
    "ledger",
    "gateway",
    "metrics",
    "mailer",
    "catalog",
    "profile",
    "session",
    "upload",
    "webhook",
    "analytics",
    "pricing",
    "shipping",
    "invoice",
    "search",
    "recommendation",
    "audit",
    "export",
    "import",
    "thumbnail",
    "geocoder",
    "chat",
    "feed",
    "ratings",
    "coupon",
    "loyalty",
    "tracking",
    "forecast",
]
COMPONENTS = [
    "job queue",
    "user sessions",
    "feature flags",
    "event bus",
    "primary database",
    "cache layer",
    "full-text search",
    "object storage",
    "rate limiter",
    "audit log",
    "config store",
    "metrics backend",
    "error tracking",
    "build system",
    "package manager",
    "test runner",
    "http client",
    "orm",
    "logging library",
    "task scheduler",
    "secret storage",
    "container registry",
    "ci pipeline",
    "api gateway",
    "websocket layer",
    "email delivery",
    "pdf rendering",
    "image processing",
    "data warehouse",
    "state management",
]
TECH = {
    "job queue": ["Redis streams", "RabbitMQ", "SQS", "Celery", "BullMQ", "Sidekiq"],
    "user sessions": ["Redis", "signed cookies", "PostgreSQL", "JWT"],
    "feature flags": ["LaunchDarkly", "Unleash", "a flags table", "Flagsmith"],
    "event bus": ["Kafka", "NATS", "Redis pub/sub", "Google Pub/Sub"],
    "primary database": ["PostgreSQL", "MySQL", "SQLite", "CockroachDB"],
    "cache layer": ["Redis", "Memcached", "Varnish", "an in-process LRU"],
    "full-text search": ["Elasticsearch", "Meilisearch", "PostgreSQL tsvector", "Typesense"],
    "object storage": ["S3", "MinIO", "GCS", "Cloudflare R2"],
    "rate limiter": ["a Redis token bucket", "nginx limit_req", "Envoy", "a leaky bucket"],
    "audit log": ["an append-only table", "ClickHouse", "Loki", "S3 JSON lines"],
    "config store": ["Consul", "etcd", "environment variables", "a YAML file"],
    "metrics backend": ["Prometheus", "Datadog", "InfluxDB", "VictoriaMetrics"],
    "error tracking": ["Sentry", "Rollbar", "Bugsnag", "Honeybadger"],
    "build system": ["Bazel", "Make", "Nx", "Turborepo", "Gradle"],
    "package manager": ["pnpm", "yarn", "npm", "uv", "poetry"],
    "test runner": ["pytest", "vitest", "jest", "go test", "cargo nextest"],
    "http client": ["httpx", "requests", "axios", "fetch", "reqwest"],
    "orm": ["SQLAlchemy", "Prisma", "Django ORM", "Drizzle", "sqlx"],
    "logging library": ["structlog", "pino", "zap", "loguru", "winston"],
    "task scheduler": ["cron", "Airflow", "Temporal", "APScheduler"],
    "secret storage": ["Vault", "AWS Secrets Manager", "SOPS", "1Password Connect"],
    "container registry": ["GHCR", "ECR", "Harbor", "Docker Hub"],
    "ci pipeline": ["GitHub Actions", "GitLab CI", "Buildkite", "CircleCI"],
    "api gateway": ["Kong", "Traefik", "nginx", "Envoy"],
    "websocket layer": ["Socket.IO", "ws", "Phoenix channels", "Centrifugo"],
    "email delivery": ["Postmark", "SES", "SendGrid", "Mailgun"],
    "pdf rendering": ["WeasyPrint", "Puppeteer", "wkhtmltopdf", "pdfkit"],
    "image processing": ["libvips", "ImageMagick", "Pillow", "sharp"],
    "data warehouse": ["BigQuery", "Snowflake", "ClickHouse", "Redshift"],
    "state management": ["Redux", "Zustand", "Pinia", "MobX"],
}
REASONS = [
    "it was already running in the cluster",
    "the team knows it well",
    "its latency was half in our load test",
    "it costs less at our volume",
    "it supports exactly-once delivery",
    "the managed offering removes on-call load",
    "the license of the alternative changed",
    "it keeps the stack in one language",
    "the benchmark showed fewer timeouts",
    "it has first-class TypeScript types",
]
SUITES = [
    "unit",
    "integration",
    "end-to-end",
    "contract",
    "smoke",
    "load",
    "migration",
    "browser",
    "snapshot",
    "property-based",
    "mutation",
    "accessibility",
]
DEPS = [
    "the local Postgres on port 5433",
    "Docker running",
    "a seeded Redis",
    "the fake S3 from docker compose",
    "Chromium installed",
    "the API running on port 8080",
    "TEST_DATABASE_URL set",
    "node 20",
    "the staging VPN off",
    "a fresh build",
]
SETTINGS = [
    "request timeout",
    "max upload size",
    "log level",
    "connection pool size",
    "retry limit",
    "session lifetime",
    "cache ttl",
    "worker concurrency",
    "page size",
    "rate limit",
    "feature flag refresh interval",
    "smtp host",
    "cors origins",
    "jwt expiry",
    "batch size",
    "webhook secret rotation period",
]
PREF_DOMAINS = [
    "commit messages",
    "test names",
    "error handling",
    "imports",
    "string formatting",
    "type annotations",
    "docstrings",
    "variable naming",
    "code review comments",
    "branch names",
    "logging",
    "dependency pinning",
    "file layout",
    "async code",
    "comments",
    "sql queries",
]
LANGS = ["Python", "TypeScript", "Go", "Rust", "Java", "Ruby", "Kotlin", "C#", "Elixir", "Swift"]
PREF_PAIRS = [
    ("short imperative sentences", "long descriptions"),
    ("explicit code", "clever one-liners"),
    ("early returns", "nested conditionals"),
    ("f-strings", "percent formatting"),
    ("small focused functions", "large functions"),
    ("descriptive names", "abbreviations"),
    ("absolute paths", "relative paths"),
    ("exact version pins", "caret ranges"),
    ("table-driven tests", "one test per case"),
    ("plain SQL", "query builders"),
]
TOOLS = [
    "pytest",
    "npm install",
    "cargo build",
    "docker compose up",
    "go test",
    "tsc",
    "mypy",
    "alembic upgrade",
    "terraform apply",
    "helm upgrade",
    "poetry install",
    "webpack",
    "eslint",
    "gradle build",
    "bundle exec rspec",
    "pip install",
]
MODULES = [
    "yaml",
    "attr",
    "dateutil",
    "jwt",
    "psycopg2",
    "boto3",
    "pydantic",
    "lxml",
    "grpc",
    "numpy",
    "orjson",
    "ujson",
    "google.protobuf",
    "magic",
    "Crypto",
    "cv2",
]
ERROR_SHAPES = [
    (
        "ModuleNotFoundError: No module named '{module}'",
        "missing module {module}",
        "adding {module} to the dev dependencies and reinstalling",
    ),
    (
        "ECONNREFUSED 127.0.0.1:{port}",
        "connection refused on port {port}",
        "starting the dependency container before the tests",
    ),
    (
        "permission denied: /var/run/{module}.sock",
        "permission denied on the {module} socket",
        "adding the user to the docker group",
    ),
    (
        "error: could not resolve host {module}.internal",
        "cannot resolve {module}.internal",
        "pointing DNS at the VPN resolver",
    ),
    (
        "OOMKilled after {port} MiB",
        "out of memory kill at {port} MiB",
        "raising the memory limit and streaming the input",
    ),
    (
        "TimeoutError after {port}s waiting for {module}",
        "timeout waiting for {module}",
        "increasing the startup probe delay",
    ),
    (
        "SSL: CERTIFICATE_VERIFY_FAILED for {module}.example.net",
        "certificate verify failed for {module}",
        "installing the corporate CA bundle",
    ),
    (
        "lockfile out of date: {module}@{port}",
        "outdated lockfile for {module}",
        "regenerating the lockfile on a clean checkout",
    ),
]
INCIDENT_CAUSES = [
    "an expired TLS certificate",
    "a full disk on the database host",
    "a bad migration that locked a large table",
    "a DNS change that pointed at the old load balancer",
    "a memory leak in the image library",
    "a retry storm after a slow dependency",
    "a misconfigured rate limit",
    "a leaked connection pool",
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
PROJECT_WORDS = [
    "atlas",
    "borealis",
    "cinder",
    "dynamo",
    "ember",
    "falcon",
    "granite",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "meridian",
    "nebula",
    "onyx",
    "pioneer",
    "quartz",
    "raven",
    "sierra",
    "tundra",
    "umbra",
    "vertex",
    "willow",
    "xenon",
    "yonder",
    "zephyr",
]
AGENTS = ["opencode", "copilot", "user"]
FILES = [
    "src/app.py",
    "api/routes.ts",
    "cmd/server/main.go",
    "web/src/App.tsx",
    "Makefile",
    "docker-compose.yml",
    "migrations/0042_add_index.sql",
    "README.md",
    "tests/test_api.py",
    ".github/workflows/ci.yml",
    "config/settings.yaml",
    "charts/app/values.yaml",
]


@dataclass
class Memory:
    """One generated memory and, when it answers a question, its key and question slots."""

    record: dict[str, Any]
    key: tuple[Any, ...] | None = None
    template: str = ""
    slots: dict[str, Any] = field(default_factory=dict)


@dataclass
class Query:
    """A labelled question: the text, its filter, and the id that answers it."""

    text: str
    kind: str
    template: str
    relevant: list[str]
    project: str | None = None


def typo(word: str, rng: random.Random) -> str:
    """A realistic one-keystroke slip: two adjacent letters swapped (dokcer), or one doubled."""
    if len(word) < 5:
        return word
    i = rng.randrange(1, len(word) - 2)
    if rng.random() < 0.7:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word[:i] + word[i] + word[i:]


def typo_in(text: str, rng: random.Random) -> str:
    """Put one typo into one of the longer words of a question."""
    words = text.split()
    long_words = [i for i, w in enumerate(words) if len(w.strip("?,.")) >= 6 and w.isalpha()]
    if not long_words:
        return text
    i = rng.choice(long_words)
    words[i] = typo(words[i], rng)
    return " ".join(words)


def _alias(env: str) -> str:
    return ENV_ALIASES.get(env, env)


# Each template: how a memory is written (several phrasings) and how people ask for it
# (separate phrasings, kinds "nl", "synonym", "keyword"). ``scoped`` facts differ per
# project, so their questions carry the project filter.
Slots = dict[str, Any]


@dataclass
class Template:
    name: str
    type: str
    scoped: bool
    key: Callable[[Slots], tuple[Any, ...]]
    draw: Callable[[random.Random], Slots]
    write: list[str]
    ask: dict[str, list[str]]


def _deploy(rng: random.Random) -> Slots:
    env = rng.choice(ENVS)
    target = rng.choice(TARGETS)
    slug = target.split()[0]
    cmd = rng.choice(
        [
            f"make deploy-{env} SERVICE={slug}",
            f"./scripts/deploy.sh {env} {slug}",
            f"kubectl apply -k deploy/overlays/{env}/{slug}",
            f"fly deploy --config fly.{slug}.{env}.toml",
            f"ansible-playbook -i inventories/{env} {slug}.yml",
            f"helm upgrade --install {slug} charts/{slug} -f values-{env}.yaml",
        ]
    )
    return {
        "env": env,
        "alias": _alias(env),
        "target": target,
        "cmd": cmd,
        "dir": rng.choice(["the repo root", "infra/", "ops/", "deploy/"]),
    }


def _port(rng: random.Random) -> Slots:
    env = rng.choice(ENVS)
    return {
        "service": rng.choice(SERVICES),
        "env": env,
        "alias": _alias(env),
        "port": rng.randrange(3000, 9999),
    }


def _decision(rng: random.Random) -> Slots:
    comp = rng.choice(COMPONENTS)
    tech, alt = rng.sample(TECH[comp], 2)
    return {"component": comp, "tech": tech, "alt": alt, "reason": rng.choice(REASONS)}


def _error(rng: random.Random) -> Slots:
    shape, short, fix = rng.choice(ERROR_SHAPES)
    mod = rng.choice(MODULES) + rng.choice(["", "", "-" + rng.choice(SERVICES)])
    port = str(rng.randrange(100, 9999))
    return {
        "tool": rng.choice(TOOLS),
        "error": shape.format(module=mod, port=port),
        "short": short.format(module=mod, port=port),
        "fix": fix.format(module=mod),
        "shape": shape,
    }


def _pref(rng: random.Random) -> Slots:
    good, bad = rng.choice(PREF_PAIRS)
    return {"lang": rng.choice(LANGS), "domain": rng.choice(PREF_DOMAINS), "good": good, "bad": bad}


def _migration(rng: random.Random) -> Slots:
    comp = rng.choice(COMPONENTS)
    old, new = rng.sample(TECH[comp], 2)
    return {
        "component": comp,
        "old": old,
        "new": new,
        "pct": rng.randrange(5, 96, 5),
        "todo": rng.choice(
            [
                "backfill the old rows",
                "switch the read path",
                "remove the dual writes",
                "update the runbook",
                "load-test the new path",
                "delete the old tables",
            ]
        ),
    }


def _tests(rng: random.Random) -> Slots:
    suite = rng.choice(SUITES)
    return {
        "suite": suite,
        "dep": rng.choice(DEPS),
        "cmd": rng.choice(
            [
                f"make test-{suite.split('-')[0]}",
                f"pytest -m {suite.split('-')[0]} -x",
                f"npm run test:{suite.split('-')[0]}",
                f"go test ./... -run {suite.title()}",
                f"tox -e {suite.split('-')[0]}",
            ]
        ),
    }


def _setting(rng: random.Random) -> Slots:
    setting = rng.choice(SETTINGS)
    var = "APP_" + setting.upper().replace(" ", "_").replace("-", "_")
    return {
        "setting": setting,
        "var": var,
        "file": rng.choice(
            [
                "config/settings.yaml",
                ".env.example",
                "app/config.py",
                "charts/app/values.yaml",
                "src/config.ts",
            ]
        ),
        "val": rng.choice(["30", "100", "info", "20", "5", "3600", "50", "10MB"]),
    }


def _incident(rng: random.Random) -> Slots:
    return {
        "service": rng.choice(SERVICES),
        "month": rng.choice(MONTHS),
        "cause": rng.choice(INCIDENT_CAUSES),
        "mins": rng.randrange(5, 240),
    }


TEMPLATES = [
    Template(
        "deploy",
        "procedure",
        True,
        lambda s: (s["env"], s["target"]),
        _deploy,
        [
            "To deploy the {env} {target}, run `{cmd}` from {dir}.",
            "Deploying {target} to {env}: `{cmd}` (run it from {dir}); wait for the health check.",
            "{env} {target} deploys go through `{cmd}` from {dir}, never by hand.",
        ],
        {
            "nl": [
                "how do we deploy the {env} {target}?",
                "what is the command to release the {target} on {env}",
                "steps for pushing a new {target} build to {env}",
            ],
            "synonym": [
                "how do I ship the {target} to {alias}?",
                "{alias} {target} deployment command",
            ],
            "keyword": ["deploy {env} {target}"],
        },
    ),
    Template(
        "port",
        "fact",
        True,
        lambda s: (s["service"], s["env"]),
        _port,
        [
            "The {service} service listens on port {port} in {env}.",
            "In {env}, {service} runs on :{port} (not the default).",
            "{service} ({env}) is exposed on port {port}.",
        ],
        {
            "nl": [
                "what port does the {service} service use in {env}?",
                "which port is {service} on in the {env} environment",
                "where does {service} listen on {env}",
            ],
            "synonym": ["{service} port on {alias} env"],
            "keyword": ["{service} {env} port"],
        },
    ),
    Template(
        "decision",
        "decision",
        True,
        lambda s: (s["component"],),
        _decision,
        [
            "We decided to use {tech} for the {component} instead of {alt} because {reason}.",
            "Decision: {component} uses {tech}, not {alt}; {reason}.",
            "Chose {tech} over {alt} for the {component} since {reason}.",
        ],
        {
            "nl": [
                "why did we pick {tech} for the {component}?",
                "what did we choose for the {component} and why",
                "which technology backs our {component}?",
            ],
            "synonym": ["reason for going with {tech} rather than {alt}"],
            "keyword": ["{component} {tech} decision"],
        },
    ),
    Template(
        "error",
        "procedure",
        False,
        lambda s: (s["tool"], s["error"]),
        _error,
        [
            "`{tool}` failed with `{error}`; fixed by {fix}.",
            "Error when running {tool}: {error}. Fix: {fix}.",
            'If {tool} says "{error}", the fix is {fix}.',
        ],
        {
            "nl": [
                "how did we fix the {short} error in {tool}?",
                "{tool} keeps failing with {short}, what was the fix",
                "what solved {short} when running {tool}",
            ],
            "synonym": ["{tool} err {short} workaround"],
            "keyword": ["{tool} {short}"],
        },
    ),
    Template(
        "preference",
        "preference",
        False,
        lambda s: (s["lang"], s["domain"]),
        _pref,
        [
            "User prefers {good} over {bad} for {domain} in {lang}.",
            "In {lang} code, the user wants {good} for {domain}, not {bad}.",
            "Preference ({lang}, {domain}): {good}; avoid {bad}.",
        ],
        {
            "nl": [
                "what style does the user want for {domain} in {lang}?",
                "how should I write {domain} in {lang} for this user",
                "does the user have a preference about {lang} {domain}?",
            ],
            "synonym": ["preferred {domain} conventions {lang}"],
            "keyword": ["{lang} {domain} preference"],
        },
    ),
    Template(
        "migration",
        "project_state",
        True,
        lambda s: (s["component"], "migration"),
        _migration,
        [
            "Migration of the {component} from {old} to {new} is {pct}% done; next: {todo}.",
            "{component}: moving from {old} to {new}, about {pct}% complete. Remaining: {todo}.",
            "Status: {component} {old} -> {new} migration at {pct}%, then {todo}.",
        ],
        {
            "nl": [
                "where are we with moving the {component} to {new}?",
                "what's the status of the {component} migration",
                "how far along is the switch from {old} to {new}",
            ],
            "synonym": ["progress on {component} {new} migration"],
            "keyword": ["{component} migration status"],
        },
    ),
    Template(
        "tests",
        "procedure",
        True,
        lambda s: (s["suite"],),
        _tests,
        [
            "Run the {suite} tests with `{cmd}`; they need {dep}.",
            "{suite} test suite: `{cmd}` (requires {dep}).",
            "To run {suite} tests locally use `{cmd}` and make sure of {dep}.",
        ],
        {
            "nl": [
                "how do I run the {suite} tests?",
                "what do the {suite} tests need to pass locally",
                "command for the {suite} test suite",
            ],
            "synonym": ["run {suite} specs"],
            "keyword": ["{suite} tests command"],
        },
    ),
    Template(
        "setting",
        "fact",
        True,
        lambda s: (s["setting"],),
        _setting,
        [
            "The {setting} is configured via the {var} env var (default {val}), read in {file}.",
            "{setting}: set {var} (defaults to {val}); see {file}.",
            "Change the {setting} with {var}; the default {val} lives in {file}.",
        ],
        {
            "nl": [
                "where do we configure the {setting}?",
                "how can I change the {setting}",
                "which environment variable controls the {setting}?",
            ],
            "synonym": ["{setting} config var"],
            "keyword": ["{setting} setting"],
        },
    ),
    Template(
        "incident",
        "event",
        True,
        lambda s: (s["service"], s["month"]),
        _incident,
        [
            "In {month} the {service} outage ({mins} minutes) was caused by {cause}.",
            "{service} went down for {mins} min in {month}: root cause {cause}.",
            "Postmortem {month}: {service} outage, {cause}.",
        ],
        {
            "nl": [
                "what caused the {service} outage in {month}?",
                "why did {service} go down back in {month}",
                "root cause of the {month} {service} incident",
            ],
            "synonym": ["{service} downtime {month} reason"],
            "keyword": ["{service} outage {month}"],
        },
    ),
]
TEMPLATE_WEIGHTS = [14, 14, 8, 16, 6, 6, 6, 10, 8]


def _summary(rng: random.Random) -> str:
    """A session summary: many shared words, answers nothing (a realistic distractor)."""
    s, c, t = rng.choice(SERVICES), rng.choice(COMPONENTS), rng.choice(TARGETS)
    return rng.choice(
        [
            f"Session summary: worked on the {s} {t}, touched {rng.choice(FILES)} and "
            f"{rng.choice(FILES)}; ran {rng.choice(TOOLS)}; {c} still open.",
            f"Discussed the {c} and the {rng.choice(ENVS)} {t}; no decision yet about "
            f"{rng.choice(TECH[c])}.",
            f"Reviewed a pull request for {s}: renamed helpers, added tests for the {c}.",
            f"Paired on the {s} port config and the {rng.choice(SUITES)} tests; "
            f"deploy to {rng.choice(ENVS)} postponed.",
        ]
    )


def projects_for(n: int) -> list[str]:
    """Project keys: about 250 memories per project, as many as the corpus needs."""
    count = max(4, n // 250)
    names = []
    for i in range(count):
        a = PROJECT_WORDS[i % len(PROJECT_WORDS)]
        b = PROJECT_WORDS[(i // len(PROJECT_WORDS) + 7 * i) % len(PROJECT_WORDS)]
        names.append(f"{a}-{b}-{i:03d}")
    return names


def generate(n: int, seed: int = 7) -> list[Memory]:
    """``n`` memories (about 80% answerable, 20% distractor summaries), deterministic."""
    rng = random.Random(seed)
    projects = projects_for(n)
    keys: set[tuple[Any, ...]] = set()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    out: list[Memory] = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > n * 50:
            raise RuntimeError("slot space exhausted; raise the number of projects")
        created = start + timedelta(minutes=rng.randrange(0, 60 * 24 * 300))
        project = rng.choice(projects)
        agent = rng.choice(AGENTS)
        if rng.random() < 0.2:
            rec = _record(rng, "conversation", _summary(rng), project, agent, created, [])
            out.append(Memory(rec))
            continue
        tpl = rng.choices(TEMPLATES, TEMPLATE_WEIGHTS)[0]
        slots = tpl.draw(rng)
        key = (tpl.name, project if tpl.scoped else None, *tpl.key(slots))
        if key in keys:
            continue
        keys.add(key)
        content = rng.choice(tpl.write).format(**slots)
        content = content[0].upper() + content[1:]
        tags = [tpl.name, *(w for w in (slots.get("env"), slots.get("lang")) if w)]
        mem_project = project if tpl.scoped or rng.random() < 0.5 else None
        if tpl.name == "preference":
            mem_project = None
        rec = _record(rng, tpl.type, content, mem_project, agent, created, tags)
        out.append(Memory(rec, key, tpl.name, {**slots, "project": project}))
    return out


def _record(
    rng: random.Random,
    mtype: str,
    content: str,
    project: str | None,
    agent: str,
    created: datetime,
    tags: list[str],
) -> dict[str, Any]:
    return {
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "type": mtype,
        "content": content,
        "confidence": round(rng.uniform(0.6, 1.0), 2),
        "tags": [t.lower().replace(" ", "-").replace("#", "sharp") for t in tags],
        "project": project,
        "entered_by": agent,
        "created_at": created.isoformat().replace("+00:00", "Z"),
        "source": "extract",
    }


QUERY_KINDS = ["nl", "nl", "nl", "synonym", "typo", "keyword"]
TEMPLATES_BY_NAME = {t.name: t for t in TEMPLATES}


def queries(memories: list[Memory], count: int = 240, seed: int = 11) -> list[Query]:
    """``count`` labelled questions about answerable memories, spread over templates and
    kinds (natural language, abbreviations/synonyms, typos, terse keywords)."""
    rng = random.Random(seed)
    answerable = [m for m in memories if m.key is not None]
    picked = rng.sample(answerable, min(count, len(answerable)))
    out: list[Query] = []
    for i, mem in enumerate(picked):
        tpl = TEMPLATES_BY_NAME[mem.template]
        kind = QUERY_KINDS[i % len(QUERY_KINDS)]
        pool = tpl.ask["nl"] if kind == "typo" else tpl.ask[kind]
        text = rng.choice(pool).format(**mem.slots)
        if kind == "typo":
            text = typo_in(text, rng)
        out.append(
            Query(
                text=text,
                kind=kind,
                template=tpl.name,
                relevant=[mem.record["id"]],
                project=mem.slots["project"] if tpl.scoped else None,
            )
        )
    return out


def records(memories: list[Memory]) -> Iterator[dict[str, Any]]:
    """The import records (the export format's memory objects)."""
    for m in memories:
        yield m.record


def build_db(n: int, path: Path, seed: int = 7) -> list[Memory]:
    """Create (or reuse) a memory DB at ``path`` holding the ``n``-memory corpus."""
    from llmem_hooks import MemoryStore

    memories = generate(n, seed)
    stamp = path.with_suffix(".ok")
    if path.exists() and stamp.exists() and stamp.read_text() == f"{n}:{seed}":
        return memories
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with MemoryStore(path) as store:
        store.import_memories(list(records(memories)))
    stamp.write_text(f"{n}:{seed}")
    return memories


CACHE_DIR = Path(__file__).resolve().parent.parent / "build" / "bench"
