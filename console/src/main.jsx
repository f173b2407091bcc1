// The artemis-py web console: one page over the node's JSON API (docs/management.md).
// It polls the node every POLL_MS (the node's facts, stats for the charts, queues, cluster,
// connections), keeps a few minutes of history in memory for the charts and rates, counts
// the node's uptime on between polls, and runs every operation through the confirmation
// dialog; the API's errors are shown as messages.
import { render } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { api } from "./api.js";
import { Charts, LinkCharts } from "./charts.jsx";
import { ClusterPicture, MembersTable, others } from "./cluster.jsx";
import { ConnectionsTable } from "./connections.jsx";
import { ConfirmDialog } from "./dialog.jsx";
import { HaFacts } from "./ha.jsx";
import { History, linkKey } from "./history.js";
import { BrowsePanel, CreateQueue, QueuesTable } from "./queues.jsx";

const POLL_MS = 2000;
const CHART_BY_DEFAULT = 6; // queues charted until the user picks
const TICK_MS = 1000; // the uptime shown counts on between polls

function uptime(s) {
  if (s == null) return "";
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : `${m}m ${Math.floor(s % 60)}s`;
}

/** The node's uptime as last read, counted on every TICK_MS (only this re-renders). */
function Uptime({ node }) {
  const [now, setNow] = useState(() => performance.now());
  useEffect(() => {
    const ticker = setInterval(() => setNow(performance.now()), TICK_MS);
    return () => clearInterval(ticker);
  }, []);
  const seconds = node.uptime_seconds + Math.max(0, now - node.at) / 1000;
  return <span class="uptime">up {uptime(seconds)}</span>;
}

function Notices({ notices, dismiss, pollError }) {
  // Errors in an alert region, confirmations in a status region; each can be dismissed.
  const ofKind = (kind) =>
    notices
      .filter((n) => n.kind === kind)
      .map((n) => (
        <p key={n.id} class={`notice ${kind}`}>
          {n.text}{" "}
          <button type="button" class="link" onClick={() => dismiss(n.id)} aria-label="Dismiss message">
            ×
          </button>
        </p>
      ));
  return (
    <div class="notices">
      <div role="alert">
        {pollError && <p class="notice error">{pollError}</p>}
        {ofKind("error")}
      </div>
      <div role="status">{ofKind("ok")}</div>
    </div>
  );
}

function App() {
  const [node, setNode] = useState(null); // /api/node, with `at`: when it was read
  const [queues, setQueues] = useState([]);
  const [cluster, setCluster] = useState(null);
  const [connections, setConnections] = useState(null);
  const [version, setVersion] = useState(0); // bumps when history grows
  const [pollError, setPollError] = useState(null);
  const [notices, setNotices] = useState([]);
  const [confirm, setConfirm] = useState(null);
  const [browsing, setBrowsing] = useState(null);
  const [picked, setPicked] = useState(null); // null: the default charted queues
  const [showInternal, setShowInternal] = useState(false);
  const history = useRef(new History());
  const nextId = useRef(1);

  const notify = useCallback((kind, text) => {
    const id = nextId.current++;
    setNotices((list) => [...list.slice(-4), { id, kind, text }]);
    if (kind === "ok") setTimeout(() => setNotices((l) => l.filter((n) => n.id !== id)), 6000);
  }, []);

  const poll = useCallback(async () => {
    const [stats, qs, cl, conns, facts] = await Promise.allSettled([
      api.stats(),
      api.queues(),
      api.cluster(),
      api.connections(),
      api.node(), // its uptime, and a restart
    ]);
    if (stats.status === "fulfilled") {
      history.current.push(stats.value);
      setVersion((v) => v + 1);
    }
    if (qs.status === "fulfilled") setQueues(qs.value);
    if (cl.status === "fulfilled") setCluster(cl.value);
    if (conns.status === "fulfilled") setConnections(conns.value);
    if (facts.status === "fulfilled") setNode({ ...facts.value, at: performance.now() });
    const failed = [stats, qs, cl, conns, facts].find((r) => r.status === "rejected");
    setPollError(failed ? `Cannot read the node: ${failed.reason.message}` : null);
  }, []);

  useEffect(() => {
    let timer;
    let stopped = false;
    const loop = async () => {
      await poll();
      if (!stopped) timer = setTimeout(loop, POLL_MS);
    };
    loop();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [poll]);

  const browse = useCallback(async (queue, limit = 20) => {
    setBrowsing({ queue, limit, messages: null, error: null });
    try {
      setBrowsing({ queue, limit, messages: await api.browse(queue, limit), error: null });
    } catch (e) {
      setBrowsing({ queue, limit, messages: null, error: e.message });
    }
  }, []);

  const done = useCallback(
    async (request, values) => {
      if (!request) return setConfirm(null);
      try {
        notify("ok", await request.run(values || {}));
      } catch (e) {
        notify("error", e.message);
      }
      setConfirm(null);
      poll();
    },
    [notify, poll],
  );

  // The node's own queues (store-and-forward queues of cluster links) only on demand.
  const internal = queues.filter((q) => q.internal).length;
  const shown = showInternal ? queues : queues.filter((q) => !q.internal);
  const names = shown.map((q) => q.name);
  const charted = (picked || names.slice(0, CHART_BY_DEFAULT)).filter((n) => names.includes(n));
  const toggleChart = (name) =>
    setPicked(charted.includes(name) ? charted.filter((n) => n !== name) : [...charted, name]);

  const h = history.current;
  const rates = {};
  for (const [id, s] of h.links) rates[id] = h.lastRate(s.forwarded);
  // One chart series per link; named by the member, and by the cluster connection too
  // when the node has more than one.
  const linked = cluster ? cluster.cluster_connections : [];
  const links = linked.flatMap((c) =>
    others(c).map((m) => ({
      key: linkKey(c.name, m.node_id),
      label: `→ ${m.name || String(m.node_id).slice(0, 8)}${linked.length > 1 ? ` (${c.name})` : ""}`,
    })),
  );

  return (
    <>
      <header>
        <h1>
          artemis-py <span class="node-name">{node ? node.name : "…"}</span>
        </h1>
        {node && (
          <p class="facts">
            version {node.version} · <Uptime node={node} /> · node ID{" "}
            <code>{node.node_id}</code> ·
            security {node.security_enabled ? "on" : "off"} · persistence{" "}
            {node.persistence_enabled ? "on" : "off"}
          </p>
        )}
        {node && <HaFacts ha={node.ha} />}
        <nav aria-label="Sections">
          <a href="#cluster">Cluster</a> <a href="#charts">Charts</a> <a href="#queues">Queues</a>{" "}
          <a href="#connections">Connections</a>
        </nav>
      </header>
      <Notices notices={notices} pollError={pollError} dismiss={(id) => setNotices((l) => l.filter((n) => n.id !== id))} />
      <main>
        <section id="cluster" aria-labelledby="cluster-title">
          <h2 id="cluster-title">Cluster</h2>
          {cluster && cluster.cluster_connections.length === 0 && (
            <p class="empty">This node is not in a cluster (no cluster-connection in its broker.xml).</p>
          )}
          {cluster &&
            cluster.cluster_connections.map((c) => (
              <div key={c.name} class="cluster">
                <ClusterPicture cluster={cluster} connection={c} rates={rates} />
                <MembersTable connection={c} rates={rates} />
              </div>
            ))}
          {cluster && cluster.cluster_connections.length > 0 && (
            <button
              type="button"
              class="danger"
              onClick={() =>
                setConfirm({
                  title: "Scale down this node",
                  text: `Scale down ${cluster.node.name || "this node"}: its messages move to another node of the cluster and it stops. Continue?`,
                  confirm: "Scale down",
                  danger: true,
                  run: async () => (await api.scaleDown(), "scale-down started"),
                })
              }
            >
              Scale down this node…
            </button>
          )}
        </section>
        <section id="charts" aria-labelledby="charts-title">
          <h2 id="charts-title">Charts</h2>
          <h3>Queue depth and rates</h3>
          <Charts history={h} names={charted} version={version} />
          {links.length > 0 && (
            <>
              <h3>Links to other nodes</h3>
              <p class="hint">
                Messages this node passes on to other nodes of its cluster: what each link forwards per second,
                and what waits in its store-and-forward queue.
              </p>
              <LinkCharts history={h} links={links} version={version} />
            </>
          )}
        </section>
        <section id="queues" aria-labelledby="queues-title">
          <h2 id="queues-title">Queues</h2>
          <CreateQueue ask={setConfirm} />
          {internal > 0 && (
            <label class="check">
              <input type="checkbox" checked={showInternal} onChange={(e) => setShowInternal(e.currentTarget.checked)} />
              Show the node's {internal} internal queue(s) (store-and-forward queues of cluster links)
            </label>
          )}
          <QueuesTable queues={shown} charted={charted} toggleChart={toggleChart} ask={setConfirm} browse={browse} />
          <BrowsePanel browsing={browsing} onClose={() => setBrowsing(null)} onLimit={(n) => browse(browsing.queue, n)} />
        </section>
        <section id="connections" aria-labelledby="connections-title">
          <h2 id="connections-title">Connections</h2>
          <ConnectionsTable connections={connections} ask={setConfirm} />
        </section>
      </main>
      <ConfirmDialog request={confirm} onDone={done} />
    </>
  );
}

render(<App />, document.getElementById("app"));
