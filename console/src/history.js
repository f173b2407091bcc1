// What the live charts and rates remember: the last few minutes of /api/stats snapshots.
// Rates are differences between two snapshots (the node's counters only grow), so a node
// restart (a counter going down) yields no rate for that step rather than a negative one.

export const KEEP = 150; // points: 5 minutes at one snapshot every 2 s

export class History {
  constructor() {
    this.times = [];
    this.queues = new Map(); // name -> {messages: [], added: [], acknowledged: []}
    this.links = new Map(); // linkKey(cluster, node id) -> {forwarded: [], backlog: []}
  }

  push(stats) {
    const i = this.times.length;
    this.times.push(stats.time);
    for (const [name, q] of Object.entries(stats.queues || {})) {
      const s = this.queues.get(name) || fill(i, ["messages", "added", "acknowledged"]);
      this.queues.set(name, s);
      s.messages.push(q.messages);
      s.added.push(q.added);
      s.acknowledged.push(q.acknowledged);
    }
    for (const [key, bridge] of Object.entries(bridges(stats.cluster))) {
      const s = this.links.get(key) || fill(i, ["forwarded", "backlog"]);
      this.links.set(key, s);
      s.forwarded.push(bridge.forwarded ?? null);
      s.backlog.push(bridge.store_and_forward_depth ?? null);
    }
    for (const series of [...this.queues.values(), ...this.links.values()]) {
      for (const values of Object.values(series)) {
        while (values.length <= i) values.push(null); // gone since: no value
        if (values.length > KEEP) values.shift();
      }
    }
    if (this.times.length > KEEP) this.times.shift();
  }

  /** Per-second rate of a counter series: one value per time (null where unknown). */
  rate(values) {
    return values.map((v, i) => {
      if (i === 0 || v == null || values[i - 1] == null) return null;
      const dt = this.times[i] - this.times[i - 1];
      const dv = v - values[i - 1];
      return dt > 0 && dv >= 0 ? dv / dt : null;
    });
  }

  /** The latest rate of a counter series, or null. */
  lastRate(values) {
    const r = this.rate(values);
    return r.length ? r[r.length - 1] : null;
  }
}

function fill(n, keys) {
  const s = {};
  for (const k of keys) s[k] = new Array(n).fill(null);
  return s;
}

/** The key of a link in History.links: its cluster connection and the member's node id. */
export const linkKey = (cluster, nodeId) => `${cluster}\u0000${nodeId}`;

const isBridge = (v) => v && typeof v === "object" && ("forwarded" in v || "connected" in v);

/**
 * The bridges' numbers of a stats or cluster answer, as {linkKey: bridge}. Accepts
 * /api/stats's {cluster name: {node id: bridge}}, /api/cluster's answer (its members, each
 * {node_id, bridge}; this node, `self`, has no bridge), or a flat {node id: bridge}.
 */
export function bridges(cluster) {
  const out = {};
  if (!cluster || typeof cluster !== "object") return out;
  if (Array.isArray(cluster.cluster_connections)) {
    for (const c of cluster.cluster_connections)
      for (const m of c.members || []) if (!m.self) out[linkKey(c.name, m.node_id)] = m.bridge || {};
    return out;
  }
  for (const [key, value] of Object.entries(cluster)) {
    if (isBridge(value)) out[linkKey("", key)] = value;
    else if (value && typeof value === "object")
      for (const [id, b] of Object.entries(value)) if (isBridge(b)) out[linkKey(key, id)] = b;
  }
  return out;
}
