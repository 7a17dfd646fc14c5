// fmnode status page: polls the agent's /v1/admin/dashboard at most once
// a second and draws it. Plain DOM, no framework, no external asset; every
// text from the cluster goes in through textContent (reasons are operator
// text).
'use strict';
(() => {
  const API = '../v1/admin/';
  const POLL_MS = 1000; // at most one dashboard request a second
  const FLAG = { switchover: 1, paused: 2, proposing: 4, down: 8 };
  const TOKEN_KEY = 'fmnode-admin-token';

  // ui is the page's state; tests read updates, ok, error and cells.
  const ui = {
    updates: 0, ok: false, error: '', lastOK: 0,
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    cells: [], keys: [], n: 0, regions: [], selected: 0,
  };
  window.fmnodeUI = ui;

  const $ = (id) => document.getElementById(id);

  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const k of kids) {
      if (k !== null && k !== undefined) e.append(k);
    }
    return e;
  }

  function row(...cells) {
    return el('tr', null, ...cells.map((c) => (c instanceof Node ? el('td', null, c) : el('td', { text: String(c ?? '') }))));
  }

  function fill(tbody, rows, empty, cols) {
    tbody.replaceChildren(...(rows.length ? rows : [el('tr', null, el('td', { colspan: String(cols), class: 'muted', text: empty }))]));
  }

  function when(iso) {
    if (!iso) return '';
    const t = new Date(iso);
    return isNaN(t) ? iso : t.toLocaleTimeString([], { hour12: false }) + '.' + String(t.getMilliseconds()).padStart(3, '0');
  }

  // age is how long before the answer's instant (the agent's clock, not
  // the browser's: they may differ) iso was.
  function age(iso, nowIso) {
    if (!iso) return '';
    const s = (new Date(nowIso).getTime() - new Date(iso).getTime()) / 1000;
    return isNaN(s) ? '' : (s < 0 ? 'in ' + (-s).toFixed(1) : s.toFixed(1) + ' s ago');
  }

  async function getJSON(path) {
    const headers = { Accept: 'application/json' };
    if (ui.token) headers.Authorization = 'Bearer ' + ui.token;
    const r = await fetch(API + path, { headers, cache: 'no-store', credentials: 'same-origin' });
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON: the status says it */ }
    if (!r.ok) {
      const err = new Error((body && body.error) || (r.status + ' ' + r.statusText));
      err.status = r.status;
      throw err;
    }
    return body;
  }

  function setConn(ok, msg) {
    const c = $('conn');
    ui.ok = ok;
    ui.error = msg || '';
    if (ok) {
      ui.lastOK = Date.now();
      c.className = 'conn live';
      c.textContent = 'live · ' + new Date().toLocaleTimeString([], { hour12: false });
    } else {
      c.className = 'conn stale';
      const since = ui.lastOK ? ' (last update ' + ((Date.now() - ui.lastOK) / 1000).toFixed(0) + ' s ago)' : '';
      c.textContent = 'not updating: ' + msg + since;
    }
  }

  async function poll() {
    const started = performance.now();
    try {
      const d = await getJSON('dashboard');
      render(d);
      $('auth').hidden = true;
      setConn(true, '');
    } catch (e) {
      if (e.status === 401 || e.status === 403) {
        $('auth').hidden = false;
        $('autherr').textContent = e.message;
      }
      setConn(false, e.message);
    }
    setTimeout(poll, Math.max(0, POLL_MS - (performance.now() - started)));
  }

  // --- rendering ---

  function render(d) {
    $('cluster').textContent = d.cluster;
    $('meta').textContent = 'answered by ' + d.answered_by + ' · spec version ' + d.spec_version + ' · ' + d.partitions + ' partitions';
    const pause = $('pause');
    pause.hidden = !d.global_pause;
    pause.textContent = d.global_pause ? 'Automatic failover is paused cluster-wide: ' + (d.global_pause_reason || '(no reason given)') : '';
    ui.regions = d.regions.map((r) => r.name);
    renderRegions(d);
    renderLegend(d);
    renderGrid(d);
    renderProgress(d);
    renderTransitions(d);
    ui.updates++;
  }

  function nodeState(n) {
    if (!n.reached) return { text: 'unreached', cls: 'st-unreached' };
    return { text: n.failover, cls: 'st-' + n.failover };
  }

  function renderRegions(d) {
    const byName = new Map(d.nodes.map((n) => [n.name, n]));
    const cards = d.regions.map((r, i) => {
      const title = el('h3', null, el('span', { class: 'swatch r' + (i % 16) }), r.name,
        r.preferred ? el('span', { class: 'badge', text: 'preferred' }) : null,
        r.never_promote ? el('span', { class: 'badge', text: 'never promote' }) : null,
        el('span', { class: 'badge', text: r.writes + ' write partitions' }));
      const rows = r.nodes.map((name) => {
        const n = byName.get(name) || { name, reached: false, failover: 'unknown', membership: 'unknown' };
        const st = nodeState(n);
        let lease = '';
        if (n.lease) {
          // Against the answer's instant: the agents' clocks, not the browser's.
          const left = (new Date(n.lease.until).getTime() - new Date(d.at).getTime()) / 1000;
          lease = n.lease.valid ? 'valid (' + Math.max(0, left).toFixed(1) + ' s left)' : 'expired';
        }
        const tr = row(n.name, el('span', { class: st.cls, text: st.text }),
          el('span', { class: 'st-' + n.membership, text: n.membership }), lease, n.error || (n.global_pause ? 'paused: ' + n.global_pause_reason : ''));
        tr.dataset.node = n.name;
        tr.dataset.state = st.text;
        return tr;
      });
      const table = el('table', null, el('thead', null, el('tr', null, ...['node', 'failover view', 'membership', 'lease', ''].map((h) => el('th', { text: h })))),
        el('tbody', null, ...rows));
      const card = el('div', { class: 'region' }, title, table);
      card.dataset.region = r.name;
      return card;
    });
    $('regions').replaceChildren(...cards);
  }

  function renderLegend(d) {
    const keys = d.regions.map((r, i) => {
      const k = el('span', { class: 'key' }, el('span', { class: 'swatch r' + (i % 16) }), r.name + ' (' + r.writes + ')');
      k.dataset.region = r.name;
      return k;
    });
    const unknown = d.write.filter((w) => w < 0).length;
    if (unknown) keys.push(el('span', { class: 'key' }, el('span', { class: 'swatch rx' }), 'not reported (' + unknown + ')'));
    keys.push(el('span', { class: 'key' }, el('span', { class: 'swatch sw' }), 'switchover'));
    keys.push(el('span', { class: 'key' }, el('span', { class: 'swatch down' }), 'write region down'));
    keys.push(el('span', { class: 'key' }, el('span', { class: 'swatch paused' }), 'paused'));
    $('legend').replaceChildren(...keys);
    $('pcount').textContent = '(' + d.partitions + ', coloured by write region)';
  }

  function buildGrid(n) {
    const grid = $('grid');
    const frag = document.createDocumentFragment();
    ui.cells = [];
    ui.keys = [];
    for (let p = 1; p <= n; p++) {
      const c = document.createElement('div');
      c.className = 'cell rx';
      c.dataset.p = String(p);
      frag.append(c);
      ui.cells.push(c);
      ui.keys.push('');
    }
    grid.replaceChildren(frag);
    grid.className = n > 6000 ? 'tiny' : n > 2500 ? 'small' : '';
    ui.n = n;
  }

  function renderGrid(d) {
    if (ui.n !== d.partitions) buildGrid(d.partitions);
    for (let i = 0; i < d.partitions; i++) {
      const w = d.write[i];
      const f = d.flags[i];
      const key = w + '/' + f + '/' + d.epoch[i];
      if (ui.keys[i] === key) continue; // only what changed is touched
      ui.keys[i] = key;
      const c = ui.cells[i];
      const region = w >= 0 ? d.regions[w].name : '';
      let cls = 'cell ' + (w >= 0 ? 'r' + (w % 16) : 'rx');
      const notes = [];
      if (f & FLAG.switchover) { cls += ' sw'; notes.push('switchover in progress'); }
      if (f & FLAG.down) { cls += ' down'; notes.push('write region down'); }
      if (f & FLAG.paused) { cls += ' paused'; notes.push('paused'); }
      if (f & FLAG.proposing) { cls += ' prop'; notes.push('proposal in flight'); }
      if (ui.selected === i + 1) cls += ' sel';
      c.className = cls;
      c.dataset.region = region;
      c.title = 'partition ' + (i + 1) + ': ' + (region || 'not reported') + ', epoch ' + d.epoch[i] + (notes.length ? ' (' + notes.join(', ') + ')' : '');
    }
  }

  function renderProgress(d) {
    $('pgcount').textContent = d.in_progress_total ? '(' + d.in_progress_total + (d.in_progress_total > d.in_progress.length ? ', first ' + d.in_progress.length + ' shown' : '') + ')' : '';
    fill($('progress').tBodies[0], d.in_progress.map((op) => {
      const tr = row(op.partition, op.kind, op.from, op.to || '', op.since ? age(op.since, d.at) : '', op.why);
      tr.dataset.p = String(op.partition);
      return tr;
    }), 'none', 6);
    const drains = (d.drains || []).filter((x) => x.active || x.error);
    $('drains').replaceChildren(...drains.map((x) => el('div', { class: 'banner', text: 'drain of ' + x.region + ' on ' + x.node + ': ' + (x.error || x.remaining + ' partitions left') })));
  }

  function renderTransitions(d) {
    fill($('transitions').tBodies[0], d.transitions.map((t) => {
      const tr = row(when(t.at), t.partition, t.epoch, t.kind, t.from || '', t.to || '', t.who, el('span', { class: 'why', text: t.why }));
      tr.dataset.p = String(t.partition);
      return tr;
    }), 'none yet', 8);
  }

  // --- one partition: fmnode explain and history ---

  async function showDetail(p) {
    if (!(p >= 1 && p <= ui.n)) return;
    if (ui.selected && ui.cells[ui.selected - 1]) ui.cells[ui.selected - 1].classList.remove('sel');
    ui.selected = p;
    ui.cells[p - 1].classList.add('sel');
    $('detail').hidden = false;
    $('dtitle').textContent = 'partition ' + p;
    $('dexplain').textContent = 'loading…';
    try {
      const [ex, hi] = await Promise.all([getJSON('explain?id=' + p), getJSON('history?id=' + p)]);
      let text = 'as ' + ex.answered_by + ' sees it:\n' + ex.text;
      if (ex.blocked_by) text += '\nblocked by policy: ' + ex.blocked_by;
      text += '\nlast decision of the manager: ' + ex.last_decision + (ex.last_blocked_by ? ' (blocked: ' + ex.last_blocked_by + ')' : '');
      $('dexplain').textContent = text;
      const ph = (hi.partitions || [])[0] || { transitions: [] };
      fill($('dhistory').tBodies[0], ph.transitions.slice().reverse().map((t) =>
        row(t.epoch, when(t.at), t.kind, t.from || '', t.to || '', t.who, t.why)), 'no transition recorded', 7);
    } catch (e) {
      $('dexplain').textContent = 'could not explain partition ' + p + ': ' + e.message;
    }
  }

  function init() {
    $('grid').addEventListener('click', (e) => {
      const p = Number(e.target.dataset && e.target.dataset.p);
      if (p) showDetail(p);
    });
    $('find').addEventListener('change', (e) => {
      const p = Number(e.target.value);
      if (p >= 1 && p <= ui.n) {
        ui.cells[p - 1].scrollIntoView({ block: 'center' });
        showDetail(p);
      }
    });
    $('dclose').addEventListener('click', () => {
      $('detail').hidden = true;
      if (ui.selected && ui.cells[ui.selected - 1]) ui.cells[ui.selected - 1].classList.remove('sel');
      ui.selected = 0;
    });
    $('authform').addEventListener('submit', (e) => {
      e.preventDefault();
      ui.token = $('token').value.trim();
      sessionStorage.setItem(TOKEN_KEY, ui.token);
      $('autherr').textContent = '';
    });
    poll();
  }

  init();
})();
