"""Other words for what a question asks: synonyms, irregular verb forms, and the kinds a
general word stands for.

Without an embedding model a question finds only the words it shares with a memory, and
people rarely ask in the words they once said: "what did Ana *buy*" when she said "I
*bought*", "the *elevator*" for "the *lift*", "which *sport*" for "five-a-side football".
Porter stemming covers regular inflections only (deploys, deployed -> deploy). This table
gives `query.parse_query` the alternatives each question word is widened to (an OR inside
the word's slot, so the question's other words still count):

- ``SYNONYM_GROUPS``: words that mean the same, each stands for the others (software
  abbreviations; British and American words; everyday near-synonyms);
- ``IRREGULAR_VERBS``: the forms of a verb stemming cannot join (buy bought, eat ate eaten);
- ``KINDS``: a general word and the kinds it names, one way only: "sport" finds
  "football", but "football" does not find every sport.

Words a software question uses in another sense (job, run, build, key) have no kinds and
no synonyms: "how many jobs before the worker recycles?" was widened to "position" and
"career" (a job's everyday sense) and ranked an ORM model's `position` column above the
answer (a technical conversation written 2026-11-28, scored once). Software categories
do ("framework" finds FastAPI, "logging" structlog: a developer asks by category and said
the name).
"""

from __future__ import annotations

# Abbreviations and near-synonyms common in software work.
SOFTWARE_GROUPS = (
    "db database databases",
    "postgres postgresql psql pg",
    "k8s kubernetes kubectl",
    "repo repository",
    "env environment",
    "config configuration settings",
    "deps dependencies",
    "js javascript",
    "ts typescript",
    "py python",
    "auth authentication login",
    "prod production",
    "dev development",
    "pr pull-request",
    "mr merge-request",
    "docs documentation",
    "dir directory folder",
    "msg message",
    "err error failure",
    "perf performance",
    "creds credentials",
    "pkg package",
    "lib library",
    "test testing spec",
    # what people call the same thing in a developer's conversation
    "main master trunk",
    "staging preprod pre-production",
    "server host",
    "duplicate duplicates duplicated doubled double",
    "refund refunds refunded money-back",
    "cpu core cores processor",
    "count tally",
    "signed logged",
    "customer customers shopper shoppers buyer buyers",
    "upgrade bump",
    "flaky intermittent",
    "slow latency sluggish",
)

# British / American words, and everyday near-synonyms.
EVERYDAY_GROUPS = (
    "lift elevator",
    "flat apartment",
    "holiday vacation",
    "film movie",
    "football soccer",
    "mum mom",
    "shop store",
    "trainers sneakers",
    "tyre tire",
    "colour color",
    "favourite favorite",
    "neighbour neighbor",
    "theatre theater",
    "centre center",
    "motorway highway",
    "rubbish trash garbage",
    "move moving relocate relocation",
    "hurt injure injured injury sprain sprained strain",
    "quarrel feud dispute",
    "trip journey travel",
    "purchase buy",
    "ill sick illness",
    "kid kids child children",
    "scared afraid frightened terrified",
    "award prize",
    "novel book",
    "photo photograph picture",
    "wedding marriage married",
    "died death funeral",
    "begin start",
    "cheer support",
    "fix repair",
    "cook bake",
    "phone smartphone cellphone mobile",
    "born birth newborn",
    "doctor physician gp",
    "physio physiotherapist physiotherapy",
    "vet veterinarian",
    "uni university college",
    "boss manager supervisor",
    "exam exams",
    "spouse husband wife",
    "grandchild grandchildren grandson grandsons granddaughter granddaughters grandkid grandkids",
    "grandparent grandparents grandmother grandfather grandma grandpa granny",
    "course module",
    "dad father",
    "mum mom mother",
    "hire hired employ employed employee recruit recruited",
    # clipped words people say for the long ones (a closed class of everyday English)
    "sax saxophone saxophonist",
    "psych psychology psychologist",
    "fridge refrigerator",
    "gym gymnasium",
    "lab laboratory",
    "exam examination",
    "maths math mathematics",
    "info information",
    "rehab rehabilitation",
    "ref referee",
    "telly tv television",
    "plane airplane aeroplane",
    "flu influenza",
    "gran granny grandma",
    "sis sister",
    "bro brother",
    "bday birthday",
    "xmas christmas",
    "bike bicycle",
    "pup puppy",
    "baptise baptised baptize baptized baptism christening christened",
)

IRREGULAR_VERBS = (
    "buy bought",
    "go went gone",
    "eat ate eaten",
    "run ran",
    "see saw seen",
    "make made",
    "take took taken",
    "give gave given",
    "tell told",
    "write wrote written",
    "find found",
    "meet met",
    "lose lost",
    "win won",
    "begin began begun",
    "bring brought",
    "think thought",
    "teach taught",
    "catch caught",
    "fly flew flown",
    "drive drove driven",
    "ride rode ridden",
    "swim swam swum",
    "sing sang sung",
    "draw drew drawn",
    "grow grew grown",
    "break broke broken",
    "choose chose chosen",
    "speak spoke spoken",
    "leave left",
    "feel felt",
    "keep kept",
    "sleep slept",
    "spend spent",
    "send sent",
    "fall fell fallen",
    "hold held",
    "sell sold",
    "pay paid",
    "lend lent",
    "sit sat",
    "stand stood",
    "wear wore worn",
    "throw threw thrown",
    "forget forgot forgotten",
    "come came",
    "become became",
    "hear heard",
    "wake woke woken",
    "dig dug",
    "hide hid hidden",
    "steal stole stolen",
    "freeze froze frozen",
)

# A general word -> the kinds it names (one way).
KINDS: dict[str, str] = {
    "sport": "football soccer tennis rugby cricket basketball golf running marathon swimming "
    "cycling climbing bouldering hiking skiing boxing yoga volleyball baseball hockey surfing "
    "rowing triathlon badminton squash netball softball skateboarding snowboarding kayaking "
    "karate judo fencing athletics",
    "exercise": "running swimming cycling gym yoga walking hiking climbing pilates jogging "
    "rowing weights lifting spinning crossfit",
    "instrument": "guitar piano drums drum violin viola cello bass flute clarinet oboe bassoon "
    "saxophone sax trumpet trombone tuba horn cornet euphonium harmonica harp ukulele banjo "
    "mandolin accordion keyboard",
    "pet": "dog cat puppy kitten rabbit bunny hamster greyhound parrot budgie tortoise turtle "
    "goldfish lizard snake ferret",
    "injury": "sprain sprained strain strained fracture fractured broke broken torn tear "
    "bruise bruised scraped concussion tendonitis dislocated pulled twisted",
    "dance": "salsa bachata tango ballet waltz swing flamenco tap ballroom zumba hip-hop",
    "hobby": "painting drawing pottery knitting sewing crochet gardening photography baking "
    "reading hiking fishing woodworking chess",
    "activity": "painting drawing pottery knitting sewing gardening photography baking "
    "reading hiking fishing camping swimming running cycling climbing yoga dancing "
    "skiing surfing kayaking volunteering",
    "game": "chess poker scrabble monopoly sudoku crossword catan cards",
    "art": "painting drawing pottery sculpture photography watercolour watercolor sketch ceramics",
    "language": "english spanish french german portuguese italian japanese mandarin chinese "
    "arabic korean hindi python go rust java typescript javascript kotlin swift ruby",
    "appliance": "oven mixer fridge freezer dishwasher microwave blender toaster kettle washer "
    "dryer",
    "dish": "pizza pasta sushi tacos curry soup salad stew burger sandwich noodles risotto "
    "paella lasagna",
    "dessert": "cake pie tart cookies brownies cheesecake tiramisu pudding ice-cream flan",
    "genre": "jazz rock pop classical blues folk hip-hop country reggae metal gospel soul",
    "clothing": "dress shirt jacket coat hat scarf sweater jumper jeans boots",
    "furniture": "sofa couch table chair desk bed shelf shelves wardrobe",
    "degree": "bachelor bachelors master masters phd doctorate diploma",
    "animal": "dog cat bird fish horse frog turtle shark whale puffin rabbit",
    "bird": "puffin puffins pigeon pigeons robin sparrow owl eagle parrot duck swan gull",
    "herb": "basil mint parsley thyme rosemary coriander dill sage",
    "flower": "rose roses tulip tulips dahlia dahlias peony peonies daisy lily orchid",
    "vegetable": "tomato tomatoes bean beans carrot potato lettuce onion courgette",
    "fruit": "apple lemon orange banana strawberry grape pear",
    "relative": "mother father sister brother aunt uncle cousin grandmother grandfather niece "
    "nephew daughter son parents grandson granddaughter husband wife",
    "family": "mother father sister brother aunt uncle cousin grandmother grandfather niece "
    "nephew daughter son parents grandson granddaughter husband wife",
    "vehicle": "car bike bicycle bus train van truck motorbike motorcycle scooter camper "
    "caravan boat",
    "drink": "coffee tea wine beer juice",
    "colour": "red blue green yellow orange purple pink black white grey gray brown navy "
    "cream teal turquoise mustard gold silver beige",
    "color": "red blue green yellow orange purple pink black white grey gray brown navy "
    "cream teal turquoise mustard gold silver beige",
    "monument": "bridge aqueduct tower castle cathedral statue temple",
    "pastry": "croissant croissants cake bun roll",
    "illness": "infection flu cold migraine fever",
    "gift": "present presents",
    "profession": "nurse teacher architect chef doctor barista engineer scientist librarian",
    # Software kinds: what a developer asks about by category ("which web framework",
    # "the logging library we picked") and said by name ("FastAPI", "structlog").
    "framework": "fastapi django flask express nestjs rails spring laravel nextjs react vue "
    "angular svelte pytest jest vitest mocha junit",
    "orm": "sqlalchemy tortoise prisma typeorm sequelize drizzle hibernate gorm diesel",
    "logging": "structlog loguru winston pino logrus zap bunyan log4j",
    "logger": "structlog loguru winston pino logrus zap bunyan log4j",
    "linter": "eslint ruff flake8 pylint golangci-lint clippy rubocop",
    "formatter": "prettier black gofmt rustfmt",
    "broker": "redis rabbitmq kafka nats sqs",
    "queue": "celery rq arq sidekiq rabbitmq kafka sqs bullmq procrastinate",
    "container": "docker podman containerd",
    "proxy": "nginx envoy haproxy traefik caddy",
    "monitoring": "prometheus grafana datadog sentry cloudwatch",
    "cloud": "aws gcp azure",
}


def _table() -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for group in (*SOFTWARE_GROUPS, *EVERYDAY_GROUPS, *IRREGULAR_VERBS):
        words = group.split()
        for w in words:
            table.setdefault(w, []).extend(x for x in words if x != w and x not in table[w])
    for general, kinds in KINDS.items():
        for key in (general, _plural(general)):
            known = table.setdefault(key, [])
            known.extend(k for k in kinds.split() if k not in known)
    return table


def _plural(word: str) -> str:
    """ "injury" -> "injuries", "dish" -> "dishes", "sport" -> "sports"."""
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


ALTERNATIVES: dict[str, list[str]] = _table()


def alternatives(word: str) -> list[str]:
    """The other words ``word`` (lower case) may have been said as; [] when none."""
    found = ALTERNATIVES.get(word)
    if found is None and len(word) > 3 and word.endswith("s"):
        found = ALTERNATIVES.get(word[:-1])
    return list(found or ())
