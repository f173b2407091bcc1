// The queues: a form to create one, the table (counts and kind from GET /api/queues, live)
// with each queue's operations, and the browse panel (a few messages, read without consuming).
import { useState } from "preact/hooks";
import { api } from "./api.js";
import { colour } from "./charts.jsx";

const fmt = (n) => (n == null ? "–" : Number(n).toLocaleString("en"));

// What Artemis counts as a queue's "messages killed" (its console's word), as the API's
// `killed` and the metric artemis_queue_messages_killed_total do.
const KILLED =
  "Messages killed: removed for good after max-delivery-attempts (sent to the dead-letter " +
  "address, or dropped without one) and removed by a purge, as Artemis counts them";

// Messages held until their time, as the API's `scheduled` and the metric
// artemis_queue_scheduled_messages count them (docs/queues.md, "Scheduled delivery").
const SCHEDULED =
  "Scheduled: messages held until their delivery time (sent with AMQ_SCHEDULED_DELAY or " +
  "AMQ_SCHEDULED_TIME, or waiting out a redelivery delay); they count in Messages too";

// The queue's kind as badges beside its name: [data-kind, label, what it means], from the
// API's exclusive, last_value_key, non_destructive and groups (docs/queues.md).
function kinds(q) {
  const found = [];
  if (q.exclusive) {
    found.push(["exclusive", "exclusive", "Exclusive queue: every message goes to one consumer, " +
      "the first to receive one; when it leaves, the next one takes over"]);
  }
  if (q.last_value_key != null) {
    found.push(["last-value", `last-value: ${q.last_value_key}`, "Last-value queue: of the " +
      `waiting messages with one value of the header “${q.last_value_key}”, only the latest is ` +
      `kept; ${fmt(q.replaced)} replaced by a newer one so far`]);
  }
  if (q.non_destructive) {
    found.push(["non-destructive", "non-destructive", "Non-destructive queue: consuming a " +
      "message does not remove it, every consumer reads every message; messages leave by " +
      "expiry, a newer last value, the ring size or an operation here"]);
  }
  if (q.groups > 0) {
    found.push(["groups", `groups: ${fmt(q.groups)}`, `${fmt(q.groups)} message group(s) ` +
      "owned by a consumer: each group's messages go to its owner, in order"]);
  }
  return found;
}

function Kinds({ queue }) {
  const found = kinds(queue);
  if (!found.length) return null;
  return (
    <span class="kinds">
      {found.map(([kind, label, title]) => (
        <span key={kind} class="pill kind" data-kind={kind} title={title}>
          {label}
        </span>
      ))}
    </span>
  );
}

export function CreateQueue({ ask }) {
  const [name, setName] = useState("");
  const [address, setAddress] = useState("");
  const [routing, setRouting] = useState("ANYCAST");
  const [durable, setDurable] = useState(true);
  const submit = (e) => {
    e.preventDefault();
    const spec = { name: name.trim(), address: address.trim() || name.trim(), routing_type: routing, durable };
    if (!spec.name) return;
    ask({
      title: "Create queue",
      text: `Create the ${durable ? "durable" : "non-durable"} ${routing} queue “${spec.name}” on address “${spec.address}”?`,
      confirm: "Create",
      run: async () => {
        await api.createQueue(spec);
        setName("");
        setAddress("");
        return `queue ${spec.name} created`;
      },
    });
  };
  return (
    <form class="create" onSubmit={submit} aria-label="Create a queue">
      <label>
        Name <input value={name} required onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label>
        Address{" "}
        <input value={address} placeholder="same as the name" onInput={(e) => setAddress(e.currentTarget.value)} />
      </label>
      <label>
        Routing{" "}
        <select value={routing} onChange={(e) => setRouting(e.currentTarget.value)}>
          <option>ANYCAST</option>
          <option>MULTICAST</option>
        </select>
      </label>
      <label class="check">
        <input type="checkbox" checked={durable} onChange={(e) => setDurable(e.currentTarget.checked)} /> Durable
      </label>
      <button type="submit">Create queue…</button>
    </form>
  );
}

function actions(queue, names, ask, browse) {
  const n = queue.name;
  const list = [
    ["Browse", () => browse(n), false],
    [
      "Purge",
      () =>
        ask({
          title: `Purge ${n}`,
          text:
            `Remove the ${fmt(queue.messages)} message(s) waiting in “${n}”? They are deleted, not sent to a ` +
            `dead-letter address, and counted as killed (the Killed column), as Artemis counts a purge. ` +
            `Messages being delivered to a consumer stay.`,
          confirm: "Purge",
          danger: true,
          run: async () => `purged ${n}: ${(await api.purge(n)).removed} message(s) removed (counted as killed)`,
        }),
      false,
    ],
    queue.paused
      ? ["Resume", () => ask({ title: `Resume ${n}`, text: `Resume delivery from “${n}” to its consumers?`, confirm: "Resume", run: async () => (await api.resume(n), `${n} resumed`) }), false]
      : ["Pause", () => ask({ title: `Pause ${n}`, text: `Pause “${n}”? Messages are still added but none is delivered until it is resumed.`, confirm: "Pause", run: async () => (await api.pause(n), `${n} paused`) }), false],
    [
      "Move",
      () =>
        ask({
          title: `Move messages from ${n}`,
          text: `Move every message of “${n}” to another queue?`,
          confirm: "Move",
          danger: true,
          fields: [{ name: "to", label: "To queue ", type: "select", options: names.filter((x) => x !== n) }],
          run: async (v) => `moved ${(await api.move(n, v.to)).moved} message(s) from ${n} to ${v.to}`,
        }),
      names.length < 2,
    ],
    [
      "Delete",
      () =>
        ask({
          title: `Delete ${n}`,
          text: `Delete the queue “${n}” and its ${fmt(queue.messages)} message(s)?`,
          confirm: "Delete",
          danger: true,
          fields: queue.consumers ? [{ name: "force", label: " even with its consumers (they are closed)", type: "checkbox" }] : [],
          run: async (v) => (await api.deleteQueue(n, v.force), `queue ${n} deleted`),
        }),
      false,
    ],
  ];
  return list.map(([label, onClick, disabled]) => (
    <button key={label} type="button" onClick={onClick} disabled={disabled} aria-label={`${label} queue ${n}`}>
      {label}
    </button>
  ));
}

export function QueuesTable({ queues, charted, toggleChart, ask, browse }) {
  const names = queues.map((q) => q.name);
  const chartedList = [...charted];
  if (!queues.length) return <p class="empty">No queue on this node.</p>;
  return (
    <div class="scroll">
      <table class="queues">
        <caption class="visually-hidden">Queues of this node</caption>
        <thead>
          <tr>
            <th scope="col">Chart</th>
            <th scope="col" class="name-col">Name · address, routing</th>
            <th scope="col" class="num">Consumers</th>
            <th scope="col" class="num">Messages</th>
            <th scope="col" class="num">Delivering</th>
            <th scope="col" class="num">
              <abbr title={SCHEDULED}>Scheduled</abbr>
            </th>
            <th scope="col" class="num">Added</th>
            <th scope="col" class="num">Acked</th>
            <th scope="col" class="num">
              <abbr title={KILLED}>Killed</abbr>
            </th>
            <th scope="col">Operations</th>
          </tr>
        </thead>
        <tbody>
          {queues.map((q) => {
            const at = chartedList.indexOf(q.name);
            return (
              <tr key={q.name} data-queue={q.name} class={q.paused ? "paused" : ""}>
                <td>
                  <input
                    type="checkbox"
                    checked={at >= 0}
                    onChange={() => toggleChart(q.name)}
                    aria-label={`Chart queue ${q.name}`}
                  />
                  {at >= 0 && <span class="swatch" style={{ background: colour(at) }} />}
                </td>
                <th scope="row">
                  <span class="name">{q.name}</span>
                  {q.paused && <span class="pill">paused</span>}
                  <Kinds queue={q} />
                  <br />
                  <small>
                    {q.address === q.name ? "" : `${q.address} · `}
                    {q.routing_type}
                    {q.durable ? "" : " · non-durable"}
                    {q.filter ? ` · filter ${q.filter}` : ""}
                  </small>
                </th>
                <td class="num consumers">{fmt(q.consumers)}</td>
                <td class="num messages">{fmt(q.messages)}</td>
                <td class="num">{fmt(q.delivering)}</td>
                <td class="num scheduled" title={SCHEDULED}>
                  {fmt(q.scheduled)}
                </td>
                <td class="num">{fmt(q.added)}</td>
                <td class="num">{fmt(q.acknowledged)}</td>
                <td class="num killed" title={KILLED}>
                  {fmt(q.killed)}
                </td>
                <td class="ops">{actions(q, names, ask, browse)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export function BrowsePanel({ browsing, onClose, onLimit }) {
  if (!browsing) return null;
  const { queue, limit, messages, error } = browsing;
  return (
    <section class="browse" aria-labelledby="browse-title">
      <h3 id="browse-title">
        Messages of {queue} <small>(the first {limit}, not consumed)</small>
      </h3>
      <div class="bar">
        <label>
          Show{" "}
          <select value={limit} onChange={(e) => onLimit(Number(e.currentTarget.value))}>
            {[10, 20, 100, 1000].map((n) => (
              <option key={n} value={n}>{n}</option>
            ))}
          </select>
        </label>
        <button type="button" onClick={onClose}>Close</button>
      </div>
      {error && <p class="error">{error}</p>}
      {messages && !messages.length && <p class="empty">No message in {queue}.</p>}
      {messages && messages.length > 0 && (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">ID</th>
                <th scope="col">Priority</th>
                <th scope="col">Persistent</th>
                <th scope="col" class="num">Size</th>
                <th scope="col">Time</th>
                <th scope="col">Headers</th>
                <th scope="col">Body</th>
              </tr>
            </thead>
            <tbody>
              {messages.map((m) => (
                <tr key={m.message_id}>
                  <td><code>{m.message_id}</code></td>
                  <td>{m.priority}</td>
                  <td>{m.persistent ? "yes" : "no"}</td>
                  <td class="num">{fmt(m.size)}</td>
                  <td>{m.timestamp ? new Date(m.timestamp > 1e11 ? m.timestamp : m.timestamp * 1000).toLocaleString() : "–"}</td>
                  <td class="headers">
                    {Object.entries(m.headers || {}).map(([k, v]) => (
                      <div key={k}><code>{k}</code>: {String(v)}</div>
                    ))}
                  </td>
                  <td class="body">
                    {m.body_encoding ? <small>({m.body_encoding}) </small> : null}
                    <code>{m.body}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
