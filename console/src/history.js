// What the live charts and rates remember: the last few minutes of /api/stats snapshots.
// Rates are differences between two snapshots (the node's counters only grow), so a node
// restart (a counter going down) yields no rate for that step rather than a negative one.

export const KEEP = 150; // points: 5 minutes at one snapshot every 2 s

export class History {
  constructor() {
    this.times = [];
    this.queues = new Map(); // name -> {messages: [], added: [], acknowledged: []}
    this.links = new Map(); // node id -> {forwarded: []}
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
    for (const [id, bridge] of Object.entries(bridges(stats.cluster))) {
      const s = this.links.get(id) || fill(i, ["forwarded"]);
      this.links.set(id, s);
      s.forwarded.push(bridge.forwarded ?? null);
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

/**
 * The bridges' numbers of a stats or cluster answer, by member node id. Accepts the
 * members' list of /api/cluster (each {node_id, bridge}) or a map node id -> bridge.
 */
export function bridges(cluster) {
  const out = {};
  if (!cluster) return out;
  const add = (m) => {
    if (m && m.node_id) out[m.node_id] = m.bridge || m;
  };
  if (Array.isArray(cluster)) cluster.forEach(add);
  else if (Array.isArray(cluster.members)) cluster.members.forEach(add);
  else if (Array.isArray(cluster.cluster_connections))
    cluster.cluster_connections.forEach((c) => (c.members || []).forEach(add));
  else
    for (const [id, b] of Object.entries(cluster)) {
      if (b && typeof b === "object") out[id] = b.bridge || b;
    }
  return out;
}
