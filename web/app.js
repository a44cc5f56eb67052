// minfer viz: lays out the plan's graph with dagre (vendored), streams a run over server-sent events and
// shows the tensor statistics of the selected node. Talks only to the minfer process that served it.
'use strict';

const OP_COLORS = {
  input: '#cfe3ff', weight: '#e4e4e4', get_rows: '#d6f5e3', rms_norm: '#fff2c4', mul_mat: '#ffd9c2',
  add: '#e8dcff', mul: '#e8dcff', silu: '#d9f1f7', swiglu: '#c9ecf5', reshape: '#f2f2f2', rope: '#f9d8ea',
  kv_store: '#ddd8cc', attention: '#ffc9c9',
};
const SVG = 'http://www.w3.org/2000/svg';
const $ = (id) => document.getElementById(id);

const state = {
  graph: null,          // the /api/graph JSON
  byId: new Map(),      // node id -> node
  expanded: new Set(),  // expanded layers
  selected: null,       // node id
  matches: new Set(),
  times: new Map(),     // node id -> microseconds (latest step)
  view: { x: 20, y: 20, k: 1 },
  running: false,
};

function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function shapeText(shape) { return '[' + shape.filter((d, i) => i === 0 || d !== 1).join(', ') + ']'; }

async function getJson(url) {
  const r = await fetch(url);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error ? body.error.message : r.statusText);
  return body;
}

async function loadInfo() {
  const info = await getJson('/api/info');
  $('model-info').textContent = `${info.arch} · ${info.n_layer} layers · n_embd ${info.n_embd} · vocab ${info.n_vocab} · ` +
    `ctx ${info.n_ctx} · ${info.n_threads} threads · ${info.backends.join(', ')}`;
  $('n-predict').max = info.max_predict;
  state.nLayer = info.n_layer;
}

async function loadGraph() {
  $('graph-status').textContent = 'loading graph…';
  const g = await getJson('/api/graph/' + $('phase').value);
  state.graph = g;
  state.byId = new Map(g.nodes.map((n) => [n.id, n]));
  if (state.expanded.size === 0) state.expanded.add(0);  // the first block open: the rest repeat it
  render();
}

// Which drawn box stands for node n: itself, or its collapsed layer.
function boxOf(n) {
  if (n.layer >= 0 && !state.expanded.has(n.layer)) return 'L' + n.layer;
  return 'n' + n.id;
}

function visible(n) { return !n.dead && (n.op !== 'weight' || $('show-weights').checked); }

function render() {
  const g = state.graph;
  const dg = new dagre.graphlib.Graph({ compound: true, multigraph: false });
  dg.setGraph({ rankdir: 'TB', nodesep: 18, ranksep: 26, marginx: 10, marginy: 10 });
  dg.setDefaultEdgeLabel(() => ({}));
  const layerCount = new Map();
  for (const n of g.nodes) {
    if (!visible(n)) continue;
    const box = boxOf(n);
    if (box[0] === 'L') {
      layerCount.set(n.layer, (layerCount.get(n.layer) || 0) + 1);
      continue;
    }
    const label = `${n.name}`;
    const sub = `${n.op}${n.fused_from ? ' (fused)' : ''} ${shapeText(n.shape)}`;
    const width = Math.max(label.length, sub.length) * 6.8 + 16;
    dg.setNode(box, { kind: 'node', node: n, label, sub, width, height: 34 });
    if (n.layer >= 0) {
      const cluster = 'C' + n.layer;
      if (!dg.hasNode(cluster)) dg.setNode(cluster, { kind: 'cluster', layer: n.layer, label: `layer ${n.layer}` });
      dg.setParent(box, cluster);
    }
  }
  for (const [layer, count] of layerCount) {
    const label = `layer ${layer} (${count} nodes)`;
    dg.setNode('L' + layer, { kind: 'layer', layer, label, sub: 'click to expand', width: label.length * 6.8 + 20, height: 34 });
  }
  for (const e of g.edges) {
    const a = state.byId.get(e.from), b = state.byId.get(e.to);
    if (!visible(a) || !visible(b)) continue;
    const u = boxOf(a), v = boxOf(b);
    if (u !== v && !dg.hasEdge(u, v)) dg.setEdge(u, v);
  }
  dagre.layout(dg);

  const vp = $('viewport');
  vp.replaceChildren();
  const clusters = el('g', {}, vp), edges = el('g', {}, vp), nodes = el('g', {}, vp);
  for (const id of dg.nodes()) {
    const d = dg.node(id);
    if (d.kind !== 'cluster') continue;
    const c = el('g', { class: 'cluster', 'data-layer': d.layer }, clusters);
    el('rect', { x: d.x - d.width / 2, y: d.y - d.height / 2 - 14, width: d.width, height: d.height + 14 }, c);
    const t = el('text', { x: d.x - d.width / 2 + 6, y: d.y - d.height / 2 - 2 }, c);
    t.textContent = `${d.label} ▾ (click to collapse)`;
    t.addEventListener('click', () => { state.expanded.delete(d.layer); render(); });
  }
  for (const e of dg.edges()) {
    const pts = dg.edge(e).points;
    el('path', { class: 'edge', d: 'M' + pts.map((p) => `${p.x},${p.y}`).join('L') }, edges);
  }
  for (const id of dg.nodes()) {
    const d = dg.node(id);
    if (d.kind === 'cluster') continue;
    const n = d.node;
    const cls = ['node'];
    if (d.kind === 'layer') cls.push('layer');
    if (n && n.id === state.selected) cls.push('selected');
    if (n && state.matches.has(n.id)) cls.push('match');
    const gnode = el('g', { class: cls.join(' '), transform: `translate(${d.x - d.width / 2},${d.y - d.height / 2})` }, nodes);
    if (n) {
      gnode.dataset.id = n.id;
      gnode.dataset.name = n.name;
    } else {
      gnode.dataset.layer = d.layer;
    }
    const fill = n ? OP_COLORS[n.op] || '#fff' : '#eef1f8';
    el('rect', { width: d.width, height: d.height, fill, class: 'box' }, gnode);
    const t1 = el('text', { x: 6, y: 14 }, gnode);
    t1.textContent = d.label;
    const t2 = el('text', { x: 6, y: 28 }, gnode);
    t2.textContent = d.sub;
    el('title', {}, gnode).textContent = n ? `${n.name}\nop ${n.op}\nshape ${shapeText(n.shape)}\n${n.dtype} on ${n.backend}` : d.label;
    gnode.addEventListener('click', (ev) => {
      ev.stopPropagation();
      if (n) select(n.id);
      else { state.expanded.add(d.layer); render(); }
    });
  }
  state.layout = dg;
  paintTimes();
  applyView();
  $('graph-status').textContent = `${g.phase} graph: ${g.nodes.filter((n) => !n.dead).length} nodes, ` +
    `${g.n_fused} fused (n_tokens ${g.n_tokens})`;
  document.body.dataset.graphReady = '1';
}

function applyView() {
  const v = state.view;
  $('viewport').setAttribute('transform', `translate(${v.x},${v.y}) scale(${v.k})`);
}

function centerOn(id) {
  const d = state.layout && state.layout.node(id);
  if (!d) return;
  const r = $('svg').getBoundingClientRect();
  state.view.x = r.width / 2 - d.x * state.view.k;
  state.view.y = r.height / 2 - d.y * state.view.k;
  applyView();
}

function setupPanZoom() {
  const svg = $('svg');
  let drag = null;
  svg.addEventListener('mousedown', (e) => { drag = { x: e.clientX, y: e.clientY, vx: state.view.x, vy: state.view.y }; svg.classList.add('dragging'); });
  window.addEventListener('mousemove', (e) => {
    if (!drag) return;
    state.view.x = drag.vx + e.clientX - drag.x;
    state.view.y = drag.vy + e.clientY - drag.y;
    applyView();
  });
  window.addEventListener('mouseup', () => { drag = null; svg.classList.remove('dragging'); });
  svg.addEventListener('wheel', (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect();
    const px = e.clientX - r.left, py = e.clientY - r.top;
    const k = Math.min(4, Math.max(0.1, state.view.k * Math.exp(-e.deltaY * 0.0015)));
    state.view.x = px - (px - state.view.x) * (k / state.view.k);
    state.view.y = py - (py - state.view.y) * (k / state.view.k);
    state.view.k = k;
    applyView();
  }, { passive: false });
}

function search() {
  const q = $('search').value.trim().toLowerCase();
  state.matches = new Set();
  if (q) {
    for (const n of state.graph.nodes) {
      if (visible(n) && n.name.toLowerCase().includes(q)) {
        state.matches.add(n.id);
        if (n.layer >= 0) state.expanded.add(n.layer);
      }
    }
  }
  $('search-result').textContent = q ? `${state.matches.size} match${state.matches.size === 1 ? '' : 'es'}` : '';
  render();
  const first = [...state.matches][0];
  if (first !== undefined) centerOn('n' + first);
}

function select(id) {
  state.selected = id;
  for (const g of document.querySelectorAll('g.node')) g.classList.toggle('selected', Number(g.dataset.id) === id);
  const n = state.byId.get(id);
  $('node-title').textContent = n.name;
  const rows = [['id', n.id], ['op', n.op + (n.fused_from ? ` (fused from ${n.fused_from})` : '')], ['shape', shapeText(n.shape)],
    ['dtype', n.dtype], ['backend', n.backend], ['layer', n.layer < 0 ? '–' : n.layer],
    ['inputs', n.src.map((s) => state.byId.get(s).name).join(', ') || '–']];
  $('node-meta').replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement('tr');
    tr.innerHTML = '<th></th><td></td>';
    tr.children[0].textContent = k;
    tr.children[1].textContent = v;
    return tr;
  }));
  loadStats();
}

async function loadStats() {
  const id = state.selected;
  if (id === null) return;
  const r = await fetch(`/api/nodes/${id}/stats`);
  const body = await r.json();
  if (id !== state.selected) return;
  const box = $('stats');
  if (!r.ok) {
    box.innerHTML = '<p class="none"></p>';
    box.firstChild.textContent = body.error.message;
    clearCanvas($('histogram'));
    clearCanvas($('heatmap'));
    return;
  }
  const s = body.stats;
  const fmt = (v) => (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : v.toFixed(4));
  const rows = [['step', `${body.step} (${body.n_tokens} token${body.n_tokens === 1 ? '' : 's'})`], ['shape', shapeText(body.shape)],
    ['min', fmt(s.min)], ['max', fmt(s.max)], ['mean', fmt(s.mean)], ['std', fmt(s.std)], ['NaN', s.nan], ['Inf', s.inf],
    ['time', `${body.micros.toFixed(1)} µs`]];
  box.innerHTML = '<table></table>';
  for (const [k, v] of rows) {
    const tr = document.createElement('tr');
    tr.className = 'stat-' + k.toLowerCase();
    tr.innerHTML = '<th></th><td></td>';
    tr.children[0].textContent = k;
    tr.children[1].textContent = v;
    box.firstChild.appendChild(tr);
  }
  drawHistogram(body.histogram);
  drawHeatmap(body.heatmap);
}

function clearCanvas(c) { c.getContext('2d').clearRect(0, 0, c.width, c.height); }

function drawHistogram(h) {
  const c = $('histogram'), ctx = c.getContext('2d');
  clearCanvas(c);
  const max = Math.max(1, ...h.counts), w = c.width / h.counts.length;
  ctx.fillStyle = '#4a7bd0';
  h.counts.forEach((n, i) => {
    const bh = (n / max) * (c.height - 14);
    ctx.fillRect(i * w + 1, c.height - 12 - bh, w - 2, bh);
  });
  ctx.fillStyle = '#556';
  ctx.font = '10px monospace';
  ctx.fillText(h.lo.toPrecision(3), 2, c.height - 2);
  const hi = h.hi.toPrecision(3);
  ctx.fillText(hi, c.width - ctx.measureText(hi).width - 2, c.height - 2);
}

// Diverging colours: blue (negative) - white - red (positive), scaled by the largest |value|.
function drawHeatmap(h) {
  const c = $('heatmap'), ctx = c.getContext('2d');
  clearCanvas(c);
  let amax = 0;
  for (const v of h.cells) if (v !== null) amax = Math.max(amax, Math.abs(v));
  const cw = c.width / h.cols, ch = (c.height - 12) / h.rows;
  h.cells.forEach((v, i) => {
    const r = Math.floor(i / h.cols), col = i % h.cols;
    if (v === null) ctx.fillStyle = '#000';
    else {
      const t = amax > 0 ? v / amax : 0, a = Math.round(255 * (1 - Math.abs(t)));
      ctx.fillStyle = t >= 0 ? `rgb(255,${a},${a})` : `rgb(${a},${a},255)`;
    }
    ctx.fillRect(col * cw, r * ch, Math.ceil(cw), Math.ceil(ch));
  });
  ctx.fillStyle = '#556';
  ctx.font = '10px monospace';
  ctx.fillText(`${h.src_rows}×${h.src_cols} → ${h.rows}×${h.cols} cells, |max| ${amax.toPrecision(3)}`, 2, c.height - 2);
}

function paintTimes() {
  if (!state.times.size) return;
  const max = Math.max(...state.times.values());
  for (const g of document.querySelectorAll('g.node[data-id]')) {
    const us = state.times.get(Number(g.dataset.id));
    const rect = g.querySelector('rect');
    if (us === undefined) continue;
    rect.style.strokeWidth = g.classList.contains('selected') ? '' : 1 + 3 * (us / max);
  }
}

function showStep(ev) {
  $('step-label').textContent = `${ev.step} (${ev.phase}, ${ev.n_tokens} token${ev.n_tokens === 1 ? '' : 's'}, ${ev.ms.toFixed(2)} ms)`;
  const tbody = $('top5').querySelector('tbody');
  tbody.replaceChildren(...ev.top5.map((t) => {
    const tr = document.createElement('tr');
    tr.innerHTML = '<td class="text"></td><td class="p"></td><td class="bar"><div></div></td>';
    tr.children[0].textContent = JSON.stringify(t.text);
    tr.children[1].textContent = t.p.toFixed(4);
    tr.children[2].firstChild.style.width = `${Math.round(t.p * 100)}%`;
    return tr;
  }));
  state.times = new Map(ev.node_times.map(([id, us]) => [id, us]));
  const total = ev.node_times.reduce((a, [, us]) => a + us, 0);
  $('step-total').textContent = `(${(total / 1000).toFixed(2)} ms in ${ev.node_times.length} nodes)`;
  const slowest = [...ev.node_times].sort((a, b) => b[1] - a[1]);  // every node, slowest first
  const max = slowest.length ? slowest[0][1] : 1;
  $('times').replaceChildren(...slowest.map(([id, us]) => {
    const row = document.createElement('div');
    row.className = 't';
    const n = state.byId.get(id);
    row.innerHTML = '<span></span><div><div class="bar"></div></div><span></span>';
    row.children[0].textContent = n ? n.name : id;
    row.children[1].firstChild.style.width = `${(100 * us) / max}%`;
    row.children[2].textContent = `${us.toFixed(1)} µs`;
    row.addEventListener('click', () => { if (n) { if (n.layer >= 0) { state.expanded.add(n.layer); render(); } select(id); centerOn('n' + id); } });
    return row;
  }));
  paintTimes();
}

function setStatus(text, error) {
  $('status').textContent = text;
  $('status').classList.toggle('error', !!error);
}

async function run() {
  const body = { prompt: $('prompt').value, n_predict: Number($('n-predict').value) };
  const r = await fetch('/api/run', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const j = await r.json();
  if (!r.ok) setStatus(j.error.message, true);
  else if (state.doneRun !== j.run) setStatus(`run ${j.run}: ${j.prompt_tokens} prompt tokens…`);  // events may be first
}

function connect() {
  const es = new EventSource('/api/events');
  es.addEventListener('hello', (e) => { const j = JSON.parse(e.data); if (j.running) setStatus('a run is in progress'); });
  es.addEventListener('start', (e) => {
    const j = JSON.parse(e.data);
    state.running = true;
    $('run').disabled = true;
    const out = $('tokens');
    out.replaceChildren();
    const p = document.createElement('span');
    p.className = 'prompt';
    p.textContent = j.prompt_pieces.join('');
    out.appendChild(p);
    setStatus(`run ${j.run}: running`);
  });
  es.addEventListener('step', (e) => {
    const j = JSON.parse(e.data);
    const t = document.createElement('span');
    t.className = 'tok';
    t.textContent = j.token.text;
    t.title = `id ${j.token.id}, p ${j.top5[0].p.toFixed(4)}`;
    $('tokens').appendChild(t);
    showStep(j);
    if (state.selected !== null) loadStats();
  });
  es.addEventListener('done', (e) => {
    const j = JSON.parse(e.data);
    state.running = false;
    state.doneRun = j.run;
    $('run').disabled = false;
    setStatus(`run ${j.run}: ${j.n_generated} tokens (${j.stop_reason})`);
    document.body.dataset.runsDone = String(Number(document.body.dataset.runsDone || 0) + 1);
    if ($('phase').value === 'prefill') loadGraph();
    if (state.selected !== null) loadStats();
  });
  es.addEventListener('error', (e) => {
    if (e.data) {
      const j = JSON.parse(e.data);
      setStatus(`run ${j.run} failed: ${j.message}`, true);
      state.running = false;
      $('run').disabled = false;
    }
  });
}

async function main() {
  setupPanZoom();
  $('phase').addEventListener('change', loadGraph);
  $('show-weights').addEventListener('change', render);
  $('search').addEventListener('keydown', (e) => { if (e.key === 'Enter') search(); });
  $('expand-all').addEventListener('click', () => { for (let i = 0; i < state.nLayer; ++i) state.expanded.add(i); render(); });
  $('collapse-all').addEventListener('click', () => { state.expanded.clear(); render(); });
  $('run').addEventListener('click', run);
  connect();
  try {
    await loadInfo();
    await loadGraph();
  } catch (err) {
    $('graph-status').textContent = 'failed: ' + err.message;
  }
}

main();
