// The static report's search (llmem_hooks/viewer/page.py inlines it into the report only;
// llmem_hooks/viewer/search_index.py builds the index it reads from #llmem-search).
// It answers a question as the live search's keyword stages do (search/retriever.py):
// stop words dropped, each word mapped to the store's FTS5 term (the index maps every
// word of the report; an unknown word loses a suffix, then takes its close spellings),
// synonyms widened; the memories holding any rarer word, ranked by FTS5's BM25 with the
// store's column weights and by the best short stretch holding the question's words; then
// the live rerank (rank fused with confidence, recency, access and type priority).
'use strict';
function makeReportSearch(X, texts) {  // texts: id -> content, summary and tags (optional)
  const terms = X.terms, N = X.rows, avgdl = X.avgdl || 1, cfg = X.settings, docs = X.docs;
  const K1 = 1.2, B = 0.75, POOL = 100;  // FTS5's bm25 constants; the live search's pool
  const termIdx = new Map(terms.map((t, i) => [t, i]));
  const vocab = new Map(Object.entries(X.vocab));
  const alternatives = new Map(Object.entries(X.alternatives));
  const stop = new Set(X.stop_words);
  const roles = new Map(Object.entries(X.role_aliases || {}));  // a Map: "constructor" is no role
  const post = terms.map(() => []);  // term -> [[doc, weighted count]]
  docs.forEach((d, i) => {
    for (const p of d.t) { const [t, w] = Array.isArray(p) ? p : [p, 1]; post[t].push([i, w]); }
  });
  // BM25's N counts the index's floor rows too (store/floor_rows.py); the rarity does not
  const idf = X.df.map((n) => { const v = Math.log((N + (X.floor || 0) - n + 0.5) / (n + 0.5)); return v > 0 ? v : 1e-6; });
  const cap = (share) => Math.floor(Math.max(cfg.common_floor, share * N));
  // The live search's words (text/words.py) for stop words; FTS5's (letters, digits) for terms.
  const WORD = /[\p{L}\p{N}_][\p{L}\p{N}_.\-:/+#@]*[\p{L}\p{N}_+#]|[\p{L}\p{N}_]/gu;
  const SURFACE = /[\p{L}\p{N}]+/gu;
  const WHEN = /\b(?:what|which)\s+(?:time|date|day|month|year|week)\b|\bhow long ago\b|\bwhen\s+(?:exactly\s+)?(?:was|were|did|do|does|is|are|will|would|had|has|have)\b/i;
  const fold = (w) => w.toLowerCase().normalize('NFKD').replace(/\p{M}/gu, '');
  // matching.py's _stem: an adverb by its adjective ("locally" holds "local"), a plural in
  // -es by its singular ("crashes" holds "crash").
  const ES_PLURALS = ['shes', 'ches', 'xes', 'sses', 'zes'];
  const unly = (w) => {
    const low = w.toLowerCase();
    if (w.length >= 7 && low.endsWith('ly')) return w.slice(0, -2);
    if (w.length >= 5 && ES_PLURALS.some((e) => low.endsWith(e))) return w.slice(0, -2);
    return w;
  };
  const stem0 = (w) => w.length <= 4 ? w : w.slice(0, Math.max(4, Math.min(6, w.length - 1)));
  const stem = (w) => stem0(unly(w));
  const escape = (w) => w.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  // matching.py's word patterns: a letter of a word, and the endings a short word takes
  const W = '[\\p{L}\\p{N}\\p{M}_]';
  const tail = (p) => `(?:s|es|ed|d|ing|er|${escape(p.slice(-1))}ed|${escape(p.slice(-1))}ing|${escape(p.slice(-1))}er)?(?!${W})`;

  function isStop(w) {  // text/query.py is_stop_word
    if (stop.has(w)) return true;
    for (const [cut, add] of X.stop_inflections) {
      if (w.length > cut.length + 2 && w.endsWith(cut)) {
        const base = w.slice(0, -cut.length) + add;
        if (base.length >= 3 && stop.has(base)) return true;
        const doubled = (cut === 'ing' || cut === 'ed') && base.length >= 4 && base[base.length - 1] === base[base.length - 2];
        if (doubled && stop.has(base.slice(0, -1))) return true;
      }
    }
    return false;
  }
  function contentWords(q) {  // text/query.py content_words
    const ws = [...new Set(q.toLowerCase().match(WORD) || [])];
    const kept = ws.filter((w) => !isStop(w) && (w.length > 1 || /^\d+$/.test(w)));
    return (kept.length ? kept : ws).slice(0, cfg.max_terms);
  }
  function known(w) {
    if (vocab.has(w)) return vocab.get(w);
    return termIdx.has(w) ? termIdx.get(w) : -1;
  }
  // A word no memory of the report says as such: its stem, as the store's Porter stemmer
  // would find it, is mostly the word without an inflection or a derivation suffix.
  const SUFFIXES = ['ations', 'ation', 'ments', 'ment', 'ings', 'ing', 'ions', 'ion', 'ness', 'ies', 'ied',
    'izes', 'ized', 'ize', 'ises', 'ised', 'ise', 'ers', 'er', 'ed', 'es', 'ly', 's', 'e', 'al', 'ity', 'ive'];
  function stemmed(w) {
    const t = known(w);
    if (t >= 0) return t;
    for (const suffix of SUFFIXES) {
      if (w.length < suffix.length + 3 || !w.endsWith(suffix)) continue;
      const base = w.slice(0, -suffix.length);
      for (const c of [base, base + 'e', base.replace(/y$/, 'i'), base + 'i']) {
        const found = known(c);
        if (found >= 0) return found;
      }
    }
    return -1;
  }
  function osa(a, b, max) {  // text/fuzzy.py osa_distance
    if (a === b) return 0;
    if (Math.abs(a.length - b.length) > max) return max + 1;
    let prev2 = [], prev = Array.from({length: b.length + 1}, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const cur = [i];
      for (let j = 1; j <= b.length; j++) {
        let v = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
        if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, prev2[j - 2] + 1);
        cur.push(v);
      }
      if (Math.min(...cur) > max) return max + 1;
      prev2 = prev; prev = cur;
    }
    return prev[b.length];
  }
  const corrected = new Map();  // word -> its corrections (the report does not change)
  function corrections(w) {
    if (!corrected.has(w)) corrected.set(w, closeSpellings(w));
    return corrected.get(w);
  }
  const trigrams = (w) => { const p = `  ${w} `, out = new Set(); for (let i = 0; i + 3 <= p.length; i++) out.add(p.slice(i, i + 3)); return out; };
  let grams = null;  // trigram -> the report's words holding it (text/fuzzy.py, store/vocabulary.py)
  function closeSpellings(w) {  // store/vocabulary.py suggest() over the report's words
    if (w.length < 4 || !/^[a-z][a-z0-9_]{2,31}$/.test(w)) return [];
    if (grams === null) {
      grams = new Map();
      for (const s of new Set([...vocab.keys(), ...terms])) {
        if (!/^[a-z][a-z0-9_]{2,31}$/.test(s)) continue;
        for (const g of trigrams(s)) { if (!grams.has(g)) grams.set(g, []); grams.get(g).push(s); }
      }
    }
    const mine = trigrams(w), shared = new Map();
    for (const g of mine) for (const s of grams.get(g) || []) shared.set(s, (shared.get(s) || 0) + 1);
    const need = Math.max(1, Math.floor(mine.size / 4)), th = cfg.fuzzy_threshold, scored = [];
    const likely = [...shared].filter(([, n]) => n >= need).sort((a, b) => b[1] - a[1]).slice(0, 40);
    for (const [s] of likely) {
      if (s === w || Math.abs(s.length - w.length) > w.length * (1 - th) + 1) continue;
      const longest = Math.max(s.length, w.length);
      const sim = 1 - osa(w, s, Math.floor((1 - th) * longest + 1e-9)) / longest;
      if (sim >= th) scored.push([s, sim]);
    }
    scored.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const top = cap(cfg.correction_share), out = [];
    for (const [s] of scored.slice(0, 3)) {
      const t = known(s);
      if (t >= 0 && X.df[t] <= top && !out.some((c) => c[1] === t)) out.push([s, t]);
    }
    return out;
  }
  // A question word: the alternatives that match it, each a list of terms a memory must all
  // hold (a word such as "v1.2" is two terms, as FTS5 reads the phrase).
  function group(word) {
    const tokens = (word.match(SURFACE) || []).map(fold);
    const own = tokens.map(stemmed);
    const alts = own.every((t) => t >= 0) && own.length ? [own] : [];
    if (alts.length && own.length > 1) {  // FTS5 reads it as a phrase: its tokens side by side
      const gap = '[\\p{L}\\p{N}]*[^\\p{L}\\p{N}]+';
      own.re = new RegExp('(?<![\\p{L}\\p{N}])' + tokens.map((w) => escape(stem(w))).join(gap), 'iu');
    }
    const common = cap(cfg.alternative_share);
    let syn = alternatives.get(word);
    if (!syn && word.length > 3 && word.endsWith('s')) syn = alternatives.get(word.slice(0, -1));
    const said = [word];  // the spellings the live search counts a memory's words with
    for (const [w, t] of syn || []) {
      if (X.df[t] > common) continue;
      said.push(w);
      if (!alts.some((a) => a.length === 1 && a[0] === t)) alts.push([t]);
    }
    return {word, alts, said, own: alts.length > 0 && own.every((t) => t >= 0)};
  }
  function holds(d, alt) {
    if (!alt.every((t) => tf(d, t) > 0)) return false;
    const text = alt.re && texts ? texts.get(docs[d].id) : undefined;
    return text === undefined || alt.re.test(text);
  }
  const tfCache = new Map();
  function tf(d, t) {
    let m = tfCache.get(t);
    if (!m) { m = new Map(post[t]); tfCache.set(t, m); }
    return m.get(d) || 0;
  }
  function groupDf(g) { let n = 0; for (const a of g.alts) for (const t of a) n = Math.max(n, X.df[t]); return n; }
  function bm25(d, phrases) {
    const D = docs[d].l;
    let score = 0;
    for (const t of phrases) {
      const f = tf(d, t);
      if (f > 0) score += idf[t] * (f * (K1 + 1)) / (f + K1 * (1 - B + B * D / avgdl));
    }
    return score;
  }
  function candidates(groups) {
    const out = new Set();
    for (const g of groups) for (const a of g.alts) for (const [d] of post[a[0]]) if (!out.has(d) && holds(d, a)) out.add(d);
    for (const g of groups) if (g.apart) for (const d of holdingAll(g.apart)) out.add(d);
    return out;
  }
  // the rows holding every token of ``ts`` (a compound's parts said apart)
  const holdingAll = (ts) => post[ts[0]].map(([d]) => d).filter((d) => ts.every((t) => tf(d, t) > 0));
  // the tokens BM25 weighs; ``apart``: with a compound's parts once more (text/query.py
  // any_of: FTS5 counts the phrase and each part of the AND)
  const phrasesOf = (groups, apart) => groups.flatMap((g) => apart && g.apart ? [...g.alts.flat(), ...g.apart] : g.alts.flat());
  // Best BM25 first; equal scores in the index's row order, as FTS5 returns them.
  const ranked = (ds, phrases) => [...ds].sort((a, b) => a - b).map((d) => [d, bm25(d, phrases)])
    .sort((a, b) => b[1] - a[1]).map((x) => x[0]);
  const people = X.people || [];
  const enteredBy = new Set(docs.filter((d) => d.e !== undefined).map((d) => people[d.e]));
  const upper = (w) => w.charAt(0).toUpperCase() + w.slice(1);
  // The question's words that name a stored author (retriever.py _authors_named).
  function authorsNamed(words) {
    const names = words.filter((t) => t.length > 2 && !/^\d+$/.test(t));
    for (const t of [...names]) if (roles.has(t)) names.push(roles.get(t));
    return {names: new Set(names),
      authors: new Set(names.filter((t) => [t, upper(t), t.toUpperCase()].some((v) => enteredBy.has(v))))};
  }
  // The named author's own statements about the question's other words (_question_extras).
  function authorExtras(groups, authors, hits) {
    const seen = new Set(hits), rest = groups.filter((g) => !authors.has(g.word)), out = [];
    for (const name of [...authors].sort()) {
      if (!rest.length) break;
      for (const v of [name, upper(name), name.toUpperCase()]) {
        const ds = [...candidates(rest)].filter((d) => !seen.has(d) && docs[d].e !== undefined && people[docs[d].e] === v);
        for (const d of ranked(ds, phrasesOf(rest, true)).slice(0, POOL / 2)) { out.push(d); seen.add(d); }
      }
    }
    return hits.concat(out);
  }
  function authorBoost(d, who) {
    const a = docs[d].a || [], m = docs[d].m || [];
    return a.some((i) => who.authors.has(people[i])) || m.some((i) => who.names.has(people[i])) ? cfg.author_boost : 0;
  }
  function comb(n, k) { let r = 1; for (let i = 1; i <= k; i++) r = r * (n - k + i) / i; return Math.round(r); }

  // retriever.py _rarity: each word's IDF, a common word counted up to its cap
  const rarity = (groups) => {
    const common = cap(cfg.common_share);
    return groups.map((g) => { const n = Math.min(groupDf(g), common); return n ? Math.log(1 + N / n) : 0; });
  };
  // matching.py terms_held for one word: its stems at a word's start (a short one whole)
  function heldRe(g) {
    const st = [...new Set(g.said.map((w) => stem(fold(w))))];
    const lg = new Set(g.said.map(fold).filter((w) => w.length > 4).map(stem));
    return new RegExp(`(?<!${W})(?:` + st.map((p) => escape(p) + (lg.has(p) ? '' : tail(p))).join('|') + ')', 'iu');
  }
  // How much of the question the best short stretch of a memory's text holds, as
  // search/matching.py's evidence_scorer weighs it: each word's stems (its first 4-6
  // letters at the start of a word), weighed by IDF, within window_chars of each other.
  function evidence(groups, weights, anywhere) {
    // matching.py's _stem_index: a long word by its stem's start; a word of four letters
    // or fewer whole or with an ending ("led" is not "ledger"); the whole word is matched.
    const stems = groups.map((g, i) => weights[i] > 0 ? [...new Set(g.said.map((w) => stem(fold(w))))] : []);
    const longer = new Set(groups.flatMap((g, i) => weights[i] > 0 ? g.said.map(fold).filter((w) => w.length > 4).map(stem) : []));
    const all = [...new Set(stems.flat())].sort((a, b) => b.length - a.length || (a < b ? -1 : a > b ? 1 : 0));
    // words counted wherever the text holds them (the common ones): one search each
    const present = groups.map((g, i) => [anywhere[i] || 0, g]).filter(([x]) => x > 0).map(([x, g]) => [x, heldRe(g)]);
    const total = weights.reduce((x, y) => x + y, 0) + present.reduce((x, [y]) => x + y, 0);
    if (total <= 0) return () => 0;
    if (!all.length) return (d) => {
      const text = texts ? texts.get(docs[d].id) : undefined;
      return text === undefined ? 0 : Math.min(1, present.reduce((x, [y, re]) => x + (re.test(text) ? y : 0), 0) / total);
    };
    const pieces = all.map((p) => escape(p) + (longer.has(p) ? '' : tail(p)));
    const pattern = new RegExp(`(?<!${W})(?:` + pieces.join('|') + `)${W}*`, 'giu');
    const shortRe = new Map(all.filter((p) => !longer.has(p)).map((p) => [p, new RegExp('^' + escape(p) + tail(p) + '$', 'u')]));
    const owns = (p, k) => longer.has(p) ? k.startsWith(p) : shortRe.get(p).test(k);
    const ownersOf = new Map();
    const width = cfg.window_chars;
    return (d) => {
      const text = texts ? texts.get(docs[d].id) : undefined;
      if (text === undefined) return 0;
      const also = present.reduce((x, [y, re]) => x + (re.test(text) ? y : 0), 0);
      const found = [];
      for (const m of text.matchAll(pattern)) {
        const k = m[0].toLowerCase();
        let owners = ownersOf.get(k);
        if (!owners) {
          owners = [];
          stems.forEach((g, i) => { if (g.some((p) => owns(p, k))) owners.push(i); });
          ownersOf.set(k, owners);
        }
        if (owners.length) found.push([m.index, owners]);
      }
      const counts = weights.map(() => 0);
      let held = 0, best = 0, left = 0;
      for (const [pos, owners] of found) {
        for (const i of owners) { if (counts[i] === 0) held += weights[i]; counts[i] += 1; }
        while (pos - found[left][0] > width) {
          for (const i of found[left][1]) { counts[i] -= 1; if (counts[i] === 0) held -= weights[i]; }
          left += 1;
        }
        best = Math.max(best, held);
      }
      return Math.min(1, (best + also) / total);
    };
  }
  // retriever.py's _ranked: the memories holding any rarer word, best BM25 first (the
  // first evidence_pool), then ordered by BM25 and by evidence (by_evidence).
  function keywordHits(groups) {
    const common = cap(cfg.common_share);
    const want = Math.max(POOL, cfg.evidence_pool);
    let rare = groups.filter((g) => { const n = groupDf(g); return n > 0 && n <= common; });
    const rows = [], bmOf = new Map();
    if (groups.length > 1 || !rare.length) {  // every word first
      const all = phrasesOf(groups);
      const every = [...candidates(groups)].filter((d) => groups.every((g) => g.alts.some((a) => holds(d, a))));
      for (const d of ranked(every, all).slice(0, want)) { rows.push(d); bmOf.set(d, bm25(d, all)); }
    }
    if (!rare.length) rare = groups.filter((g) => groupDf(g) > 0).sort((a, b) => groupDf(a) - groupDf(b)).slice(0, 1);
    if (rare.length && rows.length < want) {  // then any rarer word, unless the pool is full
      const seen = new Set(rows), phrases = phrasesOf(rare, true);
      const more = ranked([...candidates(rare)].filter((d) => !seen.has(d)), phrases).slice(0, want);
      for (const d of more) { rows.push(d); bmOf.set(d, bm25(d, phrases)); }
    }
    if (groups.length < 2 || rows.length < 2) return rows.slice(0, POOL);  // one word: BM25
    const idf = rarity(groups);
    const near = groups.map((g, i) => rare.includes(g) ? idf[i] : 0);
    const far = groups.map((g, i) => rare.includes(g) ? 0 : idf[i]);
    const ev = evidence(groups, near, far);
    const best = Math.max(...bmOf.values()) || 1;
    const share = cfg.bm25_share;
    return rows.map((d, i) => [d, share * bmOf.get(d) / best + (1 - share) * ev(d), i])
      .sort((a, b) => b[1] - a[1] || a[2] - b[2]).map((x) => x[0]).slice(0, POOL);
  }
  // text/fuzzy.py's looks_like_typo: two neighbouring letters swapped, or one letter dropped
  // or doubled inside a word of five or more letters.
  function looksLikeTypo(w, meant) {
    if (w === meant || Math.min(w.length, meant.length) < 5) return false;
    if (w.length === meant.length) {
      const diff = [];
      for (let i = 0; i < w.length; i++) if (w[i] !== meant[i]) diff.push(i);
      return diff.length === 2 && diff[1] === diff[0] + 1 && w[diff[0]] === meant[diff[1]] && w[diff[1]] === meant[diff[0]];
    }
    if (Math.abs(w.length - meant.length) !== 1) return false;
    const [short, long] = w.length < meant.length ? [w, meant] : [meant, w];
    let i = 0;
    while (i < short.length && short[i] === long[i]) i++;
    if (short.slice(i) !== long.slice(i + 1)) return false;
    return (i > 0 && i < short.length) || (i > 0 && long[i] === long[i - 1]);
  }

  // text/query.py names_in: capitalised words inside a sentence, not all capitals or mixed
  // case, not a month or weekday; at most max_names.
  const NAME_TOKEN = /\p{L}+(?:['’]\p{L}+)*/gu;
  const timeWords = new Set(cfg.time_words || []);
  function namesIn(text) {
    const found = [];
    for (const m of text.matchAll(NAME_TOKEN)) {
      const word = m[0].replace(/['’]s$/, ''), rest = word.slice(1);
      if (word.length < 3 || word[0] === word[0].toLowerCase() || rest !== rest.toLowerCase() ||
        rest === rest.toUpperCase()) continue;
      let i = m.index - 1;
      while (i >= 0 && /\s/.test(text[i])) i--;
      if (i < 0 || (cfg.sentence_end || '').includes(text[i]) || (i === m.index - 1 && "-'’".includes(text[i]))) continue;
      const name = word.toLowerCase();
      if (!timeWords.has(name) && !found.includes(name)) found.push(name);
      if (found.length === (cfg.max_names || 4)) break;
    }
    return found;
  }
  // search/coherence.py demote_strays: a project whose hits together hold less
  // than stray_share of the question's weight (each word by its rarity, as the ranked
  // stage counts it) that the best project's hold loses up to stray_penalty of score;
  // then a session likewise, up to session_penalty.
  function strayDemoted(groups, scored) {
    if (groups.length < 2 || scored.length < 2 || !texts) return scored;
    const w = rarity(groups);
    const res = groups.map(heldRe);
    // then the sessions likewise, by session_penalty (coherence.py SESSION_PENALTY)
    return strayDemotedBy('z', cfg.session_penalty, w, res, strayDemotedBy('p', cfg.stray_penalty, w, res, scored));
  }
  function strayDemotedBy(key, penalty, w, res, scored) {
    if (new Set(scored.map((h) => docs[h.d][key]).filter((v) => v !== undefined)).size < 2) return scored;
    const cover = new Map();
    for (const h of scored) {
      const p = docs[h.d][key];
      if (p === undefined) continue;
      const c = cover.get(p) || res.map(() => false);
      const text = texts.get(docs[h.d].id) || '';
      res.forEach((re, i) => { c[i] = c[i] || re.test(text); });
      cover.set(p, c);
    }
    const weight = new Map([...cover].map(([p, c]) => [p, c.reduce((x, f, i) => x + (f ? w[i] : 0), 0)]));
    const best = Math.max(...weight.values());
    if (!(best > 0)) return scored;
    let changed = false;
    for (const h of scored) {
      const p = docs[h.d][key];
      const share = (p === undefined ? best : weight.get(p)) / best;
      if (share < cfg.stray_share) {
        h.score = Math.round((h.score - penalty * (cfg.stray_share - share) / cfg.stray_share) * 10000) / 10000;
        changed = true;
      }
    }
    return changed ? [...scored].sort((a, b) => b.score - a.score || a.rank - b.rank) : scored;
  }
  // text/query.py written_as_names: a name the candidates write in lower case as often as
  // capitalised is a tool's (`redis://`), not someone's; an address's or a handle's does
  // not count. So is one that starts an identifier (`RedisClient`, `Graviton3`,
  // `Dockerfile`: _starts_code).
  function startsCode(body, w) {
    for (let i = body.indexOf(w); i >= 0; i = body.indexOf(w, i + 1)) {
      if (i && /[\p{L}\p{N}_@]/u.test(body[i - 1])) continue;
      const rest = body.slice(i + w.length, i + w.length + 5);
      if (!/^[\p{Lu}\p{N}]/u.test(rest) && !/^file(?![\p{L}\p{N}_])/u.test(rest)) continue;
      let j = i + w.length;
      while (j < body.length && /[\p{L}\p{N}_.-]/u.test(body[j])) j++;
      if (body[j] !== '@') return true;  // an address's (Fenna2000@) names no code
    }
    return false;
  }
  function writtenAsNames(names, scored) {
    if (!texts) return names;
    const body = scored.map((h) => texts.get(docs[h.d].id) || '').join('\n');
    const count = (re) => (body.match(re) || []).length;
    return names.filter((n) => {
      const lower = count(new RegExp(`(?<![\\p{L}\\p{N}_@])${escape(n)}(?![\\p{L}\\p{N}_])`, 'gu'));
      const title = count(new RegExp(`(?<![\\p{L}\\p{N}_])${escape(upper(n))}(?![\\p{L}\\p{N}_])`, 'gu'));
      return (lower < title || !lower) && !startsCode(body, upper(n));
    });
  }
  // retriever.py _named_first: the hits of the projects that say a name the question says
  // come first, each group in its order (within one project, the sessions that say it lead
  // by named_session_penalty); a hit that says the name itself too. No change when none or
  // every one of them says it.
  function namedFirst(query, scored) {
    if (scored.length < 2) return scored;
    const names = writtenAsNames(namesIn(query), scored);
    if (!names.length) return scored;
    let key = 'p';
    let keys = new Set(scored.map((h) => docs[h.d].p).filter((v) => v !== undefined));
    if (keys.size < 2) {
      key = 'z';
      keys = new Set(scored.map((h) => docs[h.d].z).filter((v) => v !== undefined));
      if (keys.size < 2) return scored;
    }
    const named = new Set(), said = [];
    for (const name of names) {
      said.push(new RegExp(`(?<![\\p{L}\\p{N}_])${escape(name)}(?![\\p{L}\\p{N}_])`, 'iu'));
      const t = stemmed(fold(name));
      if (t < 0) continue;
      const found = new Set(post[t].map(([d]) => docs[d][key]).filter((v) => keys.has(v)));
      if (found.size < keys.size) for (const v of found) named.add(v);
    }
    if (!named.size) return scored;
    const own = (h) => named.has(docs[h.d][key]) || said.some((re) => re.test((texts && texts.get(docs[h.d].id)) || ''));
    const first = [], rest = [];
    for (const h of scored) (own(h) ? first : rest).push(h);
    const out = [...first, ...rest];
    if (key === 'z') {  // one project's sessions: the others lose ground, not their place
      for (const h of rest) h.score = Math.round((h.score - cfg.named_session_penalty) * 10000) / 10000;
      return out.sort((a, b) => b.score - a.score);
    }
    for (let i = 1; i < out.length; i++) out[i].score = Math.min(out[i].score, out[i - 1].score);
    return out;
  }

  return function search(query, limit) {
    limit = limit || 50;
    query = String(query || '').slice(0, cfg.max_chars || 4000);  // the live search's bound
    const words = contentWords(query);
    if (!words.length) return [];
    const groups = words.map(group);
    // search/compounds.py: a hyphenated word no memory holds as written
    // stands for its parts of 3+ letters.
    for (const g of groups) {
      if (!g.word.includes('-') || g.alts.length > 1 || candidates([g]).size) continue;
      const parts = [...new Set(g.word.split('-'))].filter((p) => p.length > 2);
      const alts = parts.map((p) => stemmed(fold(p))).filter((t) => t >= 0).map((t) => [t]);
      if (alts.length) { g.alts = alts; g.said = [g.word, ...parts]; g.own = true; }
    }
    // search/compounds.py: a compound held as written whose parts are held apart, in one
    // memory, at least apart_ratio times as often (and rarely) counts as said by them too
    const most = Math.min(Math.floor(cfg.apart_share * N), cfg.apart_max);
    for (const g of groups) {
      if (!g.word.includes('-') || g.alts.length !== 1 || g.alts[0].length < 2) continue;
      const parts = [...new Set(g.word.split('-'))].filter((p) => p.length > 2).map((p) => stemmed(fold(p)));
      if (parts.length < 2 || parts.some((t) => t < 0)) continue;
      const whole = candidates([g]).size, apart = holdingAll(parts).length;
      if (whole > 0 && cfg.apart_ratio * whole <= apart && apart <= most) g.apart = parts;
    }
    for (const g of groups) if (!g.own) for (const [w, t] of corrections(fold(g.word))) if (looksLikeTypo(fold(g.word), w)) { g.alts.push([t]); g.said.push(w); }
    let hits = keywordHits(groups);
    if (hits.length < 1) {  // nothing: the close spellings of the known words too, any of them
      for (const g of groups) for (const [, t] of corrections(fold(g.word))) if (!g.alts.some((a) => a[0] === t)) g.alts.push([t]);
      const pool = [...candidates(groups)];
      const all = phrasesOf(groups, true);
      hits = pool.map((d) => [d, bm25(d, all)]).sort((a, b) => b[1] - a[1]).map((x) => x[0]).slice(0, POOL);
    }
    const who = authorsNamed(words);
    if (who.authors.size) hits = authorExtras(groups, who.authors, hits);
    const first = (query.toLowerCase().match(WORD) || [])[0];
    const when = first === 'when' || WHEN.test(query);
    // a "how many / which port" question (text/query.py QUANTITY_SOURCE); a text that says
    // the time or the number asked for gains answer_kind_boost (text/answer_kinds.py)
    const quantity = cfg.quantity ? new RegExp(cfg.quantity, 'i').test(query) : false;
    const k = cfg.rrf_k, blend = cfg.blend;
    const scored = hits.map((d, i) => {
      const norm = (1 / (k + i + 1)) / (1 / (k + 1));
      const says = (when && docs[d].ts) || (quantity && docs[d].tn);
      const score = norm * (1 - blend) + docs[d].s * blend + (when && docs[d].h ? cfg.when_boost : 0) +
        (says ? cfg.answer_kind_boost : 0) + authorBoost(d, who);
      return {d, id: docs[d].id, score: Math.round(score * 10000) / 10000, rank: i};
    }).sort((a, b) => b.score - a.score || a.rank - b.rank);
    // retriever.py _distinct: each text once, and each exchange once, where it ranks best
    const shown = new Set();
    const once = namedFirst(query, strayDemoted(groups, scored)).filter((h) => {
      const key = docs[h.d].u === undefined ? h.d : docs[h.d].u;
      const ex = docs[h.d].x === undefined ? key : 'x' + docs[h.d].x;
      if (shown.has(key) || shown.has(ex)) return false;
      shown.add(key);
      shown.add(ex);
      return true;
    });
    return once.slice(0, limit).map(({id, score}) => ({id, score}));
  };
}
// What search/matching.py reads of a memory (terms_held, evidence_scorer).
const memoryText = (m) => `${m.content || ''} ${m.summary || ''} ${(m.tags || []).join(' ')}`;
let reportSearch;  // made on the first search (the page's data is read by viewer.js)
// The memories of the report that answer ``query``, best first, each with its score;
// ``keep``: the page's project and type filter. null when the page has no index.
function reportHits(query, memories, keep) {
  if (reportSearch === undefined) {
    const node = document.getElementById('llmem-search');
    reportSearch = node ? makeReportSearch(JSON.parse(node.textContent),
      new Map(memories.map((m) => [m.id, memoryText(m)]))) : null;
  }
  if (!reportSearch) return null;
  const byId = new Map(memories.map((m) => [m.id, m]));
  return reportSearch(query, 100).filter((h) => byId.has(h.id) && keep(byId.get(h.id)))
    .slice(0, 50).map((h) => Object.assign({}, byId.get(h.id), {score: h.score}));
}
