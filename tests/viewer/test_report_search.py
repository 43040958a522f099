"""The static report's search index and script without a browser: the terms come from the
store's own FTS5 tokenizer (a read-only store too, which is left as it was), the index
cannot end its ``<script>`` element, and the page's script (web/report_search.js, run in
node) ranks as the live viewer's search does on a store of look-alike memories. The node
test is skipped where node is not installed; the browser tests are in
test_report_search_browser.py."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from llmem_hooks.config import Config
from llmem_hooks.store import MemoryStore, fts_terms
from llmem_hooks.viewer.data import ViewerData
from llmem_hooks.viewer.page import render_page

JS = Path(__file__).resolve().parents[2] / "llmem_hooks" / "viewer" / "web" / "report_search.js"
RUNNER = """
const fs = require('fs'), vm = require('vm');
const [,, js, index, questions, memories] = process.argv;
const ctx = {}; vm.createContext(ctx);
vm.runInContext(fs.readFileSync(js, 'utf8') + ';globalThis.make = makeReportSearch;' +
  'globalThis.text = memoryText;', ctx);
const mems = JSON.parse(fs.readFileSync(memories, 'utf8'));
const search = ctx.make(JSON.parse(fs.readFileSync(index, 'utf8')),
  new Map(mems.map((m) => [m.id, ctx.text(m)])));
const asked = JSON.parse(fs.readFileSync(questions, 'utf8'));
const out = asked.map((q) => search(q, 50).map((h) => h.id));
process.stdout.write(JSON.stringify(out));
"""

SERVICES = ["api server", "billing worker", "search cluster", "docs site", "auth proxy"]
ENVS = ["staging", "production", "preview", "sandbox"]
TOOLS = ["make deploy", "helm upgrade", "ansible-playbook site.yml", "./scripts/ship.sh"]


def _fill(st: MemoryStore, rng: random.Random) -> dict[tuple[str, str], str]:
    """Look-alike memories: how each service is deployed to each environment, its port,
    and unrelated chatter. Returns the deploy memories by (service, env)."""
    ids = {}
    for service in SERVICES:
        for env in ENVS:
            tool = rng.choice(TOOLS)
            ids[(service, env)] = st.add(
                "procedure",
                f"To deploy the {env} {service}, run `{tool} {env}` and watch the rollout",
                project="acme",
                tags="deploy",
            )
            st.add("fact", f"The {env} {service} listens on port {rng.randrange(2000, 9000)}")
    for n in range(30):
        st.add("fact", f"Reviewed pull request {n} about logging and retries in the worker")
    return ids


def test_terms_come_from_the_stores_tokenizer_and_leave_a_read_only_store_alone(
    tmp_path: Path,
) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as st:
        a = st.add("decision", "We deploy staging with make deploy-staging", tags="deploy")
        st.add("fact", "Café opening hours were deployed", summary="naïve deployment")
    with MemoryStore(db, read_only=True) as st:
        idx = fts_terms.term_index(
            st.db, [a, "no-such-id"], ["Deploying", "staging", "café", "v1.2"]
        )
        assert st.db.fetchone("PRAGMA query_only")[0] == 1
        assert st.db.fetchall("SELECT name FROM sqlite_temp_master") == []
        assert st.count_matching('"deploy"') == 2
    length, tf = idx.docs[a]
    assert set(idx.docs) == {a}
    # deploy x2 in content, once in tags (weight 0.75); staging x2; plus the project scope
    assert tf["deploi"] == 2.75 and tf["stage"] == 2.0 and length >= 9
    # a word of two tokens ("v1.2") has no one term: the page looks up its tokens
    assert idx.word_terms == {"Deploying": "deploi", "staging": "stage", "café": "cafe"}
    assert idx.df["deploi"] == 2 and idx.df["stage"] == 1
    assert idx.rows == 2


def test_the_index_cannot_end_its_script_element(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        st.add("fact", "</script><script>alert(1)</script> <!-- \u2028 & </SCRIPT >")
        data = ViewerData(st, home=tmp_path)
        overview = data.overview(details=True)
        listed = [*overview["memories"], *overview["conversations"]]
        index = data.search_index([m["id"] for m in listed])
        page = render_page(overview, live=False, search_index=index)
    blocks = re.findall(
        r'<script id="llmem-search" type="application/json">(.*?)</script>', page, re.S
    )
    assert len(blocks) == 1
    assert "<" not in blocks[0] and ">" not in blocks[0] and "&" not in blocks[0]
    assert json.loads(blocks[0])["docs"][0]["t"]  # still JSON, with the memory's terms


def _run_report(tmp_path: Path, index: dict, questions: list[str], listed: list[dict]) -> list:
    files = {
        "runner.js": RUNNER,
        "index.json": json.dumps(index),
        "questions.json": json.dumps(questions),
        "memories.json": json.dumps(listed),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [
            "node",
            str(tmp_path / "runner.js"),
            str(JS),
            *(str(tmp_path / n) for n in list(files)[1:]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_report_search_ranks_as_the_live_search_does(tmp_path: Path) -> None:
    rng = random.Random(5)
    with MemoryStore(tmp_path / "m.db") as st:
        ids = _fill(st, rng)
        # A short word matches whole or with an ending ("web" is not "webhook"); a
        # hyphenated word no memory holds as written stands for its parts.
        web = st.add("fact", "The web dashboard is served on port 8081 behind the auth proxy")
        hook = st.add(
            "fact", "The webhook handler of the billing worker retries 5 times on port 8090"
        )
        limits = st.add("decision", "The auth proxy applies rate limiting per client key")
        # A hyphenated word held as written whose parts are said apart (`search.compounds`).
        st.add("fact", "Feature flags are read through the unleash client")
        st.add("fact", "The old date library was replaced by the standard one")
        flags = st.add(
            "fact", "features.ts replaced it: FEATURE_PRICE_BOOST from env, the flag name salted"
        )
        # A "when" / "how many" question lifts a text that says a time / a number
        # (`text.answer_kinds`), in the page as in the live search.
        moved = st.add("event", "The auth proxy moved to the new cluster on 3 March")
        st.add("event", "The auth proxy moved its logs to the new cluster dashboards")
        # A name the question says puts the project that says it first
        # (`Retriever._named_first`): the answer there does not say her name.
        for n in range(4):
            st.add(
                "fact",
                f"Servers shipped to cage {n}: cages filled, servers shipped",
                project=f"o{n}",
            )
        st.add("fact", "Nadia booked the network team for Friday", project="nadia")
        racks = st.add("fact", "Forty servers shipped by the weekend", project="nadia")
        # A project that shares a word or two with the question by chance goes below the
        # one that holds it (`search/coherence.py`).
        st.add(
            "fact",
            "Each generated invoice PDF ends up in the bucket under invoices/{customer}/{year}",
            project="billing",
        )
        storage = st.add(
            "fact", "Object storage is MinIO locally and S3 in production", project="billing"
        )
        st.add(
            "fact",
            "The editor keeps each document in the document object model, document by document",
            project="webapp",
        )

        # Within one project a name's sessions lead by a margin, and a name the talk
        # writes in lower case (a tool's) orders nothing (`Retriever._named_first`).
        def said(text: str, project: str, session: str) -> str:
            return st.add("fact", text, project=project, session_id=session)

        said("Valkey memory? Valkey uses 40 MB", "uploads", "u1")
        said("valkey://localhost:6380 answers, `valkey-cli ping` says PONG", "uploads", "u1")
        kept = said(
            "Failed uploads stay 7 days, then the uploader throws them away", "uploads", "u2"
        )
        for n in range(3):
            said(f"uploader {n} restarted", "uploads", f"u{n + 3}")
        said("Marta joined this week", "shop", "m1")
        for n in range(6):
            said(f"Marta asked about lunch {n}", "shop", "m1")
        cache = said(
            "The storefront cache is Varnish; the cache benchmark gave a 94% hit rate", "shop", "m2"
        )
        for n in range(4):
            said(f"storefront deploy {n} green", "shop", f"m{n + 3}")
        # One text in several sessions is shown once (`retriever._distinct`).
        copies = {
            st.add(
                "event",
                f"Session  summary: {' ' * n}2 user turns, 2 assistant replies.",
                session_id=f"s{n}",
                dedupe=False,
            )
            for n in range(3)
        }
        # One exchange is shown once: a long one's parts and its episode share its
        # messages (`session.episodes.middle_parts`, `retriever._distinct`).
        exchange = {
            st.add(
                "conversation",
                ("User: How do we rotate the vault tokens? …\n…\n" if part else "")
                + f"Step {part}: rotate the vault token pool {part} and reload the agents",
                source="episode",
                session_id="v1",
                source_message_ids=["vm1", "vm2"],
                metadata={"episode": True, **({"part": part} if part else {})},
                dedupe=False,
            )
            for part in (1, 2, 0)
        }
        data = ViewerData(st, Config.coerce({"viewer": {"list_limit": 1000}}), home=tmp_path)
        overview = data.overview(details=True)
        listed = [*overview["memories"], *overview["conversations"]]
        index = data.search_index([m["id"] for m in listed])
        questions, answers = [], []
        for (service, env), mid in sorted(ids.items()):
            for form in (
                f"how do we deploy the {env} {service}?",
                f"deploying {service} to {env}",
                f"{service} {env} rollout",
            ):
                questions.append(form)
                answers.append(mid)
        extra = (
            ("which port is the web on", web),
            ("rate-limiting in the proxy", limits),
            ("what replaced the feature-flag library?", flags),
            ("how many retries does the webhook handler do?", hook),
            ("when did the auth proxy move to the new cluster?", moved),
            ("How many servers did Nadia ship to the cage?", racks),
            ("Where does each generated document end up in object storage?", storage),
            ("How long do failed uploads stay in Valkey before the uploader drops them?", kept),
        )
        for form, mid in extra:
            questions.append(form)
            answers.append(mid)
        questions.append("how do we rotate the vault token pool?")
        questions.append("Which cache did Marta put in front of the storefront, and its hit rate?")
        questions.append("how many user turns did the session have?")
        questions.append("constructor __proto__ toString")  # no object's own names
        questions.append("what did we decide about the coffee machine?")
        live = [[h["id"] for h in data.search(q)["hits"]] for q in questions]
    report = _run_report(tmp_path, index, questions, listed)
    assert report[-1] == [] and live[-1] == []  # nothing about coffee machines
    assert report[-2] == live[-2] == []
    assert len(copies) == 3 and len(set(live[-3]) & copies) == 1  # one of the three copies
    assert report[-3] == live[-3]
    assert cache in live[-4][:5]  # Marta's session and the answer, which leads (`coherence`)
    assert report[-4] == live[-4]
    assert len(set(live[-5]) & exchange) == 1 and live[-5][0] in exchange
    assert report[-5] == live[-5]
    for q, answer, got, want in zip(questions, answers, report, live, strict=False):
        assert got[:1] == [answer], q
        assert got[:10] == want[:10], q  # the same ten, in the same order


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_report_search_orders_no_sessions_by_a_tools_name(tmp_path: Path) -> None:
    """A name the talk gives its code (`TraefikConfig`) is a tool's, however capitalised:
    it orders no sessions (`text.query.written_as_names`), in the page as live."""
    with MemoryStore(tmp_path / "m.db") as st:

        def said(text: str, session: str) -> str:
            return st.add("fact", text, project="edge", session_id=session)

        said("Traefik routes the edge; Traefik logs are fine", "e1")
        said("TraefikConfig loaded, Traefik restarted", "e1")
        renew = said("The TLS certificates renew every 60 days on the router", "e2")
        for n in range(3):
            said(f"edge note {n} filed", f"e{n + 3}")
        data = ViewerData(st, Config.coerce({"viewer": {"list_limit": 1000}}), home=tmp_path)
        overview = data.overview(details=True)
        listed = [*overview["memories"], *overview["conversations"]]
        index = data.search_index([m["id"] for m in listed])
        questions = ["How often do Traefik's TLS certificates renew?"]
        live = [[h["id"] for h in data.search(q)["hits"]] for q in questions]
    report = _run_report(tmp_path, index, questions, listed)
    assert live[0][0] == renew and report == live
