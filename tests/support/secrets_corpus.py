"""A generated secrets corpus: credential shapes in several contexts, and benign developer
text that only looks like them (issue 9, defects 5 and 7).

Every run draws fresh random values from a seed (taken from the clock unless
``SECRETS_SEED`` is set), so the detector is judged on the phenomenon, not on strings it
has seen. All values are random and fake. Used by tests/foundations/test_secrets_corpus.py and
bench/secret_redaction.py.
"""

# ruff: noqa: E501 - tables of generators read better one per line
from __future__ import annotations

import os
import random
import re
import string
import time
from collections.abc import Callable
from dataclasses import dataclass

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = LOWER + UPPER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"

WORDS = (
    "otter", "hunter", "marble", "falcon", "lantern", "cobalt", "meadow", "pepper", "walrus",
    "saffron", "juniper", "quartz", "harbor", "thistle", "orchid", "glacier", "ember", "willow",
    "canyon", "tundra", "biscuit", "plover", "magpie", "velvet", "cinder", "badger", "maple",
    "puffin", "raven", "sparrow", "mango", "nutmeg", "papaya", "pickle", "tofu", "waffle",
    "zephyr", "kettle", "bramble", "acorn", "dolphin", "gecko", "heron", "iguana", "jackal",
    "koala", "lemur", "marmot", "newt", "ocelot", "panda", "quail", "rhino", "salmon",
)  # fmt: skip
NOUNS = (
    "user", "account", "invoice", "order", "tenant", "session", "payment", "customer", "report",
    "widget", "profile", "setting", "event", "message", "ledger", "cart", "shipment", "refund",
)  # fmt: skip


def seed_from_env() -> int:
    """SECRETS_SEED when set (to reproduce a failure), else a fresh seed from the clock."""
    raw = os.environ.get("SECRETS_SEED")
    return int(raw) if raw else time.time_ns() % 2**32


def rand(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def mixed(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    """Random text of ``alphabet`` holding at least one lower, upper and digit (if present)."""
    while True:
        s = rand(rng, alphabet, n)
        if all(
            any(c in cls for c in s) for cls in (LOWER, UPPER, DIGITS) if set(cls) & set(alphabet)
        ):
            return s


def weak_password(rng: random.Random) -> str:
    """What people really type: a word, sometimes capitalized or with a symbol, no digits."""
    word = rng.choice(WORDS)
    return rng.choice(
        [
            word,
            word.capitalize(),
            word + rng.choice("!#$%?*"),
            word + rng.choice("-_.") + rng.choice(WORDS),
            word.capitalize() + rng.choice(WORDS).capitalize(),
        ]
    )


def password(rng: random.Random) -> str:
    return rng.choice([weak_password(rng), weak_password(rng) + str(rng.randint(1, 9999))])


def symbolic(rng: random.Random, n: int) -> str:
    return mixed(rng, n, ALNUM + "!@#%^*()-_+")


# -- secret shapes ----------------------------------------------------------------------------

Gen = Callable[[random.Random], str]


@dataclass(frozen=True)
class Shape:
    """One credential shape: how to draw a value, what it is called, which contexts apply.

    ``names`` are env-style names (NAME_LIKE_THIS); ``desc`` how prose calls it; ``bare``:
    the value is recognizable by itself (a provider prefix), so prose without a keyword is a
    fair context too. ``templates`` replace the generic contexts when given.
    """

    name: str
    gen: Gen
    names: tuple[str, ...] = ()
    desc: tuple[str, ...] = ()
    bare: bool = False
    templates: tuple[tuple[str, str], ...] = ()


def _jwt(rng: random.Random) -> str:
    return f"eyJ{mixed(rng, 30, URLSAFE)}.eyJ{mixed(rng, 40, URLSAFE)}.{mixed(rng, 43, URLSAFE)}"


def _azure_client_secret(rng: random.Random) -> str:
    return f"{rand(rng, ALNUM, 3)}{rng.choice(DIGITS)}Q~{mixed(rng, 34, ALNUM + '_.-~')}"


PASS_NAMES = ("PGPASSWORD", "MYSQL_PWD", "DBPASSWORD", "REDISPASS", "DB_PASS", "SMTP_PASSWORD",
              "ADMIN_PW", "LDAP_BIND_PASSWD", "RABBITMQ_DEFAULT_PASS", "KEYSTORE_PASSPHRASE")  # fmt: skip

SHAPES: tuple[Shape, ...] = (
    Shape("aws access key id", lambda r: "AKIA" + rand(r, UPPER + DIGITS, 16),
          ("AWS_ACCESS_KEY_ID",), ("AWS access key",), True),
    Shape("aws secret key", lambda r: mixed(r, 40, B64),
          ("AWS_SECRET_ACCESS_KEY",), ("AWS secret access key",)),
    Shape("github classic token", lambda r: "ghp_" + mixed(r, 36), ("GITHUB_TOKEN", "GH_TOKEN"),
          ("GitHub token",), True),
    Shape("github fine-grained", lambda r: f"github_pat_{mixed(r, 22)}_{mixed(r, 59)}",
          ("GITHUB_PAT",), ("GitHub PAT",), True),
    Shape("gitlab token", lambda r: "glpat-" + mixed(r, 20, URLSAFE), ("GITLAB_TOKEN",),
          ("GitLab token",), True),
    Shape("openai key", lambda r: "sk-proj-" + mixed(r, 48, URLSAFE), ("OPENAI_API_KEY",),
          ("OpenAI key",), True),
    Shape("anthropic key", lambda r: "sk-ant-api03-" + mixed(r, 80, URLSAFE),
          ("ANTHROPIC_API_KEY",), ("Anthropic key",), True),
    Shape("slack bot token",
          lambda r: f"xoxb-{rand(r, DIGITS, 11)}-{rand(r, DIGITS, 13)}-{mixed(r, 24)}",
          ("SLACK_BOT_TOKEN",), ("Slack bot token",), True),
    Shape("slack webhook",
          lambda r: f"https://hooks.slack.com/services/T{rand(r, UPPER + DIGITS, 8)}/"
          f"B{rand(r, UPPER + DIGITS, 10)}/{mixed(r, 24)}",
          ("SLACK_WEBHOOK_URL",), ("Slack webhook",), True),
    Shape("google api key", lambda r: "AIza" + mixed(r, 35, URLSAFE), ("GOOGLE_API_KEY",),
          ("Google API key",), True),
    Shape("stripe secret key", lambda r: "sk_live_" + mixed(r, 40), ("STRIPE_SECRET_KEY",),
          ("Stripe key",), True),
    Shape("hugging face token", lambda r: "hf_" + mixed(r, 34), ("HF_TOKEN",), ("HF token",), True),
    Shape("npm token", lambda r: "npm_" + mixed(r, 36), ("NPM_TOKEN",), ("npm token",), True),
    Shape("pypi token", lambda r: "pypi-AgEIcHlwaS5vcmc" + mixed(r, 70, URLSAFE), ("PYPI_TOKEN",),
          ("PyPI token",), True),
    Shape("digitalocean token", lambda r: "dop_v1_" + rand(r, HEX, 64), ("DO_TOKEN",),
          ("DigitalOcean token",), True),
    Shape("sendgrid key", lambda r: f"SG.{mixed(r, 22, URLSAFE)}.{mixed(r, 43, URLSAFE)}",
          ("SENDGRID_API_KEY",), ("SendGrid key",), True),
    Shape("twilio api key", lambda r: "SK" + rand(r, HEX, 32), ("TWILIO_API_KEY",),
          ("Twilio API key",), True),
    Shape("twilio auth token", lambda r: rand(r, HEX, 32), ("TWILIO_AUTH_TOKEN",),
          ("Twilio auth token",)),
    Shape("mailgun key", lambda r: "key-" + mixed(r, 32, LOWER + DIGITS), ("MAILGUN_API_KEY",),
          ("Mailgun key",), True),
    Shape("datadog api key", lambda r: rand(r, HEX, 32), ("DD_API_KEY", "DATADOG_API_KEY"),
          ("Datadog API key",)),
    Shape("datadog app key", lambda r: rand(r, HEX, 40), ("DD_APP_KEY",), ("Datadog app key",)),
    Shape("jwt", _jwt, ("ID_TOKEN", "ACCESS_TOKEN"), ("access token",), True),
    Shape("laravel app key", lambda r: "base64:" + mixed(r, 43, B64) + "=", ("APP_KEY",),
          ("app key",)),
    Shape("azure client secret", _azure_client_secret, ("AZURE_CLIENT_SECRET",),
          ("Azure client secret",), True),
    Shape("azure storage key", lambda r: mixed(r, 86, B64) + "==", ("AZURE_STORAGE_KEY",),
          ("storage account key",)),
    Shape("hashicorp vault token", lambda r: "hvs." + mixed(r, 90, URLSAFE), ("VAULT_TOKEN",),
          ("Vault token",), True),
    Shape("google oauth client secret", lambda r: "GOCSPX-" + mixed(r, 28, URLSAFE),
          ("GOOGLE_CLIENT_SECRET",), ("OAuth client secret",), True),
    Shape("shopify token", lambda r: "shpat_" + rand(r, HEX, 32), ("SHOPIFY_ACCESS_TOKEN",),
          ("Shopify token",), True),
    Shape("django secret key", lambda r: symbolic(r, 50), ("DJANGO_SECRET_KEY", "SECRET_KEY"),
          ("Django secret key",)),
    Shape("generic api key", lambda r: mixed(r, 32), ("API_KEY", "PAYMENTS_API_KEY", "X_API_KEY"),
          ("API key",)),
    Shape("generic token", lambda r: mixed(r, 40, URLSAFE), ("AUTH_TOKEN", "SERVICE_TOKEN"),
          ("auth token",)),
    Shape("generic client secret", lambda r: mixed(r, 24, ALNUM + "-_~."),
          ("CLIENT_SECRET", "OIDC_CLIENT_SECRET"), ("client secret",)),
    Shape("hex encryption key", lambda r: rand(r, HEX, 64), ("ENCRYPTION_KEY", "MASTER_KEY"),
          ("encryption key",)),
    Shape("env password (word)", weak_password, PASS_NAMES, ("password", "admin pw", "db password")),
    Shape("env password", password, PASS_NAMES, ("password", "passphrase")),
    Shape("credentials pair", lambda r: f"{rng_user(r)}:{password(r)}",
          ("DB_CREDENTIALS", "BASIC_AUTH_CREDS"), ("credentials",)),
    Shape("connection string password", weak_password, (), (), False, (
        ("url", "DATABASE_URL=postgres://app:{v}@db.internal:5432/app"),
        ("url", "mysql://root:{v}@127.0.0.1:3306/shop"),
        ("url", "redis://:{v}@cache:6379/0"),
        ("url", "mongodb+srv://ingest:{v}@cluster0.x1y2z.mongodb.net/?retryWrites=true"),
        ("url", "amqp://worker:{v}@mq.internal:5672/vhost"),
        ("yaml", "  url: \"postgresql://svc:{v}@10.0.0.5/reports\""),
        ("prose", "connect with postgres://reader:{v}@replica.internal/app to debug"),
    )),
    Shape("cli --password", password, (), (), False, (
        ("cli", "mysql -h db -u admin --password {v} shop"),
        ("cli", "mysql -h db -u admin --password={v} shop"),
        ("cli", "./tool login --user ops --password '{v}'"),
        ("cli", "pg_restore --db-password {v} dump.sql"),
        ("cli", "app --admin-pass={v} --port 8080"),
    )),
    Shape("cli -p", password, (), (), False, (
        ("cli", "mysql -u root -p{v} shop"),
        ("cli", "mysql -u root -p {v} -h 10.0.0.2"),
        ("cli", "mysqldump -uroot -p'{v}' shop > dump.sql"),
        ("cli", "sshpass -p {v} ssh ops@host"),
        ("cli", "docker login -u ci -p {v} registry.example.com"),
    )),
    Shape("redis-cli -a", password, (), (), False, (
        ("cli", "redis-cli -a {v} ping"),
        ("cli", "redis-cli -h cache -p 6379 -a '{v}' info"),
        ("cli", "redis-cli --pass {v} --no-auth-warning"),
    )),
    Shape("spoken password", weak_password, (), (), False, (
        ("prose", "the admin pw is {v}"),
        ("prose", "The staging password is {v}, rotate it after the demo"),
        ("prose", "db password: {v}"),
        ("prose", "wifi passphrase = {v}"),
        ("prose", "the root password was {v} until Monday"),
        ("prose", "remember the password is '{v}'"),
    )),
    Shape("azure sas signature", lambda r: mixed(r, 43, B64).replace("+", "%2B") + "%3D", (),
          (), False, (
        ("url", "https://acct.blob.core.windows.net/c/x.zip?sv=2022-11-02&sr=b&sp=r&sig={v}"),
        ("url", "https://q.queue.core.windows.net/jobs?sig={v}&se=2027-01-01"),
        ("cli", "az storage blob download --sas-token \"sv=2022-11-02&ss=b&sig={v}\""),
        ("env", "AZURE_SAS=sv=2022-11-02&ss=bfqt&srt=sco&sp=rwdlacup&sig={v}"),
    )),
    Shape("bearer header", lambda r: mixed(r, 40, URLSAFE + "."), (), (), False, (
        ("cli", "curl -H 'Authorization: Bearer {v}' https://api.example.com"),
        ("json", '{{"headers": {{"Authorization": "Bearer {v}"}}}}'),
        ("yaml", "  Authorization: Bearer {v}"),
    )),
    Shape("basic auth", lambda r: mixed(r, 32, B64) + "=", (), (), False, (
        ("cli", "curl -H \"Authorization: Basic {v}\" https://ci.example.com"),
        ("prose", "the proxy expects Authorization: Basic {v}"),
    )),
    Shape("curl -u", password, (), (), False, (
        ("cli", "curl -u admin:{v} https://jenkins.example.com/api/json"),
        ("cli", "curl --user deploy:{v} -X POST https://ci.example.com/job/build"),
    )),
)  # fmt: skip


def rng_user(rng: random.Random) -> str:
    return rng.choice(["app", "svc_app", "deploy", "admin", "reader"])


def _camel(name: str) -> str:
    parts = name.lower().split("_")
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


GENERIC_CONTEXTS: tuple[tuple[str, str], ...] = (
    ("env", "{NAME}={v}"),
    ("env", 'export {NAME}="{v}"'),
    ("env", "{NAME}='{v}' ./run.sh"),
    ("yaml", "{name}: {v}"),
    ("yaml", '  {name}: "{v}"'),
    ("json", '{{"{name}": "{v}", "region": "eu-west-1"}}'),
    ("json", '"{camel}": "{v}",'),
    ("cli", "app --{flag} {v} --verbose"),
    ("cli", "app --{flag}={v}"),
    ("prose", "the {desc} is {v}"),
    ("prose", "{desc}: {v}"),
)
BARE_CONTEXTS: tuple[tuple[str, str], ...] = (
    ("prose", "pushed it with {v} yesterday"),
    ("url", "https://api.example.com/v1/items?key={v}"),
)


@dataclass(frozen=True)
class Case:
    shape: str
    context: str
    value: str
    text: str


def secret_cases(rng: random.Random) -> list[Case]:
    """Every shape in every context that applies, each with a fresh value."""
    cases = []
    for shape in SHAPES:
        contexts = list(shape.templates) or list(GENERIC_CONTEXTS)
        if shape.bare:
            contexts += BARE_CONTEXTS
        for context, template in contexts:
            value = shape.gen(rng)
            name = rng.choice(shape.names) if shape.names else "SECRET"
            text = template.format(
                v=value,
                NAME=name,
                name=name.lower(),
                camel=_camel(name),
                flag=name.lower().replace("_", "-"),
                desc=rng.choice(shape.desc) if shape.desc else "secret",
            )
            cases.append(Case(shape.name, context, value, text))
    return cases


# -- benign look-alikes ----------------------------------------------------------------------


def _ident(rng: random.Random) -> str:
    verb = rng.choice(["get", "fetch", "list", "update", "create", "resolve", "build", "load"])
    nouns = "".join(n.capitalize() for n in rng.sample(NOUNS, rng.randint(2, 4)))
    suffix = rng.choice(["V2", "V3", "ById", "ByIdentifierV2", "2", "Async", "V10", "ForTenant"])
    return f"{verb}{nouns}{suffix}"


def _semver(rng: random.Random) -> str:
    return f"{rng.randint(0, 12)}.{rng.randint(0, 40)}.{rng.randint(0, 30)}"


def _pod(rng: random.Random) -> str:
    kube = "bcdfghjklmnpqrstvwxz2456789"
    return f"{rng.choice(NOUNS)}-{rng.choice(['api', 'worker', 'web'])}-{rand(rng, kube, 10)}-{rand(rng, kube, 5)}"


def _uuid(rng: random.Random) -> str:
    h = rand(rng, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{rng.choice('89ab')}{h[17:20]}-{h[20:]}"


BENIGN: tuple[tuple[str, Gen], ...] = (
    ("identifier", lambda r: f"rename {_ident(r)} to {_ident(r)} before the release"),
    ("identifier", lambda r: f"{_ident(r)}() returns null for archived tenants"),
    ("identifier", lambda r: f"class {''.join(n.capitalize() for n in r.sample(NOUNS, 3))}ServiceV{r.randint(2, 9)}Impl"),
    ("identifier", lambda r: f"def test_{'_'.join(r.sample(NOUNS, 3))}_v{r.randint(2, 5)}():"),
    ("release id", lambda r: f"We named the release after rivers PROJMARK-{r.choice(WORDS)}-{rand(r, DIGITS, 10)}"),
    ("release id", lambda r: f"release-{r.randint(2020, 2027)}.{r.randint(1, 12)}.{r.randint(1, 9)}-rc{r.randint(1, 5)} is tagged"),
    ("build id", lambda r: f"build #{r.randint(1000, 999999)} on runner gha-ubuntu-22-04-x64-{r.randint(2, 64)}core failed"),
    ("build id", lambda r: f"artifact {r.choice(NOUNS)}-api-{_semver(r)}-SNAPSHOT-{rand(r, DIGITS, 8)}.jar"),
    ("ticket", lambda r: f"see {r.choice(['PAY', 'OPS', 'SEC', 'WEB', 'DATA'])}-{r.randint(10, 99999)} and the follow-up"),
    ("incident", lambda r: f"INC-{r.randint(2020, 2027)}{r.randint(1, 12):02d}{r.randint(1, 28):02d}-{r.randint(1, 9999):04d} postmortem is in the wiki"),
    ("sha", lambda r: f"commit {rand(r, HEX, 40)} reverted the schema change"),
    ("sha", lambda r: f"cherry-picked {rand(r, HEX, 7)} onto the {r.randint(1, 5)}.{r.randint(0, 9)} branch"),
    ("sha", lambda r: f"sha256:{rand(r, HEX, 64)}"),
    ("uuid", lambda r: f"request {_uuid(r)} timed out after 30s"),
    ("uuid", lambda r: f'"tenant_id": "{_uuid(r)}"'),
    ("trace id", lambda r: f"trace id {rand(r, HEX, 32)} shows the slow span"),
    ("trace id", lambda r: f"traceparent: 00-{rand(r, HEX, 32)}-{rand(r, HEX, 16)}-01"),
    ("image tag", lambda r: f"image ghcr.io/acme/{r.choice(NOUNS)}-service:v{_semver(r)}-alpine3.{r.randint(10, 20)}"),
    ("image tag", lambda r: f"docker pull registry.example.com/team/{r.choice(NOUNS)}:{r.randint(2020, 2027)}.{r.randint(1, 12)}.{r.randint(1, 28)}-{rand(r, HEX, 7)}"),
    ("bucket", lambda r: f"bucket acme-{r.choice(['prod', 'staging'])}-{r.choice(NOUNS)}s-eu-west-1-{rand(r, HEX, 5)} holds the builds"),
    ("bucket", lambda r: f"s3://acme-{r.choice(NOUNS)}-exports-{rand(r, DIGITS, 12)}/{r.randint(2020, 2027)}/{r.randint(1, 12):02d}/"),
    ("pod", lambda r: f"pod {_pod(r)} keeps crashlooping"),
    ("pod", lambda r: f"kubectl logs {_pod(r)} -c sidecar --since=1h"),
    ("migration", lambda r: f"migration {r.randint(2019, 2027)}{rand(r, DIGITS, 10)}_add_index_on_{r.choice(NOUNS)}s_{r.choice(['email', 'created_at', 'tenant_id'])}"),
    ("migration", lambda r: f"alembic revision {rand(r, HEX, 12)}_{r.choice(NOUNS)}_v{r.randint(2, 9)} is the head"),
    ("cron", lambda r: f"{r.randint(0, 59)} {r.randint(0, 23)} * * {r.choice(['*', '1-5', '0'])} /opt/jobs/{r.choice(NOUNS)}_sync.sh --full"),
    ("cron", lambda r: f"*/{r.randint(2, 30)} * * * * curl -fsS https://hc.example.com/ping/{_uuid(r)}"),
    ("cloud id", lambda r: f"instance i-0{rand(r, HEX, 16)} in subnet-0{rand(r, HEX, 16)} ran out of disk"),
    ("cloud id", lambda r: f"arn:aws:iam::{rand(r, DIGITS, 12)}:role/{r.choice(NOUNS)}-deployer"),
    ("cloud id", lambda r: f"ami-0{rand(r, HEX, 16)} is the golden image"),
    ("url", lambda r: f"https://github.com/acme/{r.choice(NOUNS)}/pull/{r.randint(1, 9999)}/files#diff-{rand(r, HEX, 16)}"),
    ("url", lambda r: f"https://cdn.example.com/assets/app.{rand(r, HEX, 8)}.js"),
    ("url", lambda r: f"https://example.com/search?q={r.choice(NOUNS)}&page={r.randint(1, 9)}&sort=desc"),
    ("keyword prose", lambda r: f"the {r.choice(['token', 'password', 'api key', 'secret'])} is {r.choice(['expired', 'invalid', 'stored in the vault', 'rotated monthly', 'wrong', 'required'])}"),
    ("keyword prose", lambda r: f"reset your password via the {r.choice(['SSO portal', 'admin page', 'CLI'])}"),
    ("keyword prose", lambda r: f"{r.choice(['key', 'token', 'password'])} rotation happens every {r.randint(2, 90)} days"),
    ("keyword config", lambda r: f"{r.choice(['PASSWORD_MIN_LENGTH', 'TOKEN_TTL_SECONDS', 'SECRET_ROTATION_DAYS', 'KEY_SIZE_BITS'])}={r.randint(8, 4096)}"),
    ("keyword config", lambda r: f"{r.choice(['api_key', 'password', 'token', 'client_secret'])}: {r.choice(['${API_KEY}', '<your value>', 'string', 'null', '{{ .Values.secret }}', '$(cat /run/secrets/x)'])}"),
    ("keyword config", lambda r: f"{r.choice(['secret_ref', 'password_file', 'token_url', 'key_prefix', 'auth_mode'])}: {r.choice(NOUNS)}-{r.choice(WORDS)}-v{r.randint(1, 9)}"),
    ("cli flags", lambda r: f"docker run -p {r.randint(1024, 9999)}:{r.randint(80, 9000)} {r.choice(NOUNS)}:{_semver(r)}"),
    ("cli flags", lambda r: f"ssh -p {r.randint(1024, 9999)} deploy@{r.choice(WORDS)}.example.net"),
    ("cli flags", lambda r: f"mkdir -p build/{r.choice(NOUNS)}-{r.randint(1, 99)} && git add -p"),
    ("cli flags", lambda r: f"psql -h db -p {r.randint(5000, 6000)} -U {r.choice(NOUNS)} analytics"),
    ("versions", lambda r: f"pip install '{r.choice(WORDS)}-sdk=={_semver(r)}' broke the lockfile"),
    ("versions", lambda r: f"the helm chart {r.choice(NOUNS)}-gateway-{_semver(r)} pins redis {_semver(r)}"),
    ("feature flag", lambda r: f"flag enable_{r.choice(NOUNS)}_{r.choice(WORDS)}_{r.randint(2020, 2027)}q{r.randint(1, 4)} is at {r.randint(1, 100)} percent"),
    ("numbers", lambda r: f"latency p50 {r.randint(1, 90)}.{r.randint(0, 9)} ms, p99 {r.randint(100, 900)} ms, run {rand(r, DIGITS, 11)}"),
    ("qualified key", lambda r: f"the {r.choice(['cache', 'idempotency', 'partition', 'sort', 'S3 object', 'primary'])} key {r.choice([rand(r, HEX, 32), _uuid(r), mixed(r, 22)])} was reused"),
    ("qualified key", lambda r: f"{r.choice(['CACHE_KEY', 'IDEMPOTENCY_KEY', 'STRIPE_PUBLISHABLE_KEY', 'SSH_PUBLIC_KEY', 'NEXT_PAGE_TOKEN', 'ROUTING_KEY'])}={mixed(r, 32)}"),
    ("qualified key", lambda r: f'"{r.choice(["nextPageToken", "continuationToken", "cursorToken", "publicKey", "objectKey"])}": "{mixed(r, 40, URLSAFE)}"'),
    ("secret reference", lambda r: f"  {r.choice(['existingSecret', 'externalSecret', 'sealedSecret'])}: {r.choice(NOUNS)}-{r.choice(['credentials', 'db-auth', 'tls'])}"),
    ("option after flag", lambda r: f"{r.choice(['app', 'psql', 'deploy'])} --{r.choice(['no-password', 'ask-pass', 'password'])} --{r.choice(['verbose', 'dry-run', 'host'])} {r.choice(NOUNS)}"),
    ("option after flag", lambda r: f"mysql -u {r.choice(NOUNS)} -p -h db-{r.randint(1, 9)}.internal"),
    ("keyword prose", lambda r: f"{r.choice(['Password', 'Passphrase', 'Admin password', 'Secret'])}: {r.choice(['see', 'ask', 'check', 'use'])} the {r.choice(['vault', 'wiki', 'runbook', 'on-call'])}"),
    ("keyword prose", lambda r: f"{r.choice(['Password', 'Token', 'API key'])}: {r.choice(['Required', 'Optional', 'Hidden', 'Masked', 'None'])}"),
    ("public key", lambda r: f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{mixed(r, 43, B64)} deploy@ci"),
    ("integrity", lambda r: f'"integrity": "sha512-{mixed(r, 86, B64)}=="'),
)  # fmt: skip


def benign_cases(rng: random.Random, per_kind: int = 24) -> list[tuple[str, str]]:
    """(category, text) look-alikes: ``per_kind`` fresh draws of every template."""
    return [(kind, gen(rng)) for kind, gen in BENIGN for _ in range(per_kind)]


def read_heldout(path: str) -> list[str]:
    """Lines of a held-out fixture, comments and blanks dropped."""
    with open(path, encoding="utf-8") as fh:
        return [ln.rstrip("\n") for ln in fh if ln.strip() and not ln.startswith("#")]


def holds(text: str, value: str) -> bool:
    """Whether ``text`` holds ``value`` whole: a weak password such as "ember" sits inside
    "remember" in the template's own words, which is no leak."""
    # `in` first: the same answer, without compiling a regex for each value that is absent
    return value in text and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text) is not None


def measure(redact: Callable[[str], str | None], rng: random.Random) -> dict[str, object]:
    """Recall over `secret_cases` and the false-positive rate over `benign_cases`."""
    cases = secret_cases(rng)
    missed = [c for c in cases if (out := redact(c.text)) is not None and holds(out, c.value)]
    benign = benign_cases(rng)
    altered = [(k, t) for k, t in benign if redact(t) != t]
    return {
        "shapes": len(SHAPES),
        "secret_cases": len(cases),
        "recall": 1 - len(missed) / len(cases),
        "missed": missed,
        "benign_cases": len(benign),
        "fp_rate": len(altered) / len(benign),
        "altered": altered,
    }
