// The viewer's script (llmem_hooks/viewer_page.py inlines it into the page).
// Data is shown with textContent only: memories hold untrusted text.
'use strict';
const D = JSON.parse(document.getElementById('llmem-data').textContent);
const LIVE = D.mode === 'live';
// The server's session cookie (HttpOnly) carries the login: the token leaves the address bar.
if (LIVE && location.search) history.replaceState(null, '', location.pathname);
const S = {tab: 'memories', project: undefined, type: undefined, shown: D.overview.memories,
           query: '', selected: null, note: '', open: new Set(), view: 0};
// Episodes (what was said) have their own tab; the default list holds durable memories.
const EPISODE = D.overview.episode_type || 'conversation';
const pool = () => (S.tab === 'conversations' ? D.overview.conversations || [] : D.overview.memories);
const $ = (id) => document.getElementById(id);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'on') { for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f); }
    else if (k === 'cls') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined)
    e.appendChild(typeof k === 'string' || typeof k === 'number' ? document.createTextNode(String(k)) : k);
  return e;
}
async function api(path, body) {
  const opts = {headers: {}, cache: 'no-store', credentials: 'same-origin'};
  if (body !== undefined) {
    opts.method = 'POST';
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const out = await r.json();
  if (!r.ok) throw new Error(out.error || ('HTTP ' + r.status));
  return out;
}
function setNote(text, isError) {
  S.note = text; const n = $('note'); n.textContent = text; n.className = isError ? 'error' : 'note';
}
// Times in the browser's local time to the minute, with "3 days ago" within a month; the
// exact stored ISO UTC value stays in the title (hover). Numbers to at most 2 decimals.
const pad = (n) => String(n).padStart(2, '0');
function ago(d) {
  const s = (Date.now() - d.getTime()) / 1000, a = Math.abs(s);
  if (a < 60) return 'just now';
  for (const [u, n] of [['day', 86400], ['hour', 3600], ['minute', 60]]) {
    if (a < n) continue;
    const k = Math.floor(a / n);
    if (u === 'day' && k > 30) return '';
    const t = `${k} ${u}${k === 1 ? '' : 's'}`;
    return s < 0 ? 'in ' + t : t + ' ago';
  }
  return '';
}
function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d.getTime())) return String(iso);
  const t = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  const r = ago(d);
  return r ? `${t} (${r})` : t;
}
function num(x) { return typeof x === 'number' ? String(Math.round(x * 100) / 100) : x; }
// A project as people know it (the server's project_name: owner/repo or a folder's name).
function proj(p, name) { return p === null ? '(global)' : (name || p); }
function inScope(m) {
  return (S.project === undefined || m.project === S.project) && (S.type === undefined || m.type === S.type);
}
function card(m) {
  const c = el('div', {cls: 'card memory' + (S.selected === m.id ? ' sel' : ''), 'data-id': m.id,
                       on: {click: () => select(m.id)}},
    el('div', {cls: 'head'}, el('span', {cls: 'badge'}, m.type),
       m.shared ? el('span', {cls: 'badge shared', title: 'shared with the team'}, 'shared') : null,
       m.stale_reason ? el('span', {cls: 'badge stale', title: 'its cited code changed: review it in the Stale tab'}, 'stale') : null,
       el('span', {cls: 'proj', title: m.project || ''}, proj(m.project, m.project_name)),
       el('span', {cls: 'when', title: m.created_at || ''}, when(m.created_at)),
       el('span', {}, 'by ' + (m.entered_by || '?')),
       m.score !== undefined ? el('span', {}, 'score ' + m.score) : null,
       el('span', {}, m.id.slice(0, 8))),
    m.stale_reason ? el('div', {cls: 'stale-reason'}, '[stale: ' + m.stale_reason + ']') : null,
    el('div', {cls: 'text clamp'}, m.passage || m.content));
  if (m.tags && m.tags.length) c.appendChild(el('div', {cls: 'tags'}, m.tags.map((t) => '#' + t).join(' ')));
  return c;
}
// A long card shows its first lines; "more" opens it, "less" closes it (the list must be on
// the page to measure). A short card gets no control.
function clampCards(list) {
  for (const t of list.querySelectorAll('.memory > .text.clamp')) {
    if (t.scrollHeight <= t.clientHeight + 1) { t.classList.remove('clamp'); continue; }
    const id = t.parentNode.getAttribute('data-id');
    const b = el('button', {cls: 'more'});
    const show = (open) => { t.classList.toggle('clamp', !open); b.textContent = open ? 'less' : 'more'; };
    b.addEventListener('click', (e) => {
      e.stopPropagation();
      if (S.open.has(id)) S.open.delete(id); else S.open.add(id);
      show(S.open.has(id));
    });
    t.after(b); show(S.open.has(id));
  }
}
// Another tab, project or type: the open memory (with its edit or forget panel and what
// was typed there, unsent) and the last status note stay behind, never shown next to a
// list they do not belong to; an answer that arrives after the switch opens nothing.
function switchTo(change) {
  Object.assign(S, change, {selected: null, note: '', view: S.view + 1});
  $('detail').replaceChildren();
  refreshList();
}
function sidebar() {
  const a = $('side'); a.replaceChildren();
  const by = new Map(), conv = S.tab === 'conversations';
  const counts = D.overview.counts.filter((c) => (c.type === EPISODE) === conv);
  for (const c of counts) {
    const k = proj(c.project, c.name);
    if (!by.has(k)) by.set(k, {project: c.project, total: 0, types: []});
    const g = by.get(k); g.total += c.count; g.types.push(c);
  }
  const ul = el('ul', {id: 'projects'});
  ul.appendChild(el('li', {cls: S.project === undefined ? 'on' : '',
    on: {click: () => switchTo({project: undefined, type: undefined})}},
    el('span', {}, 'all projects'), el('span', {cls: 'count'}, counts.reduce((n, c) => n + c.count, 0))));
  for (const [name, g] of by) {
    ul.appendChild(el('li', {cls: S.project === g.project && S.type === undefined ? 'on' : '',
      'data-project': name, on: {click: () => switchTo({project: g.project, type: undefined})}},
      el('span', {cls: 'name', title: g.project === null ? name : name + ' · ' + g.project}, name),
      el('span', {cls: 'count'}, g.total)));
    if (!conv) for (const t of g.types) ul.appendChild(el('li', {cls: 'type' + (S.project === g.project && S.type === t.type ? ' on' : ''),
      on: {click: () => switchTo({project: g.project, type: t.type})}},
      el('span', {}, t.type), el('span', {}, t.count)));
  }
  a.append(el('h2', {}, conv ? 'Conversations by project' : 'Projects and types'), ul);
  const t = D.overview.totals, episodes = t.conversations || 0;
  a.append(el('p', {cls: 'note', id: 'totals'}, `${t.active} live (${t.active - episodes} memories, ${episodes} conversation episodes), ` +
    `${t.forgotten} forgotten, ${t.expired} expired, ${t.inbox} in the inbox; the newest ` +
    `${conv ? t.conversations_listed || 0 : t.listed} listed here (search reaches all).`));
  const tm = D.overview.team;
  if (tm && tm.projects) a.append(el('p', {cls: 'note', id: 'team'}, `Team: ${tm.projects} project(s) synced, ` +
    `${tm.shared} shared, ${tm.outbox} waiting to go; last pull ${tm.last_pull ? when(tm.last_pull) : 'never'}` +
    (tm.last_error ? `; last error: ${tm.last_error}` : '') + '.'));
}
async function refreshList() {
  if (S.query) return search();
  S.shown = pool().filter(inScope);
  render();
}
async function search() {
  S.query = $('q').value.trim();
  if (!S.query) { S.shown = pool().filter(inScope); render(); return; }
  if (LIVE) {
    const p = new URLSearchParams({q: S.query});
    if (S.project !== undefined && S.project !== null) p.set('project', S.project);
    if (S.type !== undefined) p.set('type', S.type);
    p.set('kind', S.tab === 'conversations' ? 'conversations' : 'memories');
    const view = S.view;
    try {
      const out = await api('/api/search?' + p.toString());
      if (view !== S.view) return;  // the hits of a view left meanwhile
      S.shown = out.hits.filter(inScope);
      setNote(`${S.shown.length} found (${out.mode})`);
    } catch (e) { if (view !== S.view) return; setNote(e.message, true); S.shown = []; }
  } else {
    const all = D.overview.memories.concat(D.overview.conversations || [], D.overview.searchable || []);
    const inTab = (m) => inScope(m) && (m.type === 'conversation') === (S.tab === 'conversations');
    const hits = typeof reportHits === 'function' ? reportHits(S.query, all, inTab) : null;
    if (hits) { S.shown = hits; setNote(`${hits.length} found (in this report)`); render(); return; }
    const words = S.query.toLowerCase().split(/\s+/);
    S.shown = pool().filter((m) => {
      const hay = [m.content, m.summary || '', m.type, proj(m.project, m.project_name), (m.tags || []).join(' ')].join(' ').toLowerCase();
      return inScope(m) && words.every((w) => hay.includes(w));
    });
    setNote(`${S.shown.length} found (words in this report)`);
  }
  render();
}
async function select(id) {
  S.selected = id;
  let info;
  if (LIVE) {
    const view = S.view;
    try { info = await api('/api/memory?id=' + encodeURIComponent(id)); }
    catch (e) { if (view === S.view) setNote(e.message, true); return; }
    if (view !== S.view || S.selected !== id) return;
  } else {
    const m = D.overview.memories.concat(D.overview.conversations || [], D.overview.forgotten, D.overview.stale || [], D.overview.searchable || []).find((x) => x.id === id);
    info = {memory: m, provenance: D.overview.provenance[id]};
  }
  render(); detail(info);
}
function detail(info) {
  const box = $('detail'); box.replaceChildren();
  if (!info) return;
  const m = info.memory, p = info.provenance || {};
  const dl = el('dl', {});
  const add = (k, v) => { if (v !== null && v !== undefined && v !== '') dl.append(el('dt', {}, k), el('dd', {}, String(v))); };
  add('id', m.id); add('type', m.type); add('project', m.project !== null && m.project_name && m.project_name !== m.project ? `${m.project_name} (${m.project})` : proj(m.project)); add('created', when(m.created_at));
  add('updated', when(m.updated_at)); add('entered by', p.entered_by); add('source', p.source);
  add('session', p.session_id); add('session agent', p.session_agent); add('session title', p.session_title);
  add('messages', (p.source_message_ids || []).join(', ')); add('confidence', num(m.confidence));
  add('expires', when(m.expires_at)); add('forgotten', when(m.valid_until));
  add('shared', m.shared ? 'with the team (docs/team.md)' : null);
  add('why forgotten', m.invalidation_reason);
  for (const r of p.relations || []) add(r.relation_type, `${r.source_id.slice(0, 8)} -> ${r.target_id.slice(0, 8)}`);
  add('citations', p.citation_state);
  for (const c of p.citations || []) add(c.spec, c.status + (c.reason ? ` (${c.reason})` : '') + (c.changed_by ? `, changed in ${c.changed_by.slice(0, 10)}` : ''));
  const panel = el('div', {cls: 'panel', id: 'detail-panel', 'data-id': m.id},
    el('h2', {}, 'Memory'), el('div', {cls: 'text', id: 'detail-content'}, m.content), dl);
  if (p.episode) panel.append(el('h2', {}, 'Learned in this episode'),
    el('div', {cls: 'episode', id: 'episode'}, p.episode.content));
  if (LIVE && p.citation_state === 'stale' && !m.valid_until) panel.append(review(m, p));
  if (LIVE) panel.append(actions(m));
  box.appendChild(panel);
}
function actions(m) {
  const row = el('div', {cls: 'row'});
  if (m.valid_until) {
    row.append(el('button', {cls: 'act primary', id: 'restore', on: {click: () => mutate('/api/restore', {id: m.id}, 'restored')}}, 'Restore'));
    return row;
  }
  const edit = el('button', {cls: 'act', id: 'edit', on: {click: () => {
    const ta = el('textarea', {id: 'edit-content'}); ta.value = m.content;
    const ty = el('select', {id: 'edit-type'});
    for (const t of D.overview.types) { const o = el('option', {value: t}, t); if (t === m.type) o.selected = true; ty.append(o); }
    const tg = el('input', {id: 'edit-tags', value: (m.tags || []).join(', ')});
    row.replaceChildren(ta, ty, tg, el('button', {cls: 'act primary', id: 'save', on: {click: () =>
      mutate('/api/edit', {id: m.id, content: ta.value, type: ty.value, tags: tg.value}, 'saved')}}, 'Save'));
  }}}, 'Edit');
  const forget = el('button', {cls: 'act danger', id: 'forget', on: {click: () => {
    const why = el('input', {id: 'forget-reason', placeholder: 'why it no longer holds (optional)'});
    row.replaceChildren(why, el('button', {cls: 'act danger', id: 'forget-confirm', on: {click: () =>
      mutate('/api/forget', {id: m.id, reason: why.value || null}, 'forgotten')}}, 'Forget it'));
  }}}, 'Forget');
  row.append(edit, forget);
  return row;
}
// A stale memory (its cited code changed): the person says it still holds (its citations
// read again from the working tree), points its citation at where the code is now, or
// forgets it (the Forget button below).
function review(m, p) {
  const row = el('div', {cls: 'row', id: 'review'});
  const stale = (p.citations || []).filter((c) => c.status === 'stale');
  const keep = el('button', {cls: 'act primary', id: 'confirm', on: {click: () =>
    mutate('/api/confirm', {id: m.id}, (r) => 'confirmed' + (r.dropped && r.dropped.length ? ` (dropped ${r.dropped.join(', ')}: file gone)` : ''))}}, 'Still holds');
  const fix = el('button', {cls: 'act', id: 'fix', on: {click: () => {
    const spec = el('input', {id: 'fix-spec', placeholder: 'path:12-30 where the code is now'});
    if (stale.length) spec.value = stale[0].spec;
    row.replaceChildren(spec, el('button', {cls: 'act primary', id: 'fix-save', on: {click: () =>
      mutate('/api/fix-citation', {id: m.id, spec: spec.value, replace: stale.length === 1 ? stale[0].spec : null}, 'citation fixed')}}, 'Save citation'));
  }}}, 'Fix citation');
  row.append(el('span', {cls: 'note'}, 'Its cited code changed:'), keep, fix);
  return row;
}
async function mutate(path, body, done) {
  const view = S.view;
  try {
    const info = await api(path, body);
    D.overview = await api('/api/overview');
    if (view !== S.view) { refreshList(); return; }  // done, but shown in another view
    if (S.query) await search(); else S.shown = pool().filter(inScope);
    S.note = `${typeof done === 'function' ? done(info) : done}: ${info.memory.id.slice(0, 8)}`;
    render(); detail(info);
  } catch (e) { if (view === S.view) setNote(e.message, true); }
}
function memoriesTab(c) {
  const conv = S.tab === 'conversations';
  const q = el('input', {id: 'q', type: 'search', placeholder: conv ? 'search conversations' : 'search memories'});
  q.value = S.query;
  q.addEventListener('keydown', (e) => { if (e.key === 'Enter') search(); });
  c.append(el('div', {cls: 'bar'}, q, el('button', {cls: 'act primary', id: 'search-btn', on: {click: search}}, 'Search')),
    el('div', {id: 'note', cls: 'note'}, S.note));
  const list = el('div', {id: 'list'});
  for (const m of S.shown) list.appendChild(card(m));
  if (!S.shown.length) list.appendChild(el('p', {cls: 'note'}, conv ? 'No conversations here.' : 'No memories here.'));
  c.appendChild(list); clampCards(list);
}
function forgottenTab(c) {
  c.append(el('h2', {}, 'Forgotten memories'), el('div', {id: 'note', cls: 'note'}, S.note));
  const list = el('div', {id: 'forgotten-list'});
  for (const m of D.overview.forgotten) list.appendChild(card(m));
  if (!D.overview.forgotten.length) list.appendChild(el('p', {cls: 'note'}, 'Nothing forgotten.'));
  c.appendChild(list); clampCards(list);
}
function staleTab(c) {
  c.append(el('h2', {}, 'Stale memories (the code they cite changed): confirm, fix the citation, or forget'),
    el('div', {id: 'note', cls: 'note'}, S.note));
  const list = el('div', {id: 'stale-list'}), all = D.overview.stale || [];
  for (const m of all) if (inScope(m)) list.appendChild(card(m));
  if (!list.children.length) list.appendChild(el('p', {cls: 'note'}, 'No stale memories.'));
  c.appendChild(list); clampCards(list);
}
function inboxTab(c) {
  c.append(el('h2', {}, 'Inbox (candidates and notes waiting to become memories)'));
  const t = el('table', {id: 'inbox'}, el('tr', {}, el('th', {}, 'score'), el('th', {}, 'source'), el('th', {}, 'added'), el('th', {}, 'note')));
  for (const i of D.overview.inbox) t.append(el('tr', {}, el('td', {}, num(i.attention_score)), el('td', {}, i.source), el('td', {title: i.created_at}, when(i.created_at)), el('td', {cls: 'text'}, i.content)));
  c.append(D.overview.inbox.length ? t : el('p', {cls: 'note'}, 'The inbox is empty.'));
}
function usageTab(c) {
  const u = D.overview.usage, today = u.today, caps = u.caps;
  const row = (k, used, cap) => el('tr', {}, el('td', {}, k), el('td', {}, used), el('td', {}, cap),
    el('td', {}, el('meter', {min: 0, max: cap || 1, value: Math.min(used, cap || 1)})));
  c.append(el('h2', {}, `Model usage on ${u.day} (UTC) against the budget`),
    el('table', {id: 'usage'}, el('tr', {}, el('th', {}, ''), el('th', {}, 'used'), el('th', {}, 'cap'), el('th', {}, '')),
      row('tokens today', today.tokens, caps.day_tokens), row('seconds today', today.seconds, caps.day_seconds)),
    el('p', {cls: 'note'}, `${today.calls} calls by ${u.sessions_today} sessions today; per session at most ` +
      `${caps.session_tokens} tokens and ${caps.session_seconds} s. Left today: ${u.day_tokens_left} tokens, ${u.day_seconds_left} s.`));
}
function dreamTab(c) {
  c.append(el('h2', {}, 'The latest dream report'));
  if (!D.overview.dream.exists) { c.append(el('p', {cls: 'note'}, 'No dream report yet (llmem-hooks dream writes one).')); return; }
  const f = el('iframe', {id: 'dream', sandbox: '', title: 'dream report'});
  if (LIVE) f.src = '/dream-report';
  else f.srcdoc = D.dream_html || '';
  c.append(f);
}
const TABS = {memories: ['Memories', memoriesTab], conversations: ['Conversations', memoriesTab], forgotten: ['Forgotten', forgottenTab], stale: ['Stale', staleTab], inbox: ['Inbox', inboxTab],
              usage: ['Model usage', usageTab], dream: ['Dream report', dreamTab]};
function render() {
  const nav = $('tabs'); nav.replaceChildren();
  for (const [k, [label]] of Object.entries(TABS))
    nav.append(el('button', {id: 'tab-' + k, cls: S.tab === k ? 'on' : '', on: {click: () =>
      switchTo({tab: k, query: '', type: k === 'conversations' ? undefined : S.type})}}, label));
  sidebar();
  const c = $('content'); c.replaceChildren();
  TABS[S.tab][1](c);
  if (!['memories', 'conversations', 'forgotten', 'stale'].includes(S.tab)) $('detail').replaceChildren();
}
$('generated').textContent = (LIVE ? 'live, ' : 'report, ') + when(D.overview.generated_at) + ' - ' + D.overview.db_path;
render();
