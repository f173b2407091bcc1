// The cluster picture: this node and the members it knows (GET /api/cluster), one link per
// member for this node's bridge to it, coloured and labelled by its state (up, connecting,
// down), with the messages it forwarded (count and rate: moving dashes while it forwards)
// and the store-and-forward backlog waiting on this side. A node only knows its own
// links, so the picture is the cluster as this node sees it; each node's console shows its own.

import { linkKey } from "./history.js";

const W = 720;
const ROW = 92;
const NODE_W = 170;
const NODE_H = 54;

const fmt = (n) => (n == null ? "–" : Number(n).toLocaleString("en"));
const fmtRate = (r) => (r == null ? "–" : r >= 10 ? r.toFixed(0) : r.toFixed(1));
const rateOf = (rates, connection, m) =>
  rates[linkKey(connection.name, m.node_id)] ?? rates[linkKey("", m.node_id)] ?? null;
// A member is named by its connector when the topology has no name for it.
const clip = (text, n = 20) => {
  const t = text.replace(/^tcp:\/\//, "");
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
};
const short = (id) => (id ? String(id).slice(0, 8) : "");

function NodeBox({ x, y, name, id, self, state }) {
  return (
    <g
      class={`node ${self ? "self" : ""} state-${state}`}
      data-node={id}
      data-state={state}
      transform={`translate(${x - NODE_W / 2},${y - NODE_H / 2})`}
    >
      <rect width={NODE_W} height={NODE_H} rx="8" />
      <text x={NODE_W / 2} y="22" class="name">
        <title>{name || id}</title>
        {clip(name || short(id))}
      </text>
      <text x={NODE_W / 2} y="40" class="sub">
        {self ? `this node · ${short(id)}` : `${state} · ${short(id)}`}
      </text>
    </g>
  );
}

function Link({ from, to, member, rate }) {
  const b = member.bridge || {};
  const state = member.state || (b.connected ? "up" : "down");
  const flowing = state === "up" && rate > 0;
  // A curve out of this node, then straight into the member: the labels sit on the straight part.
  const x0 = from.x + NODE_W / 2;
  const x2 = to.x - NODE_W / 2;
  const x1 = x2 - 200;
  const path = `M${x0},${from.y} C${(x0 + x1) / 2},${from.y} ${(x0 + x1) / 2},${to.y} ${x1},${to.y} L${x2},${to.y}`;
  const backlog = b.store_and_forward_depth || 0;
  return (
    <g class={`link state-${state}`} data-link={member.node_id} data-state={state}>
      <path d={path} class="wire" />
      {flowing && <path d={path} class="flow" />}
      <text x={to.x - NODE_W / 2 - 10} y={to.y - 9} class="label end">
        {state} · {fmt(b.forwarded)} forwarded · {fmtRate(rate)}/s
      </text>
      <text x={to.x - NODE_W / 2 - 10} y={to.y + 18} class="label sub end">
        in flight {fmt(b.in_flight)} · redistributed {fmt(b.redistributed)}
      </text>
      {backlog > 0 && (
        <g class="backlog" transform={`translate(${x1 - 95},${to.y - 8})`}>
          <title>{`${backlog} message(s) in this node's store-and-forward queue for ${member.name || short(member.node_id)}`}</title>
          <rect width={Math.min(100, 70 + Math.log10(backlog + 1) * 8)} height="16" rx="3" />
          <text x="5" y="12">
            backlog {fmt(backlog)}
          </text>
        </g>
      )}
    </g>
  );
}

/** The other nodes of a cluster connection: its members but this one (`self`). */
export const others = (connection) => (connection.members || []).filter((m) => !m.self);

export function ClusterPicture({ cluster, connection, rates }) {
  const members = others(connection);
  const height = Math.max(140, members.length * ROW + 40);
  const self = { x: 110, y: height / 2 };
  const spots = members.map((_, i) => ({ x: W - 110, y: 20 + ROW / 2 + i * ROW }));
  const summary =
    `Cluster connection ${connection.name}: ${cluster.node.name || short(cluster.node.node_id)}` +
    (members.length
      ? ` linked to ${members.map((m) => `${m.name || short(m.node_id)} (${m.state})`).join(", ")}`
      : " alone: no other node known");
  return (
    <svg
      class="cluster-picture"
      viewBox={`0 0 ${W} ${height}`}
      role="img"
      aria-label={summary}
      data-cluster={connection.name}
    >
      {members.map((m, i) => (
        <Link key={m.node_id} from={self} to={spots[i]} member={m} rate={rateOf(rates, connection, m)} />
      ))}
      <NodeBox {...self} name={cluster.node.name} id={cluster.node.node_id} self state="up" />
      {members.map((m, i) => (
        <NodeBox key={m.node_id} {...spots[i]} name={m.name} id={m.node_id} state={m.state} />
      ))}
    </svg>
  );
}

/** The members as a table: the picture's numbers, for reading and for screen readers. */
export function MembersTable({ connection, rates }) {
  const members = others(connection);
  if (!members.length) return null;
  return (
    <table class="members">
      <caption>
        Links of cluster connection {connection.name} ({(connection.members || []).length} members,
        this node included; address "{connection.address || ""}", {connection.message_load_balancing}, max
        hops {connection.max_hops})
      </caption>
      <thead>
        <tr>
          <th scope="col">Node</th>
          <th scope="col">Connector</th>
          <th scope="col">State</th>
          <th scope="col" class="num">Forwarded</th>
          <th scope="col" class="num">Rate/s</th>
          <th scope="col" class="num">In flight</th>
          <th scope="col" class="num">Store-and-forward</th>
          <th scope="col" class="num">Redistributed</th>
        </tr>
      </thead>
      <tbody>
        {members.map((m) => {
          const b = m.bridge || {};
          return (
            <tr key={m.node_id} data-member={m.node_id}>
              <th scope="row">
                {m.name || short(m.node_id)} <small>{short(m.node_id)}</small>
              </th>
              <td>{m.connector}</td>
              <td>
                <span class={`pill state-${m.state}`}>{m.state}</span>
              </td>
              <td class="num forwarded">{fmt(b.forwarded)}</td>
              <td class="num">{fmtRate(rateOf(rates, connection, m))}</td>
              <td class="num">{fmt(b.in_flight)}</td>
              <td class="num">{fmt(b.store_and_forward_depth)}</td>
              <td class="num">{fmt(b.redistributed)}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
